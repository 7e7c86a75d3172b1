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

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit import context, tracing
from moderation.db.transactions import in_transaction
from moderation.models import (
    AttemptOutcome,
    Cause,
    ContentReview,
    ModerationRequest,
    ProviderAttempt,
)
from moderation.providers import ModerationResult, ProviderError, get_provider
from moderation.jobs import enqueue_on_commit
from moderation.retry_budget import TASK_MARGIN_S, provider_worst_case_s
from moderation.services.breaker import breaker_record
from moderation.db.compiled import CompiledSelect
from moderation.services.dispatch import (
    DispatchReport,
    attempt_prepare,
    attempt_settle,
    attempts_begin_locked_many,
    request_dispatch,
    result_apply,
)
from moderation.services.policy import contents_language_store
from moderation.services.results import OperationResult, results_finalize

logger = logging.getLogger(__name__)


def requests_dispatch_batch(*, requests: list[ModerationRequest], worker_id: str, job_id: str,
                            deadline: float, trial: bool = False) -> list[DispatchReport]:
    """One attempt for each of a claim's requests. A batch of one goes through the one-request
    dispatch (`trial`: the caller holds the circuit's trial call, which is one call). For more, a
    provider that judges many inputs at once (`moderate_many`) gets one call for the whole batch;
    any other gets one request per operation, through the one-request dispatch, while the calls
    are quick and the task's time allows another attempt (`deadline`, time.monotonic()): the rest
    are handed to dispatch jobs of their own."""
    if len(requests) == 1:
        return [request_dispatch(request_id=requests[0].pk, worker_id=worker_id, job_id=job_id, trial=trial)]
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
        started, languages = [], []
        for request, attempt, payload, content in begun:
            with _bound(request, attempt):  # one that fails, or is decided here, stays out of the call
                prepared = attempt_prepare(request, attempt, content, payload, languages=languages)
            if isinstance(prepared, DispatchReport):
                reports.append(prepared)
            else:
                started.append((request, attempt, prepared, content))
        _languages_store(languages)
        replies, latency_ms = _call_many(provider, [payload for _, _, payload, _ in started])
        answered = []
        for (request, attempt, _, _), reply in zip(started, replies, strict=True):
            if isinstance(reply, ModerationResult):
                answered.append((request, attempt, reply))
                continue
            with _bound(request, attempt):  # an error (content it cannot judge, one that broke): as alone
                reports.append(attempt_settle(request, attempt, reply, latency_ms))
        return reports + _results_settle(answered, latency_ms)


def _languages_store(contents: list) -> None:
    """The batch's detected languages, in one UPDATE. Should it fail, nothing is lost: finalize
    detects the same answer again, under the review's lock, and stores it then."""
    try:
        contents_language_store(contents)
    except Exception as exc:  # noqa: BLE001 - see above
        logger.warning("storing a batch's %d detected languages failed (%s: %s): finalize stores each",
                       len(contents), type(exc).__name__, exc)


def _bound(request: ModerationRequest, attempt: ProviderAttempt):
    """The log context of one of the batch's attempts."""
    return context.bind(review_id=request.review_id, idempotency_key=request.idempotency_key,
                        attempt_no=attempt.attempt_no)


def _results_settle(answered: list, latency_ms: int) -> list[DispatchReport]:
    """Close the attempts the batch call answered, feed the breaker, and finalize the results
    together (`results_finalize`: one transaction, the reviews locked in id order, each result
    classified under its review's lock: docs/design.md, invariant 4). Should anything in it fail
    (an illegal or concurrent transition, an exception deciding one review), it rolls back whole
    and each result is finalized alone (`result_apply`): one that fails again fails its own
    attempt, to its retry path, and holds none of the others."""
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
        outcomes = results_finalize(
            [OperationResult(request.idempotency_key, result, attempt_no=attempt.attempt_no)
             for request, attempt, result in answered],
            cause=Cause.PROVIDER_RESULT,
        )
    except Exception as exc:  # noqa: BLE001 - rolled back whole: each result is finalized alone, below
        logger.warning("a batch's finalize failed as a whole (%s: %s): each result is finalized alone",
                       type(exc).__name__, exc)
        reports = []
        for request, attempt, result in answered:
            with _bound(request, attempt):
                reports.append(result_apply(request, attempt, result, latency_ms))
        return reports
    return [DispatchReport("finalized", outcome) for outcome in outcomes]


# Compiled once per batch size (moderation/db/compiled.py).
_REVIEWS_LOCK = CompiledSelect(
    lambda ids: ContentReview.objects.select_for_update(of=("self",)).select_related("content", "client")
    .filter(pk__in=ids).order_by("pk")
)
_REQUESTS_READ = CompiledSelect(lambda ids: ModerationRequest.objects.filter(pk__in=ids))


def _attempts_begin(requests: list[ModerationRequest], *, worker_id: str, job_id: str):
    """Record an attempt for each request still dispatchable, in one transaction: the reviews
    locked in a fixed order (by id, as every multi-review lock here), then each request checked
    under its review's lock as the one-request dispatch checks it."""
    now = timezone.now()
    with transaction.atomic():
        reviews = {r.pk: r for r in _REVIEWS_LOCK.all([q.review_id for q in requests])}
        fresh = {q.pk: q for q in _REQUESTS_READ.all([q.pk for q in requests])}
        begun = attempts_begin_locked_many([(reviews[q.review_id], fresh[q.pk]) for q in requests],
                                           worker_id=worker_id, job_id=job_id, now=now)
    skipped = [b for b in begun if isinstance(b, DispatchReport)]
    return [b for b in begun if not isinstance(b, DispatchReport)], skipped


def _call_many(provider, payloads: list) -> tuple[list, int]:
    """One provider call for the whole batch, with no transaction open (docs/design.md, invariant
    6). An unexpected exception from the call as a whole (a bug in an adapter, a model that cannot
    load) ends every attempt of the batch as an error: the provider's failure, not one item's (an
    adapter that judges item by item puts one item's error in that item's slot)."""
    if in_transaction():
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
