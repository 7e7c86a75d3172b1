"""Dispatch: one provider attempt of an operation, with its stored key, and what followed.

The review's row lock is taken first whenever the review or its requests are written (see
pipeline.py); the provider itself is called with no transaction open (docs/design.md, invariant 6).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from audit import context, tracing
from audit.models import EventKind
from moderation.db.transactions import in_transaction
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    AttemptOutcome,
    Cause,
    CircuitState,
    ContentReview,
    ModerationRequest,
    ProviderAttempt,
    RequestStatus,
    ReviewStatus,
)
from moderation.providers import (
    NO_MODEL,
    Accepted,
    ItemError,
    ModerationInput,
    ModerationResult,
    ProviderError,
    get_provider,
    provider_judges,
    provider_reads_policy,
)
from moderation.services.transitions import record_event
from moderation.db.compiled import CompiledSelect
from moderation.services.breaker import breaker_allows, breaker_record, breaker_retry_at, circuit_get
from moderation.services.pipeline import request_give_up_locked
from moderation.services.results import review_finalize
from moderation.services.media import media_read
from moderation.services.policy import content_language, policy_active
from moderation.verdicts import MEDIA_KINDS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DispatchReport:
    action: str  # skipped | accepted | finalized | retry_scheduled | escalated
    detail: str = ""


def request_dispatch(
    *, request_id: int, worker_id: str, job_id: str = "", now: datetime | None = None, trial: bool = False
) -> DispatchReport:
    """Make one provider attempt for a request, with its stored key, and record how it ended.

    Three short steps: (1) in a transaction, check the request is still the review's live
    operation and due, that the provider's circuit lets it through (`trial`: the caller already
    holds the circuit's trial call), and record the attempt; (2) call the provider with no
    transaction open; (3) in a transaction, apply the result or schedule the retry / escalate.
    """
    with context.bind(worker_id=worker_id, job_id=job_id):
        started = attempt_begin(request_id=request_id, worker_id=worker_id, job_id=job_id, now=now, trial=trial)
        if isinstance(started, DispatchReport):
            return started
        request, attempt, payload, content = started
        with context.bind(
            review_id=request.review_id, idempotency_key=request.idempotency_key, attempt_no=attempt.attempt_no
        ):
            prepared = attempt_prepare(request, attempt, content, payload)
            if isinstance(prepared, DispatchReport):
                return prepared
            return _attempt_call(request, attempt, prepared)


def attempt_begin(*, request_id: int, worker_id: str, job_id: str, now: datetime | None, trial: bool = False):
    now = now or timezone.now()
    with transaction.atomic():
        review = (
            ContentReview.objects.select_for_update(of=("self",))
            .select_related("content", "client")
            .get(requests__pk=request_id)
        )
        request = ModerationRequest.objects.get(pk=request_id)
        return _attempt_begin_locked(review, request, worker_id=worker_id, job_id=job_id, now=now, trial=trial)


def _attempt_begin_locked(review, request, *, worker_id: str, job_id: str, now: datetime, trial: bool):
    with context.bind(review_id=review.pk, idempotency_key=request.idempotency_key):
        in_flight = list(request.attempts.filter(outcome=AttemptOutcome.IN_FLIGHT))
        refused = _attempt_refused_locked(review, request, now=now, in_flight=in_flight, circuit_checked=trial)
        if refused is not None:
            return refused
        (attempt,) = _attempts_record([request], worker_id=worker_id, job_id=job_id, now=now)
    return request, attempt, _payload(review, request, _prompt_policy(request.provider)), review.content


# Compiled once per batch size (moderation/db/compiled.py).
_IN_FLIGHT = CompiledSelect(
    lambda ids: ProviderAttempt.objects.filter(request_id__in=ids, outcome=AttemptOutcome.IN_FLIGHT)
)


def attempts_begin_locked_many(pairs: list, *, worker_id: str, job_id: str, now: datetime) -> list:
    """`_attempt_begin_locked` for a batch's (review, request) pairs, with the same checks per
    request and its writes in bulk; call holding every review's row lock. The circuit is read
    once: closed, each request may go; otherwise each goes through `_attempt_begin_locked` (a
    trial is one call, and a refusal is recorded per request). Returns, per pair, a
    DispatchReport (not sent) or (request, attempt, payload, content)."""
    if not pairs:
        return []
    if circuit_get(pairs[0][1].provider).state != CircuitState.CLOSED:
        return [_attempt_begin_locked(review, request, worker_id=worker_id, job_id=job_id, now=now, trial=False)
                for review, request in pairs]
    in_flight: dict[int, list] = {}
    for attempt in _IN_FLIGHT.all([q.pk for _, q in pairs]):
        in_flight.setdefault(attempt.request_id, []).append(attempt)
    outcomes = {}
    for review, request in pairs:
        with context.bind(review_id=review.pk, idempotency_key=request.idempotency_key):
            outcomes[request.pk] = _attempt_refused_locked(
                review, request, now=now, in_flight=in_flight.get(request.pk, []), circuit_checked=True
            )
    going = [request for _, request in pairs if outcomes[request.pk] is None]
    attempts = {a.request_id: a for a in _attempts_record(going, worker_id=worker_id, job_id=job_id, now=now)}
    policy = _prompt_policy(pairs[0][1].provider) if going else None  # one read for the batch
    return [outcomes[request.pk] or (request, attempts[request.pk], _payload(review, request, policy), review.content)
            for review, request in pairs]


def _attempt_refused_locked(review, request, *, now: datetime, in_flight: list, circuit_checked: bool):
    """Why this request may not be sent now (a DispatchReport), or None. `in_flight`: its attempts
    in flight, read under the lock; `circuit_checked`: the caller holds the circuit's trial call,
    or read it closed in this transaction."""
    reason = _not_dispatchable(review, request, now)
    if reason:
        record_event(
            EventKind.DISPATCH_SKIPPED,
            review_id=review.pk,
            idempotency_key=request.idempotency_key,
            reason=reason,
        )
        return DispatchReport("skipped", reason)
    # An attempt still in flight is left alone until its lease (the task timeout) runs out;
    # after that its worker is presumed dead, and the attempt counts as abandoned.
    lease_start = now - timedelta(seconds=settings.Q_TASK_TIMEOUT_S)
    if any(a.started_at > lease_start for a in in_flight):
        return DispatchReport("skipped", "an attempt is in flight")
    if in_flight:
        ProviderAttempt.objects.filter(pk__in=[a.pk for a in in_flight]).update(
            outcome=AttemptOutcome.ABANDONED, finished_at=now
        )
    if request.attempt_no >= request.max_attempts:
        request_give_up_locked(review, request, f"{request.attempt_no} attempts made; the last was abandoned")
        return DispatchReport("escalated", "attempts exhausted")
    if not circuit_checked and not breaker_allows(provider=request.provider, now=now):
        # Not an attempt: nothing is sent, and the operation resumes when the circuit lets
        # it (the sweeper may enqueue it then: the enqueue mark is cleared).
        request.next_attempt_at = breaker_retry_at(provider=request.provider, now=now)
        request.last_enqueued_at = None
        request.save(update_fields=["next_attempt_at", "last_enqueued_at", "updated_at"])
        if review.provider_wait_since is None:
            ContentReview.objects.filter(pk=review.pk).update(provider_wait_since=now)
        return DispatchReport("skipped", "provider circuit open")
    if review.provider_wait_since is not None:
        ContentReview.objects.filter(pk=review.pk).update(provider_wait_since=None)
    return None


def _attempts_record(requests: list[ModerationRequest], *, worker_id: str, job_id: str, now: datetime) -> list:
    """Count one more attempt on each request (sent) and record it, in flight: one UPDATE and one
    INSERT for any number of requests. Call holding their reviews' row locks."""
    if not requests:
        return []
    ModerationRequest.objects.filter(pk__in=[q.pk for q in requests]).update(
        attempt_no=F("attempt_no") + 1, status=RequestStatus.SENT, sent_at=Coalesce("sent_at", Value(now)),
        next_attempt_at=None,
        last_enqueued_at=None,  # the job the sweeper enqueued has run: the next retry may be enqueued
        updated_at=now,
    )
    for request in requests:
        request.attempt_no += 1
        request.status = RequestStatus.SENT
        request.sent_at = request.sent_at or now
        request.next_attempt_at = request.last_enqueued_at = None
        request.updated_at = now
    return ProviderAttempt.objects.bulk_create([
        ProviderAttempt(request=request, provider=request.provider, attempt_no=request.attempt_no,
                        worker_id=worker_id, job_id=job_id, started_at=now)
        for request in requests
    ])


