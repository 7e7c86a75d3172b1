"""Finishing what was left behind: due retries, lost jobs, operations that went silent.

The sweeper runs on a django-q2 schedule, possibly on several clusters at once. Each part takes
its rows with `SKIP LOCKED` and marks them, so overlapping sweeps split the work instead of
doing it twice; and every job they enqueue is itself safe to run twice.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit import context
from audit.models import ReviewTransition
from moderation.errors import IllegalTransition
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    AttemptOutcome,
    Cause,
    CircuitState,
    ContentReview,
    ModerationRequest,
    ProviderAttempt,
    ResultOutcome,
    ReviewStatus,
)
from moderation.jobs import enqueue_batch, enqueue_on_commit
from moderation.services.transitions import records_illegal_transitions
from moderation.services.breaker import breaker_may_claim, circuit_get
from moderation.services.notifications import notifications_due, notifications_to_sweep, oldest_of_each_client
from moderation.providers import OperationStatus, get_provider
from moderation.selectors import stuck_cutoff, stuck_requests, stuck_review_ids
from moderation.services.pipeline import (
    request_fail_reported,
    request_give_up_locked,
    request_supersede_locked,
    review_give_up_waiting,
)
from moderation.services.results import review_finalize

logger = logging.getLogger(__name__)


@dataclass
class SweepReport:
    retries_enqueued: list = field(default_factory=list)
    notifications_enqueued: list = field(default_factory=list)
    pending_requeued: list = field(default_factory=list)
    redispatched: list = field(default_factory=list)
    superseded: list = field(default_factory=list)
    escalated: list = field(default_factory=list)
    recovered: list = field(default_factory=list)  # completed, by asking the provider
    postponed: list = field(default_factory=list)  # the provider says it is still working

    def summary(self) -> str:
        return ", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in vars(self).items())


def reviews_sweep(*, now: datetime | None = None, limit: int = 500) -> SweepReport:
    now = now or timezone.now()
    report = SweepReport()
    report.retries_enqueued = _enqueue_due_retries(now, limit)
    report.notifications_enqueued = enqueue_batch(
        notifications_to_sweep(now), order_by="next_attempt_at", enqueued_before=now - _lease(), now=now, limit=limit,
        task="moderation.tasks.deliver_notification", id_kwarg="notification_id", review_field="review_id",
    )
    circuit = circuit_get(settings.MODERATION_PROVIDER)
    if circuit.state == CircuitState.CLOSED:
        report.pending_requeued = _requeue_lost_jobs(now, limit)
    else:
        if settings.BREAKER_MAX_WAIT_S > 0:
            report.escalated += _give_up_waiting(now, limit)
        if breaker_may_claim(provider=circuit.provider, now=now, circuit=circuit):
            # Past the cooldown: one waiting review to carry the trial call, not the backlog.
            report.pending_requeued = _requeue_lost_jobs(now, 1)
    # Asking the provider is I/O: a provider that does not answer must not hold the sweep past
    # its task timeout. What is not asked within the budget waits for the next sweep.
    ask_until = time.monotonic() + STATUS_BUDGET_S
    for review_id in stuck_review_ids(now=now, limit=limit):
        try:
            action = review_reconcile(review_id=review_id, now=now, ask_until=ask_until)
        except Exception:  # noqa: BLE001 - one review never holds the sweep (docs/design.md, "Batches")
            with context.bind(review_id=review_id):
                logger.exception("reconciling a review failed: the next sweep tries it again")
            continue
        if action:
            getattr(report, action).append(review_id)
    if any(vars(report).values()):
        logger.info("sweep: %s", report.summary())
    return report


def reviews_worker_lost(*, worker_ids: list[str], limit: int = 500) -> list:
    """The processing reviews claimed by workers known to be dead (their cluster was rebuilt:
    moderation/management/cluster.py), taken over at once rather than once the dead attempt's
    lease (the task timeout) and the silence deadline have run out. Returns the reviews
    dispatched again."""
    candidates = list(
        ContentReview.objects.filter(status=ReviewStatus.PROCESSING, worker_id__in=worker_ids)
        .order_by("processing_started_at").values_list("pk", flat=True)[:limit]
    )
    taken = []
    for review_id in candidates:
        try:
            if _worker_lost_locked(review_id=review_id, worker_ids=worker_ids, now=timezone.now()):
                taken.append(review_id)
        except Exception:  # noqa: BLE001 - one review never holds the rest (docs/design.md, "Batches")
            with context.bind(review_id=review_id):
                logger.exception("taking over a dead worker's review failed: the sweeper tries it again")
    notified = _notifications_of_dead_deciders(worker_ids)
    if candidates or notified:
        logger.warning("dead workers %s: %d of %d claimed reviews dispatched again, %d notifications enqueued again",
                       ", ".join(worker_ids), len(taken), len(candidates), len(notified))
    return taken


def _notifications_of_dead_deciders(worker_ids: list[str]) -> list:
    """A decision's notification is pushed to the job queue after the decision commits: a worker
    killed in between leaves it waiting for the sweeper's lease (minutes). The notifications of
    the decisions these workers made within a task's time, not yet attempted, are enqueued now
    (a second job for one that was enqueued after all finds it delivered: invariant 7)."""
    now = timezone.now()
    since = now - timedelta(seconds=2 * settings.Q_TASK_TIMEOUT_S)
    decided = ReviewTransition.objects.filter(actor_id__in=worker_ids, created_at__gte=since).values("review_id")
    rows = notifications_due(now).filter(review_id__in=decided, attempts=0)  # (due: none in flight)
    return enqueue_batch(
        oldest_of_each_client(rows, settings.NOTIFY_CLIENT_CONCURRENCY), order_by="next_attempt_at",
        enqueued_before=now, now=now, limit=500,
        task="moderation.tasks.deliver_notification", id_kwarg="notification_id", review_field="review_id",
    )


@records_illegal_transitions
def _worker_lost_locked(*, review_id, worker_ids: list[str], now: datetime) -> bool:
    """The dead workers' attempts in flight end as abandoned (as dispatch ends one whose lease ran
    out), and an operation they never handed to the provider is dispatched again with the same
    key (invariant 3). One the provider accepted waits for its callback as before: who sent it
    does not matter."""
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update().filter(pk=review_id).first()
        if review is None or review.status != ReviewStatus.PROCESSING or review.worker_id not in worker_ids:
            return False  # it moved on meanwhile
        request = ModerationRequest.objects.get(idempotency_key=review.active_idempotency_key)
        ProviderAttempt.objects.filter(
            request=request, outcome=AttemptOutcome.IN_FLIGHT, worker_id__in=worker_ids
        ).update(outcome=AttemptOutcome.ABANDONED, finished_at=now)
        last = request.attempts.order_by("-attempt_no").first()
        if request.status not in OPEN_REQUEST_STATUSES or request.next_attempt_at or (
            last is not None and last.outcome in (AttemptOutcome.ACCEPTED, AttemptOutcome.IN_FLIGHT)
        ):
            return False  # finished, a retry is scheduled, accepted, or a live worker has it
        _redispatch_locked(review, request, now)
        return True


def _redispatch_locked(review: ContentReview, request: ModerationRequest, now: datetime) -> None:
    """The same operation again, with its key, by a dispatch job after commit; call holding the
    review's row lock."""
    ModerationRequest.objects.filter(pk=request.pk).update(last_enqueued_at=now, updated_at=now)
    enqueue_on_commit("moderation.tasks.dispatch_request", for_review=review.pk, request_id=request.pk)


