"""Batches: one moderate_review job claims up to MODERATION_BATCH_SIZE pending reviews, asks the
provider about all of them, and finalizes each under its own lock (docs/design.md, "Batches").

The job is still enqueued once per review and still at-least-once: it claims its own review (if
still pending) and up to N-1 other pending ones in one transaction. A job whose review another
batch claimed first returns at once and writes nothing. Every guard of the one-review path holds
per review: the claim is a legal `pending -> processing` transition with its transition and history
rows, and a fresh key stored before anything leaves (invariants 1-3); the provider is called with
no transaction open (invariant 6); each result goes through the same guarded finalize (invariant
4). A batch that dies after its claim leaves operations that were never sent: the sweeper's
reconcile dispatches them again, with their keys (invariant 8).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from audit import context, tracing
from audit.models import Actor, EventKind, ReviewTransition
from moderation.models import (
    AttemptOutcome,
    Cause,
    ContentReview,
    ModerationRequest,
    ProviderAttempt,
    ResultOutcome,
    ReviewStatus,
)
from moderation.providers import ModerationResult, ProviderError, get_provider
from moderation.jobs import enqueue_on_commit
from moderation.retry_budget import TASK_MARGIN_S, provider_worst_case_s
from moderation.services.transitions import (
    record_event,
    records_illegal_transitions,
    transition_reviews_bulk,
    transitions_record_bulk,
)
from moderation.services.breaker import breaker_record
from moderation.services.dispatch import (
    DispatchReport,
    attempt_prepare,
    attempt_settle,
    attempts_begin_locked_many,
    request_dispatch,
    result_apply,
)
from moderation.services.pipeline import _OUTCOME_EVENTS, _apply_result_locked, _classify

logger = logging.getLogger(__name__)


@dataclass
class BatchClaim:
    """What a batch claimer took: its requests (its own review's first), or why it took none."""

    requests: list[ModerationRequest] = field(default_factory=list)
    lost: str = ""  # "claimed by batch <job id>" or "claim lost"


def review_claimed_by_batch(*, review_id, job_id: str) -> str:
    """"claimed by batch <job id>" if another job's claim already took the review (it is no longer
    pending), else "". One read, no lock and no transaction: the cheap way out for the jobs of the
    reviews a batch took. Anything else (still pending, or moved on without any claim by another
    job) goes through `reviews_claim_batch`, which decides under the lock."""
    row = (
        ContentReview.objects.filter(pk=review_id).exclude(status=ReviewStatus.PENDING)
        .annotate(claimer=Subquery(
            ReviewTransition.objects.filter(review_id=OuterRef("pk"), cause=Cause.JOB_STARTED)
            .order_by("-id").values("job_id")[:1]
        ))
        .values_list("claimer", flat=True).first()
    )
    return f"claimed by batch {row}" if row and row != job_id else ""


@records_illegal_transitions
def reviews_claim_batch(*, review_id, worker_id: str, job_id: str, size: int) -> BatchClaim:
    """Claim `review_id` (if still pending) and up to `size - 1` other pending reviews, in one
    transaction, oldest enqueued first.

    The own review is locked waiting (a concurrent claimer of it finishes first: invariant 2);
    the others with `FOR UPDATE SKIP LOCKED`, so two batch claimers never wait for each other and
    never take the same review; the status change itself is a conditional UPDATE (`WHERE status =
    'pending'`), a second line of defence. Reviews waiting for the provider's circuit are left to
    the sweeper, which enqueues them again once the circuit lets work through.
    """
    with context.bind(review_id=review_id, worker_id=worker_id, job_id=job_id):
        with transaction.atomic():
            own = ContentReview.objects.select_for_update().get(pk=review_id)
            if own.status == ReviewStatus.PENDING:
                others = list(
                    ContentReview.objects.select_for_update(skip_locked=True)
                    .filter(status=ReviewStatus.PENDING, provider_wait_since__isnull=True)
                    .exclude(pk=review_id)
                    .order_by("last_enqueued_at")[: size - 1]
                )
                requests = _claim_locked([own, *others], worker_id=worker_id, job_id=job_id)
                if requests and requests[0].review_id == own.pk:
                    return BatchClaim(requests)
                # Only if the lock was not held: the conditional update refused the own review.
                transaction.set_rollback(True)
                lost_to = "a concurrent transition"
            else:
                lost_to = own.status
        claimed = review_claimed_by_batch(review_id=review_id, job_id=job_id)
        if claimed:  # another job's batch took it: the expected way of things with batches, not a lost race
            return BatchClaim(lost=claimed)
        record_event(EventKind.CLAIM_LOST, review_id=review_id, status=lost_to)
        return BatchClaim(lost="claim lost")


def _claim_locked(reviews: list[ContentReview], *, worker_id: str, job_id: str) -> list[ModerationRequest]:
    """Move the locked pending `reviews` to processing, each with a new operation (a fresh key):
    the same rows `review_claim_locked` writes for one review, in bulk. Returns the requests of
    the reviews moved, in the order given."""
    now = timezone.now()
    new_key = ModerationRequest._meta.get_field("idempotency_key").default
    keys = {review.pk: new_key() for review in reviews}
    previous = {review.pk: review.active_idempotency_key for review in reviews}
    moved = transition_reviews_bulk(
        reviews, Cause.JOB_STARTED, keys=keys, now=now,
        values={"worker_id": worker_id, "provider_request_id": "", "processing_started_at": now, "completed_at": None},
    )
    reprocessed = [previous[r.pk] for r in moved if previous[r.pk]]
    superseded = (
        {m.idempotency_key: m for m in ModerationRequest.objects.filter(idempotency_key__in=reprocessed)}
        if reprocessed else {}
    )
    carrier = tracing.carrier()  # a callback for these operations continues this trace
    requests = ModerationRequest.objects.bulk_create([
        ModerationRequest(
            review=review,
            idempotency_key=keys[review.pk],
            provider=settings.MODERATION_PROVIDER,
            max_attempts=settings.MODERATION_MAX_ATTEMPTS,
            # A review back in pending after a decision is being reprocessed: a new operation
            # that supersedes the one which decided it.
            cause=Cause.REPROCESS if previous[review.pk] else Cause.JOB_STARTED,
            supersedes=superseded.get(previous[review.pk]),
            trace_parent=carrier,
        )
        for review in moved
    ])
    # (After the operations, as one claim writes them: the timeline orders a claim's rows by time.)
    transitions_record_bulk(moved, Cause.JOB_STARTED, from_status=ReviewStatus.PENDING, actor=Actor.WORKER,
                            actor_id=worker_id, job_id=job_id)
    return requests


def requests_dispatch_batch(*, requests: list[ModerationRequest], worker_id: str, job_id: str,
                            deadline: float) -> list[DispatchReport]:
    """One attempt for each of a batch's requests. A provider that judges many inputs at once
    (`moderate_many`) gets one call for the whole batch; any other gets one request per
    operation, through the one-request dispatch, while the calls are quick and the task's time
    allows another attempt (`deadline`, time.monotonic()): the rest are handed to dispatch jobs
    of their own."""
    provider = get_provider(settings.MODERATION_PROVIDER)
    if getattr(provider, "moderate_many", None) is None:
        # One after another, while they are quick: once the calls have taken one attempt's
        # timeout together (a slow provider), the rest go to dispatch jobs that other workers
        # run at once, so a batch never makes its reviews queue behind a slow provider.
        slow_after = time.monotonic() + settings.PROVIDER_TIMEOUT_S
        reports = []
        for i, request in enumerate(requests):
            now = time.monotonic()
            if now + provider_worst_case_s() + TASK_MARGIN_S > deadline or (i and now > slow_after):
                return reports + _hand_off(requests[i:])
            reports.append(request_dispatch(request_id=request.pk, worker_id=worker_id, job_id=job_id))
        return reports
    with context.bind(worker_id=worker_id, job_id=job_id):
        begun, reports = _attempts_begin(requests, worker_id=worker_id, job_id=job_id)
        started = []
        for request, attempt, payload, content in begun:
            with _bound(request, attempt):
                failed = attempt_prepare(request, attempt, content)  # one that fails stays out of the call
            if failed is None:
                started.append((request, attempt, payload, content))
            else:
                reports.append(failed)
        replies, latency_ms = _call_many(provider, [payload for _, _, payload, _ in started])
        answered = []
        for (request, attempt, _, _), reply in zip(started, replies, strict=True):
            if isinstance(reply, ModerationResult):
                answered.append((request, attempt, reply))
                continue
            with _bound(request, attempt):  # an error (content it cannot judge, one that broke): as alone
                reports.append(attempt_settle(request, attempt, reply, latency_ms))
        return reports + _results_settle(answered, latency_ms)


def _bound(request: ModerationRequest, attempt: ProviderAttempt):
    """The log context of one of the batch's attempts."""
    return context.bind(review_id=request.review_id, idempotency_key=request.idempotency_key,
                        attempt_no=attempt.attempt_no)


def _results_settle(answered: list, latency_ms: int) -> list[DispatchReport]:
    """Close the attempts the batch call answered, feed the breaker, and finalize each result:
    in one transaction that locks the reviews in a fixed order (by id) and classifies each result
    under its review's lock exactly as `review_finalize` does (docs/design.md, invariant 4). Should
    anything in it fail (an illegal or concurrent transition, an exception deciding one review),
    it rolls back whole and each result is finalized alone (`result_apply`): one that fails again
    fails its own attempt, to its retry path, and holds none of the others."""
    if not answered:
        return []
    now = timezone.now()
    ProviderAttempt.objects.filter(pk__in=[attempt.pk for _, attempt, _ in answered]).update(
        outcome=AttemptOutcome.RESULT, latency_ms=latency_ms, finished_at=now
    )
    # One record for the batch's results: they began together (one `now`), and a result only
    # ever closes a half-open circuit whose trial it is; the first of N identical records would
    # decide, the others find nothing to change.
    _, first, _ = answered[0]
    breaker_record(provider=first.provider, outcome=AttemptOutcome.RESULT, started_at=first.started_at)
    try:
        outcomes = _finalize_together(answered)
    except Exception as exc:  # noqa: BLE001 - rolled back whole: each result is finalized alone, below
        logger.warning("a batch's finalize failed as a whole (%s: %s): each result is finalized alone",
                       type(exc).__name__, exc)
        outcomes = {}
    reports = []
    for request, attempt, result in answered:
        with _bound(request, attempt):
            outcome = outcomes.get(request.pk)
            if outcome is None:
                reports.append(result_apply(request, attempt, result, latency_ms))
                continue
            if outcome is not ResultOutcome.APPLIED:
                record_event(_OUTCOME_EVENTS[outcome], review_id=request.review_id,
                             idempotency_key=request.idempotency_key, cause=Cause.PROVIDER_RESULT)
            reports.append(DispatchReport("finalized", outcome))
    return reports


def _finalize_together(answered: list) -> dict:
    """`_finalize_once` for each of the batch's results, in one transaction (see _results_settle).
    Returns each request's outcome."""
    outcomes = {}
    with transaction.atomic():
        reviews = {
            r.pk: r for r in ContentReview.objects.select_for_update(of=("self",)).select_related("client", "content")
            .filter(pk__in=[request.review_id for request, _, _ in answered]).order_by("pk")
        }
        # Read under the locks: a result is judged against the request as the lock holder left it.
        requests = {q.pk: q for q in ModerationRequest.objects.filter(pk__in=[q.pk for q, _, _ in answered])}
        for request, attempt, result in sorted(answered, key=lambda item: item[0].review_id):
            review, fresh = reviews[request.review_id], requests[request.pk]
            with context.bind(review_id=review.pk, idempotency_key=fresh.idempotency_key, attempt_no=attempt.attempt_no):
                outcome = _classify(review, fresh)
                if outcome is ResultOutcome.APPLIED:
                    _apply_result_locked(review, fresh, result, Cause.PROVIDER_RESULT, None, attempt.attempt_no)
            outcomes[request.pk] = outcome
    return outcomes


def _attempts_begin(requests: list[ModerationRequest], *, worker_id: str, job_id: str):
    """Record an attempt for each request still dispatchable, in one transaction: the reviews
    locked in a fixed order (by id, as every multi-review lock here), then each request checked
    under its review's lock as the one-request dispatch checks it."""
    now = timezone.now()
    with transaction.atomic():
        reviews = {
            r.pk: r for r in ContentReview.objects.select_for_update(of=("self",)).select_related("content", "client")
            .filter(pk__in=[q.review_id for q in requests]).order_by("pk")
        }
        fresh = {q.pk: q for q in ModerationRequest.objects.filter(pk__in=[q.pk for q in requests])}
        begun = attempts_begin_locked_many([(reviews[q.review_id], fresh[q.pk]) for q in requests],
                                           worker_id=worker_id, job_id=job_id, now=now)
    skipped = [b for b in begun if isinstance(b, DispatchReport)]
    return [b for b in begun if not isinstance(b, DispatchReport)], skipped


def _call_many(provider, payloads: list) -> tuple[list, int]:
    """One provider call for the whole batch, with no transaction open (docs/design.md, invariant
    6). An unexpected exception from the call as a whole (a bug in an adapter, a model that cannot
    load) ends every attempt of the batch as an error: the provider's failure, not one item's (an
    adapter that judges item by item puts one item's error in that item's slot)."""
    if connection.in_atomic_block:
        raise RuntimeError("a provider must never be called inside a database transaction")
    if not payloads:
        return [], 0
    clock = time.monotonic()
    try:
        with tracing.tracer.start_as_current_span(
            "provider.moderate_many", kind=tracing.SpanKind.CLIENT,
            attributes={"moderation.provider": provider.name, "moderation.batch_size": len(payloads)},
        ):
            replies = provider.moderate_many(payloads)
        if len(replies) != len(payloads):
            raise ValueError(f"{len(replies)} answers for {len(payloads)} inputs")
    except Exception as exc:  # noqa: BLE001 - every attempt is closed with it, below
        logger.exception("provider %s raised unexpectedly", provider.name)
        replies = [ProviderError.unexpected(exc)] * len(payloads)
    return replies, int((time.monotonic() - clock) * 1000)


def _hand_off(requests: list[ModerationRequest]) -> list[DispatchReport]:
    """Requests this job has no time left to send: each gets a dispatch job of its own, marked
    as the sweeper marks what it enqueues."""
    now = timezone.now()
    with transaction.atomic():
        ModerationRequest.objects.filter(pk__in=[q.pk for q in requests]).update(last_enqueued_at=now)
        for request in requests:
            enqueue_on_commit("moderation.tasks.dispatch_request", for_review=request.review_id, request_id=request.pk)
    return [DispatchReport("handed_off", str(request.idempotency_key)) for request in requests]