def _prompt_policy(provider_name: str):
    """The policy version whose written category definitions the provider judges by, when it
    reads them (the `llm` provider's prompt): the version in force as the attempt begins. None
    for every other provider, which is then sent none (and costs no read)."""
    return policy_active() if provider_reads_policy(get_provider(provider_name)) else None


def _payload(review: ContentReview, request: ModerationRequest, policy=None) -> ModerationInput:
    content = review.content
    return ModerationInput(
        idempotency_key=str(request.idempotency_key),
        content_type=content.kind,
        text=content.text,
        media_url=content.media_url,
        metadata=content.metadata,
        callback_url=f"{settings.PUBLIC_BASE_URL}/api/v1/callbacks/{request.provider}/",
        reference={"review_id": str(review.pk)},
        category_definitions=dict(policy.category_definitions) if policy is not None else {},
        policy_version=policy.version if policy is not None else None,
    )


def _not_dispatchable(review: ContentReview, request: ModerationRequest, now: datetime) -> str:
    if request.status not in OPEN_REQUEST_STATUSES:
        return f"request is {request.status}"
    if review.status != ReviewStatus.PROCESSING or review.active_idempotency_key != request.idempotency_key:
        return f"request is no longer the review's live operation (review {review.status})"
    if request.next_attempt_at and request.next_attempt_at > now:
        return f"next attempt not due before {request.next_attempt_at.isoformat()}"
    if review.content.erased_at is not None:  # (erasure also ends the review: belt and braces, invariant 16)
        return "the content was erased"
    return ""


