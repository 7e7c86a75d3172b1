"""Human decisions: override a decision, send a review back through the provider."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.errors import ReasonRequired, StaleVersion
from moderation.models import Cause, ContentReview, Decision, DecisionSource
from moderation.queue import enqueue_on_commit
from moderation.services._audit import records_illegal_transitions, transition_review


def _lock_checked(review_id, expected_version: int | None) -> ContentReview:
    review = ContentReview.objects.select_for_update().get(pk=review_id)
    if expected_version is not None and review.version != expected_version:
        changes = list(
            review.transitions.order_by("-id")[: max(review.version - expected_version, 0)]
            .values_list("from_status", "to_status", "cause")
        )
        raise StaleVersion(
            review_id=review_id,
            expected=expected_version,
            actual=review.version,
            changes=[f"{f} -> {t} ({c})" for f, t, c in reversed(changes)],
        )
    return review


@records_illegal_transitions
def review_override(
    *,
    review_id,
    label: str,
    reason: str,
    moderator,
    expected_version: int | None = None,
    actor: str = Actor.ADMIN,
) -> Decision:
    """A moderator's decision (manual_review|approved|rejected -> approved|rejected).

    With `expected_version` (what the moderator saw), a review that changed meanwhile is refused
    with StaleVersion instead of being overwritten blindly.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("an override needs a reason")
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version)
        decision = Decision.objects.create(
            review=review,
            label=label,
            source=DecisionSource.MODERATOR,
            moderator=moderator,
            reason=reason,
        )
        review.decision = decision
        review.completed_at = timezone.now()
        transition_review(
            review,
            Cause.MANUAL_OVERRIDE,
            label=label,
            actor=actor,
            actor_id=str(moderator) if moderator else "",
            reason=reason,
            history_user=moderator,
            update_fields=["decision", "completed_at"],
        )
    return decision


@records_illegal_transitions
def review_reprocess(
    *,
    review_id,
    actor: str,
    actor_id: str,
    reason: str = "",
    user=None,
    expected_version: int | None = None,
) -> ContentReview:
    """Send a decided review through the provider again (-> pending; a new operation, new key)."""
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version)
        review.last_enqueued_at = timezone.now()
        transition_review(
            review,
            Cause.REPROCESS,
            actor=actor,
            actor_id=actor_id,
            reason=reason,
            history_user=user,
            update_fields=["last_enqueued_at"],
        )
        enqueue_on_commit("moderation.tasks.moderate_review", review_id=review.pk)
    return review