def _lease() -> timedelta:
    """How long an enqueued job may take to start before it is presumed lost."""
    return timedelta(seconds=settings.Q_CLUSTER["retry"])


def _enqueue_due_retries(now: datetime, limit: int) -> list[int]:
    due = ModerationRequest.objects.filter(status__in=OPEN_REQUEST_STATUSES, next_attempt_at__lte=now)
    return enqueue_batch(
        due, order_by="next_attempt_at", enqueued_before=now - _lease(), now=now, limit=limit,
        task="moderation.tasks.dispatch_request", id_kwarg="request_id", review_field="review_id",
    )


def _requeue_lost_jobs(now: datetime, limit: int) -> list:
    """Pending reviews whose job never ran (lost between commit and enqueue, or by the broker)."""
    cutoff = now - timedelta(seconds=settings.MODERATION_LOST_JOB_AFTER_S)
    lost = ContentReview.objects.filter(status=ReviewStatus.PENDING)
    return enqueue_batch(
        lost, order_by="last_enqueued_at", enqueued_before=cutoff, now=now, limit=limit,
        task="moderation.tasks.moderate_review", id_kwarg="review_id", review_field="pk",
    )


def _give_up_waiting(now: datetime, limit: int) -> list:
    """Reviews that have waited longer than BREAKER_MAX_WAIT_S for a provider that is down."""
    waited = timedelta(seconds=settings.BREAKER_MAX_WAIT_S)
    candidates = ContentReview.objects.filter(
        status__in=[ReviewStatus.PENDING, ReviewStatus.PROCESSING], provider_wait_since__lt=now - waited
    )
    reason = f"{settings.MODERATION_PROVIDER} unavailable (circuit open) for over {settings.BREAKER_MAX_WAIT_S:g}s"
    return [
        review_id
        for review_id in candidates.order_by("provider_wait_since").values_list("pk", flat=True)[:limit]
        if review_give_up_waiting(review_id=review_id, reason=reason)
    ]