def attempt_prepare(request: ModerationRequest, attempt: ProviderAttempt, content,
                    payload: ModerationInput, *, languages: list | None = None) -> DispatchReport | ModerationInput:
    """What must be read before the provider is called, with no transaction open: the rules'
    language of a text (detection is CPU only, a few milliseconds), or an image's bytes, hash and
    bank matches, with the policy version they were matched under pinned on the operation
    (moderation/services/media.py). Returns the payload to send, or, when nothing is to be sent,
    the report of how the attempt ended: an image the provider cannot judge is decided here, by
    its banks and the policy's image_fallback. Should reading raise, this attempt alone fails,
    unsent, to its retry path (an ItemError): the report says so. `languages`: a batch's list of
    the contents whose detected language it stores together (`contents_language_store`)."""
    try:
        if content.kind in MEDIA_KINDS:
            read = media_read(request=request, content=content)
            if not provider_judges(get_provider(request.provider), content.kind) or read.data is None:
                _attempt_close(attempt, AttemptOutcome.RESULT, 0)  # decided here: the provider is not called
                return result_apply(request, attempt, NO_MODEL, 0)
            return replace(payload, image_base64=read.image_base64 if content.kind == "image" else "",
                           media_mime=read.mime)
        content_language(content, stored_later=languages)
    except Exception as exc:  # noqa: BLE001 - this item alone fails (docs/design.md, "Batches")
        logger.exception("reading the content before the provider failed: this attempt alone fails")
        return attempt_settle(request, attempt, ItemError.unexpected(exc), 0)
    return payload


def _attempt_call(request: ModerationRequest, attempt: ProviderAttempt, payload: ModerationInput) -> DispatchReport:
    # The provider may take PROVIDER_TIMEOUT_S to answer. Holding the review's row lock that
    # long would stall the callback that may arrive meanwhile, and every other worker (docs/design.md, invariant 6).
    if in_transaction():
        raise RuntimeError("a provider must never be called inside a database transaction")
    provider = get_provider(request.provider)
    clock = time.monotonic()
    try:
        with tracing.tracer.start_as_current_span(
            "provider.moderate", kind=tracing.SpanKind.CLIENT,
            attributes={"moderation.provider": request.provider, "moderation.attempt_no": attempt.attempt_no},
        ):
            reply = provider.moderate(payload)
    except ProviderError as exc:
        reply = exc
    except Exception as exc:
        # A bug in an adapter must still close the attempt (and feed the breaker) rather
        # than leave it in flight until its lease runs out.
        logger.exception("provider %s raised unexpectedly", request.provider)
        reply = ProviderError.unexpected(exc)
    return attempt_settle(request, attempt, reply, int((time.monotonic() - clock) * 1000))


def attempt_settle(
    request: ModerationRequest, attempt: ProviderAttempt, reply: ModerationResult | Accepted | ProviderError,
    latency_ms: int,
) -> DispatchReport:
    """Record how an attempt ended (the provider's answer, or the error it ended with), feed the
    breaker, and apply a result through the guarded finalize (`result_apply`). Call with no
    transaction open, after the provider call (one call per attempt, or one call for a batch's
    attempts)."""
    if isinstance(reply, ProviderError):
        if isinstance(reply, ItemError):
            logger.warning("the attempt failed on its own item, not the provider: %s", reply)
        else:
            logger.warning("provider %s failed (%s): %s", request.provider, reply.kind, reply)
        report = _attempt_failed(request, attempt, reply, latency_ms)
        breaker_record(provider=request.provider, outcome=reply.kind, started_at=attempt.started_at)
        return report
    if isinstance(reply, Accepted):
        _attempt_accepted(request, attempt, reply, latency_ms)
        breaker_record(provider=request.provider, outcome=AttemptOutcome.ACCEPTED, started_at=attempt.started_at)
        return DispatchReport("accepted", reply.provider_request_id)
    _attempt_close(attempt, AttemptOutcome.RESULT, latency_ms)
    breaker_record(provider=request.provider, outcome=AttemptOutcome.RESULT, started_at=attempt.started_at)
    return result_apply(request, attempt, reply, latency_ms)


