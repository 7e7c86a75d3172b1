"""The invariants of docs/design.md, checked against the database: by the property-based test after every
step, and by `manage.py race_lab` after a run. Each check returns violations, never raises."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count

from audit.models import ReviewTransition
from callbacks.models import ProviderCallback
from moderation.models import (
    FINAL_STATUSES,
    OPEN_REQUEST_STATUSES,
    Cause,
    ContentReview,
    Decision,
    DecisionNotification,
    DecisionSource,
    ModerationRequest,
    RequestStatus,
    ReviewStatus,
)

S = ReviewStatus
# docs/design.md's state machine: (from, to, cause).
LEGAL = {
    (S.PENDING, S.PROCESSING, Cause.JOB_STARTED),
    (S.PROCESSING, S.PROCESSING, Cause.RETRY_RECONCILE),
    *((S.PROCESSING, to, cause) for to in FINAL_STATUSES for cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK)),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.PROVIDER_FAILED),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.MANUAL_ESCALATION),
    *((src, to, Cause.MANUAL_OVERRIDE) for src in FINAL_STATUSES for to in (S.APPROVED, S.REJECTED)),
    *((src, S.PENDING, Cause.REPROCESS) for src in FINAL_STATUSES),
    (S.APPROVED, S.MANUAL_REVIEW, Cause.USER_REPORTS),
    (S.REJECTED, S.MANUAL_REVIEW, Cause.APPEAL),
}


def review_violations(review_ids: Iterable) -> list[str]:
    """Invariants 1, 4 and 9 for each review: legal, chained, logged transitions that agree
    with the row and its history; a decided review says what decided it; a processing review's
    live key is an open operation of its own; a review waiting for a human is in one queue."""
    problems = []
    logs: dict = {}
    for t in ReviewTransition.objects.filter(review_id__in=review_ids).order_by("id"):
        logs.setdefault(t.review_id, []).append(t)
    history = dict(
        ContentReview.history.model.objects.filter(id__in=review_ids).values_list("id").annotate(n=Count("history_id"))
    )
    for review in ContentReview.objects.filter(pk__in=review_ids).select_related("decision"):
        log = logs.get(review.pk, [])
        for t in log:
            if (t.from_status, t.to_status, t.cause) not in LEGAL:
                problems.append(f"{review.pk}: illegal transition {t.from_status} -> {t.to_status} ({t.cause})")
        if [t.from_status for t in log[1:]] != [t.to_status for t in log[:-1]]:
            problems.append(f"{review.pk}: transition log is not a chain")
        if (log[-1].to_status if log else S.PENDING) != review.status or (log and log[0].from_status != S.PENDING):
            problems.append(f"{review.pk}: status {review.status} disagrees with its transition log")
        if review.version != 1 + len(log) or history.get(review.pk, 0) != 1 + len(log):
            problems.append(f"{review.pk}: version/history ({review.version}/{history.get(review.pk)}) vs {len(log)} transitions")
        if review.status in FINAL_STATUSES and (review.decision is None or review.decision.label != review.status):
            problems.append(f"{review.pk}: {review.status} without a matching decision")
        # A review waits in exactly one human queue while, and only while, it is in manual_review.
        if (review.status == S.MANUAL_REVIEW) != bool(review.queue and review.queue_order_at):
            problems.append(f"{review.pk}: {review.status} with queue {review.queue or 'none'}")
        if review.status == S.PROCESSING:
            live = ModerationRequest.objects.filter(idempotency_key=review.active_idempotency_key).first()
            if live is None or live.review_id != review.pk or live.status not in OPEN_REQUEST_STATUSES:
                problems.append(f"{review.pk}: processing without an open live operation")
    return problems


def pipeline_violations(review_ids: Iterable) -> list[str]:
    """Invariants 3, 4, 5 and 7 across the reviews' operations, decisions and callbacks, and 9 for
    moderators' rejections (each names its violation category)."""
    problems = []
    provider = Decision.objects.filter(review_id__in=review_ids, source=DecisionSource.PROVIDER).select_related("request")
    for decision in provider:
        if decision.request is None or decision.request.status != RequestStatus.COMPLETED:
            problems.append(f"decision {decision.pk}: from an operation that did not complete")
    if provider.values("request").distinct().count() != provider.count():
        problems.append("an operation decided a review twice")
    replaced = ModerationRequest.objects.filter(
        review_id__in=review_ids, superseded_by__isnull=False, superseded_by__cause=Cause.RETRY_RECONCILE
    ).exclude(status=RequestStatus.SUPERSEDED)
    problems += [f"request {r.pk}: superseded, then {r.status}" for r in replaced]
    if ModerationRequest.objects.filter(review_id__in=review_ids, idempotency_key__isnull=True).exists():
        problems.append("an operation without a stored key")
    decisions = Decision.objects.filter(review_id__in=review_ids)
    uncategorised = decisions.filter(source=DecisionSource.MODERATOR, label=S.REJECTED, category="")
    problems += [f"decision {d}: a moderator's rejection without a violation category"
                 for d in uncategorised.values_list("pk", flat=True)]
    if DecisionNotification.objects.filter(decision__in=decisions).count() != decisions.count():
        problems.append("decisions and notifications do not pair one to one")
    keys = ModerationRequest.objects.filter(review_id__in=review_ids).values("idempotency_key")
    twice = ProviderCallback.objects.filter(idempotency_key__in=keys).values("provider", "provider_event_id").annotate(
        n=Count("id")).filter(n__gt=1)
    problems += [f"callback {row['provider_event_id']} stored {row['n']} times" for row in twice]
    return problems


def violations(review_ids: Iterable) -> list[str]:
    review_ids = list(review_ids)
    return review_violations(review_ids) + pipeline_violations(review_ids)
