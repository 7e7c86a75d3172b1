"""The provider pipeline: claim a review, dispatch its request, finalize or escalate.

Locking rule: the review's row lock guards the review *and* its moderation requests. Every
service below that changes either takes `select_for_update()` on the review first, so two
writers of one review always queue up in the same order and never deadlock.
"""

from __future__ import annotations

import enum
import logging
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition

from audit import context
from audit.models import Actor, EventKind
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    AttemptOutcome,
    Cause,
    ContentReview,
    Decision,
    DecisionSource,
    ModerationRequest,
    ProviderAttempt,
    RequestStatus,
    ReviewStatus,
)
from moderation.policy import evaluate
from moderation.providers import Accepted, ModerationInput, ModerationResult, ProviderError, get_provider
from moderation.queue import enqueue_on_commit
from moderation.services._audit import record_event, records_illegal_transitions, transition_review
from moderation.services.breaker import breaker_allows, breaker_record, breaker_retry_at
from moderation.services.policy import policy_active

logger = logging.getLogger(__name__)


class FinalizeOutcome(enum.StrEnum):
    """What became of a result; the values are the callback inbox's outcomes."""

    APPLIED = "applied"
    STALE = "stale"
    DUPLICATE = "duplicate"
    ALREADY_FINAL = "already_final"
    ORPHAN = "orphan"


_OUTCOME_EVENTS = {
    FinalizeOutcome.STALE: EventKind.STALE_RESULT,
    FinalizeOutcome.DUPLICATE: EventKind.DUPLICATE_RESULT,
    FinalizeOutcome.ALREADY_FINAL: EventKind.ALREADY_FINAL,
    FinalizeOutcome.ORPHAN: EventKind.ORPHAN_RESULT,
}


# --- claim --------------------------------------------------------------------------------------


@records_illegal_transitions
def review_claim(*, review_id, worker_id: str, job_id: str = "") -> ModerationRequest | None:
    """Move a pending review to processing and store its new request (a fresh idempotency key).

    Of several workers claiming at once exactly one wins: the row lock makes the others wait,
    and they then read a status other than pending. A loser returns None having changed nothing
    and without calling the provider (invariant 2). The key is stored here, in the claim's
    transaction, before any request can leave (invariant 3).
    """
    with context.bind(review_id=review_id, worker_id=worker_id, job_id=job_id):
        try:
            with transaction.atomic():
                review = ContentReview.objects.select_for_update().get(pk=review_id)
                if review.status != ReviewStatus.PENDING:
                    lost_to = review.status
                else:
                    return _claim_locked(review, worker_id=worker_id, job_id=job_id)
        except ConcurrentTransition:
            # Only reachable if the row changed under an unlocked read: still a lost race.
            lost_to = "a concurrent transition"
        record_event(EventKind.CLAIM_LOST, review_id=review_id, status=lost_to)
        return None


def _claim_locked(review: ContentReview, *, worker_id: str, job_id: str) -> ModerationRequest:
    previous_key = review.active_idempotency_key
    request = ModerationRequest.objects.create(
        review=review,
        provider=settings.MODERATION_PROVIDER,
        max_attempts=settings.MODERATION_MAX_ATTEMPTS,
        # A review back in pending after a decision is being reprocessed: a new operation that
        # supersedes the one which decided it.
        cause=Cause.REPROCESS if previous_key else Cause.JOB_STARTED,
        supersedes=ModerationRequest.objects.get(idempotency_key=previous_key) if previous_key else None,
    )
    review.active_idempotency_key = request.idempotency_key
    review.worker_id = worker_id
    review.provider_request_id = ""
    review.processing_started_at = timezone.now()
    review.completed_at = None
    transition_review(
        review,
        Cause.JOB_STARTED,
        actor=Actor.WORKER,
        actor_id=worker_id,
        idempotency_key=request.idempotency_key,
        job_id=job_id,
        update_fields=[
            "active_idempotency_key",
            "worker_id",
            "provider_request_id",
            "processing_started_at",
            "completed_at",
        ],
    )
    return request