def result_apply(request: ModerationRequest, attempt: ProviderAttempt, result: ModerationResult,
                 latency_ms: int) -> DispatchReport:
    """Apply an attempt's result (its attempt closed as `result`) through the guarded finalize.
    An exception deciding or recording this one review (the rules, its finalize transaction)
    fails this attempt alone, as an ItemError: the finalize rolled back whole, so nothing of it
    is written, and the review goes its retry path; whoever else the caller serves goes on
    (docs/design.md, "Batches"). Call with no transaction open."""
    try:
        outcome = review_finalize(
            idempotency_key=request.idempotency_key,
            result=result,
            cause=Cause.PROVIDER_RESULT,
            attempt_no=attempt.attempt_no,
        )
    except Exception as exc:  # noqa: BLE001 - this item alone fails
        logger.exception("finalizing the result failed: this attempt alone fails")
        return attempt_settle(request, attempt, ItemError.unexpected(exc), latency_ms)
    return DispatchReport("finalized", outcome)


def _attempt_close(attempt: ProviderAttempt, outcome: str, latency_ms: int, *, http_status=None, error="") -> None:
    ProviderAttempt.objects.filter(pk=attempt.pk).update(
        outcome=outcome, latency_ms=latency_ms, finished_at=timezone.now(), http_status=http_status, error=error
    )


def _attempt_accepted(request: ModerationRequest, attempt: ProviderAttempt, reply: Accepted, latency_ms: int) -> None:
    with transaction.atomic():
        # The review's lock first, as everywhere: a callback finalizing this very request
        # meanwhile takes it first too, so the two queue up instead of deadlocking.
        ContentReview.objects.select_for_update().filter(pk=request.review_id).values_list("pk").get()
        _attempt_close(attempt, AttemptOutcome.ACCEPTED, latency_ms)
        # Conditional updates: the callback may already have been applied (a fast provider),
        # and a superseded request must not write its id onto the review.
        ModerationRequest.objects.filter(pk=request.pk, provider_request_id="").update(
            provider_request_id=reply.provider_request_id
        )
        ContentReview.objects.filter(
            pk=request.review_id, active_idempotency_key=request.idempotency_key, provider_request_id=""
        ).update(provider_request_id=reply.provider_request_id)


def retry_delay(attempt_no: int, *, retry_after_s: float | None = None) -> timedelta:
    """Exponential backoff with full jitter, capped: attempt 1 waits up to base, 2 up to 2*base...
    A provider's Retry-After (`retry_after_s`) is waited at least, within the same cap: a provider
    cannot park a review for longer than our own backoff would."""
    cap = settings.MODERATION_RETRY_BACKOFF_MAX_S
    ceiling = min(settings.MODERATION_RETRY_BACKOFF_S * 2 ** (attempt_no - 1), cap)
    delay = random.uniform(ceiling / 2, ceiling)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, cap))
    return timedelta(seconds=delay)


def _attempt_failed(request: ModerationRequest, attempt: ProviderAttempt, exc: ProviderError, latency_ms: int) -> DispatchReport:
    error = f"{exc.kind}: {exc}"[:2000]
    with transaction.atomic():
        review = (  # lock order: the review first
            ContentReview.objects.select_for_update(of=("self",)).select_related("client", "content").get(pk=request.review_id)
        )
        _attempt_close(attempt, exc.kind, latency_ms, http_status=exc.http_status, error=error)
        request = ModerationRequest.objects.get(pk=request.pk)
        if request.status not in OPEN_REQUEST_STATUSES:
            return DispatchReport("skipped", f"request became {request.status} meanwhile")
        request.last_error = error
        if exc.retryable and request.attempt_no < request.max_attempts:
            request.next_attempt_at = timezone.now() + retry_delay(request.attempt_no, retry_after_s=exc.retry_after_s)
            request.save(update_fields=["last_error", "next_attempt_at", "updated_at"])
            return DispatchReport("retry_scheduled", request.next_attempt_at.isoformat())
        request.save(update_fields=["last_error", "updated_at"])
        why = "not retryable" if not exc.retryable else f"{request.attempt_no} attempts made"
        request_give_up_locked(review, request, f"{error} ({why})")
        return DispatchReport("escalated", error)
