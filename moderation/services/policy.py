"""Publishing and reading moderation policy versions."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Max

from moderation.models import ModerationPolicy
from moderation.policy import PRIORITY_WEIGHTS, validate_policy

_WORKPLACE_FIELDS = ("categories", *PRIORITY_WEIGHTS)
_PUBLISH_LOCK = 0x6D6F6470  # advisory lock id: serialises version numbering


DEFAULT_POLICY = {
    "reject_threshold": 0.9,
    "review_threshold": 0.5,
    "flagged_label": "manual_review",
    "notes": "Initial policy: reject from 0.9; a human looks from 0.5.",
}


def policy_active() -> ModerationPolicy:
    """The newest version (post_migrate publishes the default one, so there always is one)."""
    return ModerationPolicy.objects.order_by("-version").first() or policy_ensure_default()


def policy_ensure_default() -> ModerationPolicy:
    """Publish version 1 with the default thresholds if no policy exists yet."""
    existing = ModerationPolicy.objects.order_by("-version").first()
    return existing or policy_publish(**DEFAULT_POLICY)


@transaction.atomic
def policy_publish(
    *,
    reject_threshold: float,
    review_threshold: float,
    category_thresholds: dict | None = None,
    flagged_label: str = "manual_review",
    notes: str = "",
    created_by=None,
    **workplace,
) -> ModerationPolicy:
    """Publish a new policy version; past versions stay as they were (decisions point at them).

    `workplace` holds the human-queue fields (`categories` and the priority weights,
    moderation.policy.PRIORITY_WEIGHTS); each one left out takes the model's default.
    """
    unknown = set(workplace) - set(_WORKPLACE_FIELDS)
    if unknown:
        raise TypeError(f"policy_publish() got unexpected fields: {', '.join(sorted(unknown))}")
    workplace = {name: workplace[name] if workplace.get(name) is not None
                 else ModerationPolicy._meta.get_field(name).get_default() for name in _WORKPLACE_FIELDS}
    category_thresholds = category_thresholds or {}
    errors = validate_policy(
        {
            "reject_threshold": reject_threshold,
            "review_threshold": review_threshold,
            "category_thresholds": category_thresholds,
            "flagged_label": flagged_label,
            **workplace,
        }
    )
    if errors:
        raise ValidationError(errors)
    # Two publishers at once would both read the same max(version); the advisory lock makes
    # the second wait for the first to commit, then number after it.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PUBLISH_LOCK])
    latest = ModerationPolicy.objects.aggregate(v=Max("version"))["v"] or 0
    return ModerationPolicy.objects.create(
        version=latest + 1,
        reject_threshold=reject_threshold,
        review_threshold=review_threshold,
        category_thresholds=category_thresholds,
        flagged_label=flagged_label,
        notes=notes,
        created_by=created_by,
        **workplace,
    )
