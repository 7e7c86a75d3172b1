"""Names that do not collide (docs/design.md, "Names"): a worker *claims* a review, a moderator
holds a *lease* on one; the *job queue* is django-q2's, the *review queues* are the humans'.

The moderator's hold was called a claim once (`claimed_by`, `claim_expires_at`, `ClaimedByOther`),
so "claim" meant two things. These tests keep the old names from coming back: the model and the
errors, a scan of the product's files and docs for the old names, and a scan of the files that
are the moderator's side for any "claim" at all.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from moderation import errors
from moderation.api.errors import exception_handler
from moderation.models import ContentReview
from moderation.observability import workplace

ROOT = Path(__file__).resolve().parents[2]
# The product, the tools beside it and their docs (tests and migrations are history or quote the
# old names on purpose, this file included).
SCANNED = ["audit", "callbacks", "config", "moderation", "templates", "deploy", "bench", "lab", "docs", "README.md"]
SKIPPED_DIRS = {"migrations", "__pycache__", "screenshots"}

# The moderator's lease under its old names, and "moderation queue", which meant the job queue
# in one place (Q_NAME, the `moderation` cluster) and the review queues in another.
OLD_NAMES = re.compile(
    r"(?<!\w)(claimed_by|claim_expires_at|ClaimedByOther|moderator_claim)|\bunclaimed\b|\bmoderation queues?\b",
    re.IGNORECASE,
)
# The lease's columns keep their old names for one release: migrations run while the old code
# still serves (docs/operations.md, "A new release"), and a renamed column would fail its queries.
ALLOWED_LINES = {
    ("moderation/models/core.py", 'db_column="claimed_by_id",'),
    ("moderation/models/core.py", 'lease_expires_at = models.DateTimeField(null=True, blank=True, db_column="claim_expires_at")'),
}

# The moderator's side: taking, holding and releasing a review, and the pages that show who holds
# one. No word here says "claim", but for one name of the worker's side.
MODERATOR_SIDE = [
    "moderation/services/moderator.py",
    "moderation/admin/reviews.py",
    "moderation/admin/review_forms.py",
    "moderation/observability/workplace.py",
    "templates/admin/moderation/contentreview",
]
# Escalating a pending review moves it to processing through the worker's claim path.
WORKER_NAMES_ON_THE_MODERATOR_SIDE = {"reviews_claim_locked"}


def _files(paths: list[str]):
    for name in paths:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in candidates:
            if SKIPPED_DIRS.isdisjoint(file.relative_to(ROOT).parts):
                try:
                    yield file.relative_to(ROOT).as_posix(), file.read_text()
                except UnicodeDecodeError:  # images, fonts
                    continue


def old_names_in(files) -> list[str]:
    return [
        f"{name}:{n}: {line.strip()}"
        for name, text in files
        for n, line in enumerate(text.splitlines(), 1)
        if OLD_NAMES.search(line) and (name, line.strip()) not in ALLOWED_LINES
    ]


def claim_words_in(files) -> list[str]:
    return [
        f"{name}:{n}: {word}"
        for name, text in files
        for n, line in enumerate(text.splitlines(), 1)
        for word in re.findall(r"\w*claim\w*", line, re.IGNORECASE)
        if word not in WORKER_NAMES_ON_THE_MODERATOR_SIDE
    ]


def test_the_moderators_hold_is_a_lease_in_the_model_the_errors_and_the_figures():
    fields = {field.name for field in ContentReview._meta.get_fields()}
    assert sorted(name for name in fields if "claim" in name) == []
    assert {"leased_to", "lease_expires_at"} <= fields
    assert sorted(name for name in vars(errors) if "claim" in name.lower()) == []
    assert exception_handler(errors.LeasedToOther("held by ann"), {}).data["error"] == "leased_to_other"
    figures = {f"{cls.__name__}.{field.name}" for cls in vars(workplace).values() if dataclasses.is_dataclass(cls)
               for field in dataclasses.fields(cls)}
    assert "ReviewQueueFigures.leased" in figures
    assert sorted(name for name in figures if "claim" in name) == []


def test_no_product_file_or_doc_calls_the_lease_a_claim():
    assert old_names_in(_files(SCANNED)) == []


def test_the_moderators_side_never_says_claim():
    assert claim_words_in(_files(MODERATOR_SIDE)) == []


def test_the_scans_find_what_they_look_for():
    """The scans are not blind: the old names, in code and prose, are found; the worker's claim
    and the allowed column names are not."""
    old = [("x.py", "review.claimed_by_id = None\nQ(claim_expires_at__lt=now)\n"),
           ("y.md", "leases the most urgent unclaimed review\nthe moderation queue\n"),
           ("z.html", "{% if claimed_by_me %}\n")]
    assert len(old_names_in(old)) == 5
    assert old_names_in([("x.py", "services.review_claimed_by_batch(review_id=r)\nEventKind.CLAIM_LOST\n"),
                         ("moderation/models/core.py", '        db_column="claimed_by_id",\n')]) == []
    assert claim_words_in([("a.py", "from x import reviews_claim_locked\n")]) == []
    assert claim_words_in([("a.py", "holder = review.claim_holder  # who claimed it\n")]) == [
        "a.py:1: claim_holder", "a.py:1: claimed"]
