"""Human work: the moderation queue, overrides, escalations, reprocessing.

A human decision is sticky: a provider result for any earlier operation finds the review no
longer `processing` and changes nothing (docs/design.md, invariant 10). Two moderators never hold one review:
"Review next" leases a review to one of them (SKIP LOCKED), and an override by anyone else
while the lease runs is refused.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, Q, When
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.errors import ClaimedByOther, NotApplicable, ReasonRequired, StaleVersion
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    Cause,
    ContentReview,
    Decision,
    DecisionSource,
    ModerationRequest,
    RequestStatus,
    ReviewStatus,
)
from moderation.queue import enqueue_on_commit
from moderation.services._audit import records_illegal_transitions, transition_review
from moderation.services.decide import decide_locked
from moderation.services.pipeline import review_claim_locked


def _lock_checked(review_id, expected_version: int | None, moderator=None, now: datetime | None = None) -> ContentReview:
    """Lock the review; refuse if it changed since `expected_version` or another moderator holds it."""
    review = ContentReview.objects.select_for_update(of=("self",)).select_related("client", "content").get(pk=review_id)
    if expected_version is not None and review.version != expected_version:
        changes = list(
            review.transitions.order_by("-id")[: max(review.version - expected_version, 0)]
            .values_list("from_status", "to_status", "cause", "actor", "actor_id")
        )
        raise StaleVersion(
            review_id=review_id,
            expected=expected_version,
            actual=review.version,
            changes=[f"{f} -> {t} ({c}, by {a}{':' + i if i else ''})" for f, t, c, a, i in reversed(changes)],
        )
    now = now or timezone.now()
    holder = review.claimed_by
    if holder is not None and holder != moderator and review.claim_expires_at and review.claim_expires_at > now:
        raise ClaimedByOther(f"{holder} is reviewing this until {review.claim_expires_at:%H:%M:%S}")
    return review


def _require_decided(review: ContentReview) -> None:
    """Overrides and reprocessing apply to decided reviews. A moderator's choice of another (a bulk
    action over mixed reviews) is refused here, so it is not counted as an illegal transition,
    which means a bug."""
    if not review.is_final:
        raise NotApplicable("not decided yet")


def _required(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("a reason is required")
    return reason


def review_take_next(*, moderator, now: datetime | None = None) -> ContentReview | None:
    """Lease the oldest unclaimed manual_review review to `moderator` (or give back their own).

    SKIP LOCKED: two moderators asking at once each get a different review, never the same.
    An expired lease counts as unclaimed, so an abandoned review returns to the queue.
    """
    now = now or timezone.now()
    with transaction.atomic():
        review = (
            ContentReview.objects.select_for_update(skip_locked=True)
            .filter(status=ReviewStatus.MANUAL_REVIEW)
            .filter(Q(claimed_by__isnull=True) | Q(claim_expires_at__lt=now) | Q(claimed_by=moderator))
            # The moderator's own review first (one review at a time), then the oldest.
            .order_by(Case(When(claimed_by=moderator, then=0), default=1), "completed_at", "id")
            .first()
        )
        if review is None:
            return None
        expires = now + timedelta(seconds=settings.MODERATOR_LEASE_S)
        ContentReview.objects.filter(pk=review.pk).update(claimed_by=moderator, claim_expires_at=expires)
        review.claimed_by, review.claim_expires_at = moderator, expires
    return review


def review_release(*, review_id, moderator) -> bool:
    """Give a leased review back to the queue."""
    return bool(ContentReview.objects.filter(pk=review_id, claimed_by=moderator).update(claimed_by=None, claim_expires_at=None))


@records_illegal_transitions
def review_override(
    *,
    review_id,
    label: str,
    reason: str,
    moderator,
    expected_version: int | None = None,
    actor: str = Actor.ADMIN,
    category: str = "",
) -> Decision:
    """A moderator's decision (manual_review|approved|rejected -> approved|rejected).

    With `expected_version` (what the moderator saw), a review that changed meanwhile is refused
    with StaleVersion instead of being overwritten blindly.
    """
    reason = _required(reason)
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        _require_decided(review)
        review.claimed_by, review.claim_expires_at = None, None
        decision = decide_locked(
            review,
            cause=Cause.MANUAL_OVERRIDE,
            label=label,
            source=DecisionSource.MODERATOR,
            moderator=moderator,
            reason=reason,
            category=category,
            actor=actor,
            actor_id=str(moderator) if moderator else "",
            transition_reason=reason,
            history_user=moderator,
            update_fields=("claimed_by", "claim_expires_at"),
        )
    return decision


@records_illegal_transitions
def review_escalate(*, review_id, reason: str, moderator, expected_version: int | None = None) -> ContentReview:
    """Take a review out of the provider's hands: a human decides (-> manual_review).

    A pending review is claimed first (two logged transitions). The live operation is closed as
    failed, so nothing retries it and a late result for it is `already_final`.
    """
    reason = _required(reason)
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        if review.status not in (ReviewStatus.PENDING, ReviewStatus.PROCESSING):
            # Likewise (_require_decided): a bulk escalation over decided reviews.
            raise NotApplicable(f"already {review.get_status_display().lower()}")
        if review.status == ReviewStatus.PENDING:
            review_claim_locked(review, worker_id=str(moderator), job_id="", actor=Actor.ADMIN)
        if review.active_idempotency_key and review.status == ReviewStatus.PROCESSING:
            ModerationRequest.objects.filter(
                idempotency_key=review.active_idempotency_key, status__in=OPEN_REQUEST_STATUSES
            ).update(status=RequestStatus.FAILED, next_attempt_at=None, last_error=f"escalated by {moderator}: {reason}")
        decide_locked(
            review,
            cause=Cause.MANUAL_ESCALATION,
            label=ReviewStatus.MANUAL_REVIEW,
            source=DecisionSource.MODERATOR,
            moderator=moderator,
            reason=reason,
            actor=Actor.ADMIN,
            actor_id=str(moderator),
            transition_reason=reason,
            history_user=moderator,
        )
    return review


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
        review = _lock_checked(review_id, expected_version, user)
        _require_decided(review)
        review.last_enqueued_at = timezone.now()
        review.claimed_by, review.claim_expires_at = None, None
        transition_review(
            review,
            Cause.REPROCESS,
            actor=actor,
            actor_id=actor_id,
            reason=reason,
            history_user=user,
            update_fields=["last_enqueued_at", "claimed_by", "claim_expires_at"],
        )
        enqueue_on_commit("moderation.tasks.moderate_review", for_review=review.pk, review_id=review.pk)
    return review