def review_reconcile(
    *, review_id, now: datetime | None = None, stuck_after: float | None = None, ask_until: float | None = None
) -> str | None:
    """Take over one processing review whose operation went silent. Returns what it did.

    - accepted by the provider but never answered (a lost callback): first ask the provider
      (docs/design.md, "Provider status and reconcile"; no transaction is open meanwhile). A completed answer
      goes through the same guarded finalize as a callback ("recovered"; the callback, if it
      comes after all, is then a duplicate); a failure is handled like a `moderation.failed`
      callback; "queued" waits one more silence period, while the operation is young. Only no
      answer, a 404 or a provider that cannot be asked leads to superseding it with a new key,
      or, once MODERATION_MAX_SUPERSEDES operations have gone silent, to a human;
    - anything else (never sent; its worker died during the call, or before recording how it
      ended): the same operation again, with the same key, which the provider de-duplicates.

    `ask_until` (time.monotonic()): past it, an operation that needs asking is left alone.
    """
    now = now or timezone.now()
    silent = _silent_accepted_operation(review_id, now, stuck_after)
    if silent and ask_until is not None and time.monotonic() > ask_until:
        return None  # the next sweep asks
    answer = _ask_provider(silent) if silent else None
    with context.bind(review_id=review_id):
        failed_here = ""
        if answer is not None and answer.state == "completed":
            try:
                outcome = review_finalize(idempotency_key=silent.idempotency_key, result=answer.result,
                                          cause=Cause.PROVIDER_RESULT)
            except Exception as exc:  # noqa: BLE001 - this operation alone fails (docs/design.md, "Batches")
                # Applying its answer raised (its finalize rolled back whole): asked again, the
                # provider would give the same answer, so it goes as a failed operation does.
                logger.exception("applying the provider's answer failed: the operation is replaced")
                failed_here = f"applying the provider's answer failed: {type(exc).__name__}: {exc}"
            else:
                return "recovered" if outcome is ResultOutcome.APPLIED else None
        if failed_here or (answer is not None and answer.state == "failed"):
            outcome = request_fail_reported(
                idempotency_key=silent.idempotency_key, error=failed_here or answer.error, reported=not failed_here
            )
            if outcome is not ResultOutcome.APPLIED:
                return None
            return "escalated" if silent.generation >= settings.MODERATION_MAX_SUPERSEDES else "superseded"
    queued = answer is not None and answer.state == "queued"
    return _reconcile_locked(review_id=review_id, now=now, stuck_after=stuck_after, provider_queued=queued)


