"""'Act on all of this author's content matching ...' under concurrency, on real PostgreSQL with
threads (docs/workplace.md, "Authors"; moderation/services/bulk.py). The job is prepared as a
moderator does it, from the author page's choices (the author's filter and "today"), and runs
while a moderator decides some of the same reviews, a second identical job runs over them, and
the author posts again.

The guards: each review is decided against the version frozen for it when the job was
confirmed, under its row lock (remove `expected_version` from `bulk._act` and a review the
moderator or the other job decided is decided again: these tests fail); and the targets are
frozen at the confirmation, so what the author posts meanwhile is not the job's."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from moderation import services
from moderation.errors import StaleVersion
from moderation.models import Author, BulkItemOutcome, BulkJob, BulkJobItem, ContentReview, Decision, DecisionSource
from moderation.services import bulk
from tests.helpers import collide, staff_browser
from tests.moderation.test_admin_authors import authored

pytestmark = pytest.mark.django_db(transaction=True)
WAVE = 16


def posted(client, author_id: str, text: str) -> ContentReview:
    """A post the model was unsure about: it waits for a human."""
    return authored(client, author_id, "manual_review", text=text)


@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "supervisor")


@pytest.fixture
def sam(django_user_model):
    return staff_browser(django_user_model, "sam", "moderator").user


@pytest.fixture
def wave(api_client):
    """The spam account's posts of today, one of two days ago, and another author's post."""
    today = [posted(api_client, "spam-7", f"Cheap watches at shop.example, deal {i}") for i in range(WAVE)]
    older = posted(api_client, "spam-7", "an older post")
    ContentReview.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=2))
    bystander = posted(api_client, "bystander", "Cheap watches at shop.example, my own")
    return today, older, bystander


def rejecting_todays_posts(browser: Client, author: Author) -> BulkJob:
    """The author page's "Approve or reject all matching…" for today's posts, the decision form
    (a canned reason only), then the confirmation."""
    chosen = browser.get(f"/admin/moderation/author/{author.pk}/bulk/",
                         {"action": "override", "submitted": "today", "status__exact": "", "q": ""})
    assert chosen.status_code == 302, chosen
    before = set(BulkJob.objects.values_list("pk", flat=True))
    drafted = browser.post(chosen["Location"], {"label": "rejected", "category": "spam", "reason_codes": ["spam:scam"]})
    assert drafted.status_code == 302, drafted
    [job] = BulkJob.objects.exclude(pk__in=before)
    assert browser.post(f"/admin/moderation/bulkjob/{job.pk}/start/").status_code == 302
    job.refresh_from_db()
    assert job.status == "queued"
    return job


def run_to_the_end(job: BulkJob) -> str:
    return services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 120)


def moderator_decisions(review) -> int:
    return Decision.objects.filter(review=review, source=DecisionSource.MODERATOR).count()


def test_the_author_job_a_moderator_a_second_identical_job_and_a_new_post_collide_each_review_decided_once(
        api_client, mia, sam, wave, monkeypatch):
    today, older, bystander = wave
    author = Author.objects.get(client=api_client, author_id="spam-7")
    first, second = rejecting_todays_posts(mia, author), rejecting_todays_posts(mia, author)
    assert set(first.items.values_list("review_id", flat=True)) == {r.pk for r in today}
    real_act = bulk._act
    started = threading.Event()

    def act_slowly(job, item):  # the jobs run long enough for the others to land mid-way
        started.set()
        time.sleep(0.02)
        return real_act(job, item)

    monkeypatch.setattr(bulk, "_act", act_slowly)
    won, new_posts = [], []

    def moderator():
        assert started.wait(20)
        for review in reversed(today[::3]):  # from the jobs' last reviews (decided first) to their first
            try:
                services.review_override(review_id=review.pk, label="approved", reason="a real shop, not spam",
                                         moderator=sam, expected_version=review.version)
                won.append(review.pk)
            except StaleVersion:
                pass  # a job rejected it first: sam is told, nothing applied

    def author_posts_again():
        assert started.wait(20)
        for i in range(3):
            new_posts.append(posted(api_client, "spam-7", f"Cheap watches again, deal {i}"))

    collide(4, lambda i: (lambda: run_to_the_end(first), lambda: run_to_the_end(second), moderator,
                          author_posts_again)[i](), timeout=120)

    first.refresh_from_db()
    second.refresh_from_db()
    assert won, "the moderator won no review: the test proved nothing"
    assert (first.status, second.status) == ("done", "done")
    assert any(p.created_at < max(first.finished_at, second.finished_at) for p in new_posts), \
        "the author's new posts all came after both jobs: the test proved nothing"
    for review in today:  # one decision each: by sam, or by exactly one of the jobs
        assert moderator_decisions(review) == 1, review.pk
        done_by = BulkJobItem.objects.filter(review=review, outcome=BulkItemOutcome.DONE).count()
        assert done_by == (0 if review.pk in won else 1), review.pk
    assert set(ContentReview.objects.filter(pk__in=won).values_list("status", flat=True)) == {"approved"}
    rejected = ContentReview.objects.filter(pk__in=[r.pk for r in today]).exclude(pk__in=won)
    assert set(rejected.values_list("status", flat=True)) == {"rejected"}
    assert {tuple(d.reason_codes) for d in Decision.objects.filter(review__in=rejected, source=DecisionSource.MODERATOR)} \
        == {("scam",)}
    # Not the job's: the author's posts after the confirmation, an older post, another author's.
    for review in [*new_posts, older, bystander]:
        review.refresh_from_db()
        assert moderator_decisions(review) == 0 and review.status == "manual_review", review.pk
        assert not BulkJobItem.objects.filter(review=review).exists()
    # What the second job skipped, it says why in words: decided since it was confirmed.
    skipped = second.items.filter(outcome=BulkItemOutcome.SKIPPED).values_list("reason", flat=True)
    assert all(reason.startswith("it changed since you opened it: ") for reason in skipped), set(skipped)