@records_illegal_transitions
def review_give_up_waiting(*, review_id, reason: str) -> bool:
    """A pending review waited too long for an unavailable provider: a human decides.

    pending -> processing -> manual_review in one transaction, through the two legal transitions
    (claim, then provider_failed), so the log shows both and why. False if it is not pending.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update(skip_locked=True).filter(pk=review_id).first()
        if review is None or review.status != ReviewStatus.PENDING:
            return False
        request = _claim_locked(review, worker_id="circuit-breaker", job_id=context.current().get("job_id", ""))
        request_give_up_locked(review, request, reason)
        return True


# --- dispatch -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DispatchReport:
    action: str  # skipped | accepted | finalized | retry_scheduled | escalated
    detail: str = ""


def request_dispatch(*, request_id: int, worker_id: str, job_id: str = "", now: datetime | None = None) -> DispatchReport:
    """Make one provider attempt for a request, with its stored key, and record how it ended.

    Three short steps: (1) in a transaction, check the request is still the review's live
    operation and due, and record the attempt; (2) call the provider with no transaction open;
    (3) in a transaction, apply the result or schedule the retry / escalate.
    """
    with context.bind(worker_id=worker_id, job_id=job_id):
        started = _attempt_begin(request_id=request_id, worker_id=worker_id, job_id=job_id, now=now)
        if isinstance(started, DispatchReport):
            return started
        request, attempt, payload = started
        with context.bind(
            review_id=request.review_id, idempotency_key=request.idempotency_key, attempt_no=attempt.attempt_no
        ):
            return _attempt_call(request, attempt, payload)


def _attempt_begin(*, request_id: int, worker_id: str, job_id: str, now: datetime | None):
    now = now or timezone.now()
    with transaction.atomic():
        review = (
            ContentReview.objects.select_for_update(of=("self",))
            .select_related("content")
            .get(requests__pk=request_id)
        )
        request = ModerationRequest.objects.get(pk=request_id)
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
        in_flight = request.attempts.filter(outcome=AttemptOutcome.IN_FLIGHT)
        if any(a.started_at > lease_start for a in in_flight):
            return DispatchReport("skipped", "an attempt is in flight")
        in_flight.update(outcome=AttemptOutcome.ABANDONED, finished_at=now)
        if request.attempt_no >= request.max_attempts:
            request_give_up_locked(review, request, f"{request.attempt_no} attempts made; the last was abandoned")
            return DispatchReport("escalated", "attempts exhausted")
        if not breaker_allows(provider=request.provider, now=now):
            # Not an attempt: nothing is sent, and the operation resumes when the circuit lets it.
            request.next_attempt_at = breaker_retry_at(provider=request.provider, now=now)
            request.save(update_fields=["next_attempt_at", "updated_at"])
            return DispatchReport("skipped", "provider circuit open")
        request.attempt_no += 1
        request.status = RequestStatus.SENT
        request.sent_at = request.sent_at or now
        request.next_attempt_at = None
        request.last_enqueued_at = None  # the job the sweeper enqueued has run: the next retry may be enqueued
        request.save(update_fields=["attempt_no", "status", "sent_at", "next_attempt_at", "last_enqueued_at", "updated_at"])
        attempt = ProviderAttempt.objects.create(
            request=request, provider=request.provider, attempt_no=request.attempt_no,
            worker_id=worker_id, job_id=job_id, started_at=now,
        )
    content = review.content
    payload = ModerationInput(
        idempotency_key=str(request.idempotency_key),
        content_type=content.kind,
        text=content.text,
        media_url=content.media_url,
        metadata=content.metadata,
        callback_url=f"{settings.PUBLIC_BASE_URL}/api/v1/callbacks/{request.provider}/",
        reference={"review_id": str(review.pk)},
    )
    return request, attempt, payload


def _not_dispatchable(review: ContentReview, request: ModerationRequest, now: datetime) -> str:
    if request.status not in OPEN_REQUEST_STATUSES:
        return f"request is {request.status}"
    if review.status != ReviewStatus.PROCESSING or review.active_idempotency_key != request.idempotency_key:
        return f"request is no longer the review's live operation (review {review.status})"
    if request.next_attempt_at and request.next_attempt_at > now:
        return f"next attempt not due before {request.next_attempt_at.isoformat()}"
    return ""


def _attempt_call(request: ModerationRequest, attempt: ProviderAttempt, payload: ModerationInput) -> DispatchReport:
    # The provider may take PROVIDER_TIMEOUT_S to answer. Holding the review's row lock that
    # long would stall the callback that may arrive meanwhile, and every other worker (6).
    if connection.in_atomic_block:
        raise RuntimeError("a provider must never be called inside a database transaction")
    provider = get_provider(request.provider)
    clock = time.monotonic()
    try:
        reply = provider.moderate(payload)
    except ProviderError as exc:
        latency_ms = int((time.monotonic() - clock) * 1000)
        logger.warning("provider %s failed (%s): %s", request.provider, exc.kind, exc)
        report = _attempt_failed(request, attempt, exc, latency_ms)
        breaker_record(provider=request.provider, outcome=exc.kind)
        return report
    latency_ms = int((time.monotonic() - clock) * 1000)
    if isinstance(reply, Accepted):
        _attempt_accepted(request, attempt, reply, latency_ms)
        breaker_record(provider=request.provider, outcome=AttemptOutcome.ACCEPTED)
        return DispatchReport("accepted", reply.provider_request_id)
    _attempt_close(attempt, AttemptOutcome.RESULT, latency_ms)
    breaker_record(provider=request.provider, outcome=AttemptOutcome.RESULT)
    outcome = review_finalize(
        idempotency_key=request.idempotency_key,
        result=reply,
        cause=Cause.PROVIDER_RESULT,
        attempt_no=attempt.attempt_no,
    )
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


def retry_delay(attempt_no: int) -> timedelta:
    """Exponential backoff with full jitter, capped: attempt 1 waits up to base, 2 up to 2*base..."""
    ceiling = min(settings.MODERATION_RETRY_BACKOFF_S * 2 ** (attempt_no - 1), settings.MODERATION_RETRY_BACKOFF_MAX_S)
    return timedelta(seconds=random.uniform(ceiling / 2, ceiling))


def _attempt_failed(request: ModerationRequest, attempt: ProviderAttempt, exc: ProviderError, latency_ms: int) -> DispatchReport:
    error = f"{exc.kind}: {exc}"[:2000]
    with transaction.atomic():
        review = ContentReview.objects.select_for_update().get(pk=request.review_id)  # lock order: review first
        _attempt_close(attempt, exc.kind, latency_ms, http_status=exc.http_status, error=error)
        request = ModerationRequest.objects.get(pk=request.pk)
        if request.status not in OPEN_REQUEST_STATUSES:
            return DispatchReport("skipped", f"request became {request.status} meanwhile")
        request.last_error = error
        if exc.retryable and request.attempt_no < request.max_attempts:
            request.next_attempt_at = timezone.now() + retry_delay(request.attempt_no)
            request.save(update_fields=["last_error", "next_attempt_at", "updated_at"])
            return DispatchReport("retry_scheduled", request.next_attempt_at.isoformat())
        request.save(update_fields=["last_error", "updated_at"])
        why = "not retryable" if not exc.retryable else f"{request.attempt_no} attempts made"
        request_give_up_locked(review, request, f"{error} ({why})")
        return DispatchReport("escalated", error)


def request_give_up_locked(review: ContentReview, request: ModerationRequest, reason: str) -> None:
    """The operation failed for good: a human decides (processing -> manual_review).

    Call while holding the review's row lock.
    """
    ModerationRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.FAILED, next_attempt_at=None, completed_at=timezone.now()
    )
    if review.status != ReviewStatus.PROCESSING or review.active_idempotency_key != request.idempotency_key:
        return  # superseded or decided meanwhile: the failure of an old operation changes nothing
    decision = Decision.objects.create(
        review=review,
        label=ReviewStatus.MANUAL_REVIEW,
        source=DecisionSource.SYSTEM,
        request=request,
        reason=f"provider failed: {reason}",
    )
    review.decision = decision
    review.completed_at = timezone.now()
    transition_review(
        review,
        Cause.PROVIDER_FAILED,
        actor=Actor.SYSTEM,
        actor_id=context.current().get("worker_id", ""),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=request.attempt_no,
        reason=reason,
        update_fields=["decision", "completed_at"],
    )


def request_supersede_locked(review: ContentReview, old: ModerationRequest, *, reason: str) -> ModerationRequest:
    """Replace the review's live operation with a new one (new key); call holding the row lock.

    From here on a result for the old key is stale (invariant 4): the provider may still answer
    it, but nothing it says can change the review.
    """
    ModerationRequest.objects.filter(pk=old.pk).update(
        status=RequestStatus.SUPERSEDED, next_attempt_at=None, updated_at=timezone.now()
    )
    new = ModerationRequest.objects.create(
        review=review,
        provider=settings.MODERATION_PROVIDER,
        max_attempts=settings.MODERATION_MAX_ATTEMPTS,
        cause=Cause.RETRY_RECONCILE,
        supersedes=old,
        generation=old.generation + 1,
    )
    review.active_idempotency_key = new.idempotency_key
    review.provider_request_id = ""
    transition_review(
        review,
        Cause.RETRY_RECONCILE,
        actor=Actor.SYSTEM,
        actor_id="reconcile",
        idempotency_key=new.idempotency_key,
        job_id=context.current().get("job_id", ""),
        reason=reason,
        update_fields=["active_idempotency_key", "provider_request_id"],
    )
    enqueue_on_commit("moderation.tasks.dispatch_request", request_id=new.pk)
    return new


# --- finalize -----------------------------------------------------------------------------------


@records_illegal_transitions
def review_finalize(
    *,
    idempotency_key,
    result: ModerationResult,
    cause: Cause,
    callback_id: int | None = None,
    attempt_no: int | None = None,
) -> FinalizeOutcome:
    """Apply a provider result, if and only if it belongs to the review's live operation.

    The result applies only while the review is `processing` and its active key is the
    result's key (invariant 4); otherwise the outcome is recorded and nothing changes. The row
    lock makes two deliveries of one result queue up: the second finds the first's decision.
    """
    with context.bind(idempotency_key=idempotency_key):
        try:
            outcome, review_id = _finalize_once(idempotency_key, result, cause, callback_id, attempt_no)
        except ConcurrentTransition:
            # The row changed between our read and our write (only possible without the lock):
            # look once more; the result is then classified against the winner's state.
            outcome, review_id = _finalize_once(idempotency_key, result, cause, callback_id, attempt_no)
        if outcome is not FinalizeOutcome.APPLIED:
            record_event(
                _OUTCOME_EVENTS[outcome],
                review_id=review_id,
                idempotency_key=idempotency_key,
                cause=cause,
                callback_id=callback_id,
            )
        return outcome


def _lock_by_key(idempotency_key) -> tuple[ContentReview | None, ModerationRequest | None]:
    """Lock the review of an operation (by its key), then read the operation under that lock.

    Read before the lock, a waiter would judge a result against the request as it was before
    the winner completed it.
    """
    review = (
        ContentReview.objects.select_for_update(of=("self",))
        .filter(requests__idempotency_key=idempotency_key)
        .first()
    )
    if review is None:
        return None, None
    return review, ModerationRequest.objects.get(idempotency_key=idempotency_key)


def _finalize_once(idempotency_key, result, cause, callback_id, attempt_no) -> tuple[FinalizeOutcome, object]:
    with transaction.atomic():
        review, request = _lock_by_key(idempotency_key)
        if review is None:
            return FinalizeOutcome.ORPHAN, None
        outcome = _classify(review, request)
        if outcome is FinalizeOutcome.APPLIED:
            _apply_result_locked(review, request, result, cause, callback_id, attempt_no)
        return outcome, review.pk


def _classify(review: ContentReview, request: ModerationRequest) -> FinalizeOutcome:
    if request.status == RequestStatus.COMPLETED:
        return FinalizeOutcome.DUPLICATE
    if request.status == RequestStatus.SUPERSEDED or review.active_idempotency_key != request.idempotency_key:
        return FinalizeOutcome.STALE
    if review.status != ReviewStatus.PROCESSING:
        return FinalizeOutcome.ALREADY_FINAL
    return FinalizeOutcome.APPLIED


def _apply_result_locked(review, request, result: ModerationResult, cause, callback_id, attempt_no) -> None:
    policy = policy_active()
    verdict = evaluate(policy, result)
    now = timezone.now()
    decision = Decision.objects.create(
        review=review,
        label=verdict.label,
        source=DecisionSource.PROVIDER,
        score=verdict.score,
        flagged=result.flagged,
        categories=result.categories,
        category_scores=result.category_scores,
        model=result.model,
        policy=policy,
        explanation=verdict.explanation,
        request=request,
        callback_id=callback_id,
    )
    review.decision = decision
    review.completed_at = now
    fields = ["decision", "completed_at"]
    if result.provider_request_id and not review.provider_request_id:
        review.provider_request_id = result.provider_request_id
        fields.append("provider_request_id")
    transition_review(
        review,
        cause,
        label=verdict.label,
        actor=Actor.WORKER,
        actor_id=context.current().get("worker_id", ""),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=attempt_no if attempt_no is not None else request.attempt_no,
        reason=verdict.explanation,
        update_fields=fields,
    )
    ModerationRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.COMPLETED, completed_at=now, next_attempt_at=None, updated_at=now
    )


@records_illegal_transitions
def request_fail_reported(*, idempotency_key, error: str) -> FinalizeOutcome:
    """The provider reports it could not moderate an operation (a `moderation.failed` callback).

    An idempotent provider would give the same key the same answer, so the live operation is
    superseded by a new one (new key), or handed to a human after MODERATION_MAX_SUPERSEDES.
    A report about any other operation changes nothing, as for results.
    """
    with context.bind(idempotency_key=idempotency_key):
        with transaction.atomic():
            review, request = _lock_by_key(idempotency_key)
            outcome = _classify(review, request) if review else FinalizeOutcome.ORPHAN
            if outcome is FinalizeOutcome.APPLIED:
                reason = f"provider reported failure: {error}"[:2000]
                ModerationRequest.objects.filter(pk=request.pk).update(last_error=reason)
                if request.generation >= settings.MODERATION_MAX_SUPERSEDES:
                    request_give_up_locked(review, request, reason)
                else:
                    request_supersede_locked(review, request, reason=reason)
        if outcome is not FinalizeOutcome.APPLIED:
            record_event(
                _OUTCOME_EVENTS[outcome], review_id=review.pk if review else None,
                idempotency_key=idempotency_key, cause="provider_failed_callback",
            )
        return outcome