# The provider may say "queued" for this many silence periods before it is superseded anyway.
QUEUED_PATIENCE = 10
# Seconds one sweep may spend asking the provider (a third of the default task timeout).
STATUS_BUDGET_S = 20


def _silent_accepted_operation(review_id, now: datetime, stuck_after: float | None) -> ModerationRequest | None:
    """The review's live operation, if it is silent and the provider accepted it (a read: the
    locked step below checks again)."""
    request = stuck_requests(now=now, stuck_after=stuck_after).filter(review_id=review_id).first()
    if request is None or not request.provider_request_id:
        return None
    last = request.attempts.order_by("-attempt_no").values_list("outcome", flat=True).first()
    return request if last == AttemptOutcome.ACCEPTED else None


def _ask_provider(request: ModerationRequest) -> OperationStatus | None:
    """The provider's word on an operation, or None if it cannot be asked or does not answer."""
    try:
        status = getattr(get_provider(request.provider), "status", None)
    except LookupError:
        return None
    if status is None:
        return None
    try:
        answer = status(provider_request_id=request.provider_request_id, idempotency_key=str(request.idempotency_key))
    except Exception:  # noqa: BLE001 - a bug in the adapter: as no answer, so the operation is replaced
        logger.exception("asking provider %s about %s failed", request.provider, request.provider_request_id)
        return None
    logger.info("provider status of %s: %s", request.provider_request_id, answer.state if answer else "no answer")
    return answer


@records_illegal_transitions
def _reconcile_locked(*, review_id, now: datetime, stuck_after: float | None, provider_queued: bool) -> str | None:
    cutoff = stuck_cutoff(now=now, stuck_after=stuck_after)
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update(skip_locked=True).filter(pk=review_id).first()
        if review is None or review.status != ReviewStatus.PROCESSING:
            return None  # another sweeper holds it, or it moved on
        request = ModerationRequest.objects.get(idempotency_key=review.active_idempotency_key)
        if request.status not in OPEN_REQUEST_STATUSES or request.next_attempt_at or request.updated_at >= cutoff:
            return None  # it made progress since we looked
        last = request.attempts.order_by("-attempt_no").first()
        if last is None or last.outcome != AttemptOutcome.ACCEPTED:
            _redispatch_locked(review, request, now)
            return "redispatched"
        patience = timedelta(seconds=QUEUED_PATIENCE * (now - cutoff).total_seconds())
        if provider_queued and last.started_at > now - patience:
            # The provider is still working on it: superseding would only pay for it twice.
            ModerationRequest.objects.filter(pk=request.pk).update(updated_at=now)
            return "postponed"
        if request.generation >= settings.MODERATION_MAX_SUPERSEDES:
            request_give_up_locked(review, request, f"no result after {request.generation + 1} operations")
            return "escalated"
        request_supersede_locked(review, request, reason=f"no callback since {last.finished_at or last.started_at:%Y-%m-%d %H:%M:%S}")
        return "superseded"


@records_illegal_transitions
def review_supersede(*, review_id, reason: str) -> ModerationRequest:
    """Explicitly replace a processing review's operation with a new one (operators, tests)."""
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update().get(pk=review_id)
        old = ModerationRequest.objects.filter(idempotency_key=review.active_idempotency_key).first()
        if review.status != ReviewStatus.PROCESSING or old is None:
            raise IllegalTransition(review_id=review_id, from_status=review.status, cause=Cause.RETRY_RECONCILE)
        return request_supersede_locked(review, old, reason=reason)
