"""The invariants of docs/design.md, checked against the database: by the property-based test after every
step, and by `manage.py race_lab` after a run. Each check returns violations, never raises."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, F

from audit.models import ReviewTransition
from callbacks.models import ProviderCallback
from moderation.models import (
    FINAL_STATUSES,
    Appeal,
    AppealStatus,
    ReportEscalation,
    appeal_outcome,
    OPEN_REQUEST_STATUSES,
    Cause,
    ContentReview,
    Decision,
    DecisionNotification,
    DecisionSource,
    ContentErasure,
    ModerationRequest,
    ProviderAttempt,
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
    (S.PENDING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    (S.MANUAL_REVIEW, S.REJECTED, Cause.CONTENT_ERASED),  # erased under appeal: the rejection stands
}
# Transitions that send a decided review to a human without a decision of their own: the
# decision they contest (its label) stays the review's until a moderator decides.
CONTESTING = {Cause.USER_REPORTS: S.APPROVED, Cause.APPEAL: S.REJECTED}


def _decision_matches(review: ContentReview, log: list) -> bool:
    if review.decision is None:
        return False
    if review.decision.label == review.status:
        return True
    contested = CONTESTING.get(log[-1].cause) if log else None
    return review.status == S.MANUAL_REVIEW and review.decision.label == contested


def review_violations(review_ids: Iterable) -> list[str]:
    """Invariants 1, 4 and 9 for each review: legal, chained, logged transitions that agree
    with the row and its history; a decided review says what decided it (a review that reports
    or an appeal sent to a human, the decision contested); a processing review's live key is an
    open operation of its own; a review waiting for a human is in one queue."""
    problems = []
    logs: dict = {}
    for t in ReviewTransition.objects.filter(review_id__in=review_ids).order_by("id"):
        logs.setdefault(t.review_id, []).append(t)
    history = dict(
        ContentReview.history.model.objects.filter(id__in=review_ids).values_list("id").annotate(n=Count("history_id"))
    )
    for review in ContentReview.objects.filter(pk__in=review_ids).select_related("decision", "content"):
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
        if review.status in FINAL_STATUSES and not _decision_matches(review, log):
            problems.append(f"{review.pk}: {review.status} without a matching decision")
        # A review waits in exactly one review queue while, and only while, it is in manual_review
        # with content left to judge (an erased one waits in none).
        waits = review.status == S.MANUAL_REVIEW and review.content.erased_at is None
        if waits != bool(review.queue and review.queue_order_at):
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
    crossings = ReportEscalation.objects.filter(review_id__in=review_ids)
    if DecisionNotification.objects.filter(escalation__in=crossings).count() != crossings.count():
        problems.append("report-threshold crossings and notifications do not pair one to one")
    keys = ModerationRequest.objects.filter(review_id__in=review_ids).values("idempotency_key")
    twice = ProviderCallback.objects.filter(idempotency_key__in=keys).values("provider", "provider_event_id").annotate(
        n=Count("id")).filter(n__gt=1)
    problems += [f"callback {row['provider_event_id']} stored {row['n']} times" for row in twice]
    return problems


def erasure_violations(review_ids: Iterable) -> list[str]:
    """Invariant 16 for the erased ones among the reviews: a tombstone, nothing left of the
    content, the review out of moderation, and no provider attempt started after the erasure."""
    problems = []
    for erasure in ContentErasure.objects.filter(review_id__in=review_ids).select_related("content", "review"):
        content = erasure.content
        if content.erased_at is None or content.text or content.media_url or content.metadata:
            problems.append(f"{erasure.review_id}: erased, but its content is not blank")
        if erasure.review.status not in FINAL_STATUSES:
            problems.append(f"{erasure.review_id}: erased, but still {erasure.review.status}")
    late = ProviderAttempt.objects.filter(
        request__review__erasure__isnull=False, request__review_id__in=review_ids,
        started_at__gt=F("request__review__erasure__erased_at"),
    )
    problems += [f"{a.request.review_id}: provider attempt {a.pk} started after the erasure" for a in late.select_related("request")]
    return problems


def report_violations(review_ids: Iterable) -> list[str]:
    """Invariant 12: a decision crosses the report threshold at most once, and every
    `user_reports` transition is such a crossing, recorded against the decision it contested."""
    problems = []
    transitions = dict(ReviewTransition.objects.filter(review_id__in=review_ids, cause=Cause.USER_REPORTS)
                       .values_list("review_id").annotate(n=Count("id")).order_by())
    crossings = ReportEscalation.objects.filter(review_id__in=review_ids).select_related("decision", "transition")
    recorded = dict(crossings.values_list("review_id").annotate(n=Count("id")).order_by())
    for review_id in transitions.keys() | recorded.keys():
        if transitions.get(review_id, 0) != recorded.get(review_id, 0):
            problems.append(f"{review_id}: {transitions.get(review_id, 0)} user_reports transitions, "
                            f"{recorded.get(review_id, 0)} threshold crossings recorded")
    per_decision = crossings.values("decision").annotate(n=Count("id")).filter(n__gt=1)
    problems += [f"decision {row['decision']}: crossed the report threshold {row['n']} times" for row in per_decision]
    for crossing in crossings:
        if crossing.transition.cause != Cause.USER_REPORTS or crossing.decision.label != S.APPROVED:
            problems.append(f"{crossing.review_id}: threshold crossing {crossing.pk} is not a user_reports "
                            "transition of an approval")
    return problems


def appeal_violations(review_ids: Iterable) -> list[str]:
    """Invariant 13: one appeal per rejection, logged once; open only while the review waits for
    a human with the appealed decision; resolved by another moderator's decision that matches
    its outcome."""
    problems = []
    appeals = list(Appeal.objects.filter(review_id__in=review_ids)
                   .select_related("review__content", "decision", "resolution"))
    transitions = dict(ReviewTransition.objects.filter(review_id__in=review_ids, cause=Cause.APPEAL)
                       .values_list("review_id").annotate(n=Count("id")).order_by())
    per_review: dict = {}
    for appeal in appeals:
        per_review[appeal.review_id] = per_review.get(appeal.review_id, 0) + 1
        problems += [f"{appeal.review_id}: appeal {appeal.pk} {problem}" for problem in _appeal_problems(appeal)]
    for review_id in transitions.keys() | per_review.keys():
        if transitions.get(review_id, 0) != per_review.get(review_id, 0):
            problems.append(f"{review_id}: {per_review.get(review_id, 0)} appeals, "
                            f"{transitions.get(review_id, 0)} appeal transitions")
    twice = Appeal.objects.filter(review_id__in=review_ids).values("decision").annotate(n=Count("id")).filter(n__gt=1)
    problems += [f"decision {row['decision']}: appealed {row['n']} times" for row in twice]
    return problems


def _appeal_problems(appeal: Appeal) -> list[str]:
    review, appealed, resolution = appeal.review, appeal.decision, appeal.resolution
    problems = [] if appealed.label == S.REJECTED and appealed.review_id == review.pk else ["contests no rejection"]
    erased = review.content.erased_at is not None
    if appeal.status == AppealStatus.OPEN:
        if review.status != S.MANUAL_REVIEW or review.decision_id != appealed.pk:
            problems.append(f"open while the review is {review.status} with decision {review.decision_id}")
        elif erased or not review.queue:
            # No moderator would ever decide it: "review next" and the review queues offer only queued,
            # unerased reviews (erasure closes the appeal instead).
            problems.append(f"open, but no queue offers it{' (its content was erased: erase_content again closes it)' if erased else ''}")
        return problems
    # A moderator's later decision resolves an appeal; erasure closes one with a system decision.
    by = DecisionSource.SYSTEM if erased and resolution.source == DecisionSource.SYSTEM else DecisionSource.MODERATOR
    if resolution.review_id != review.pk or resolution.source != by or resolution.pk < appealed.pk:
        problems.append("resolved by something other than a later moderator decision")
    if appeal_outcome(resolution.label) != appeal.status:
        problems.append(f"{appeal.status} by a decision to {resolution.label}")
    if appealed.moderator_id is not None and resolution.moderator_id == appealed.moderator_id:
        problems.append("decided by the moderator who made the appealed decision")
    return problems


def violations(review_ids: Iterable) -> list[str]:
    review_ids = list(review_ids)
    return (review_violations(review_ids) + pipeline_violations(review_ids) + report_violations(review_ids)
            + appeal_violations(review_ids) + erasure_violations(review_ids))
