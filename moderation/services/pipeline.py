"""The provider pipeline: claim a review, finalize its result, supersede or give up an operation.

(Dispatching an attempt is in dispatch.py.) Locking rule: the review's row lock guards the
review *and* its moderation requests. Every service that changes either takes
`select_for_update()` on the review first, so two writers of one review always queue up in the
same order and never deadlock.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition

from audit import context, tracing
from audit.models import Actor, EventKind
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    ResultOutcome,
    Cause,
    ContentReview,
    DecisionSource,
    ModerationRequest,
    RequestStatus,
    ReviewStatus,
)
from moderation.verdicts import decide, match_record, rule_text
from moderation.providers import ModerationResult
from moderation.jobs import enqueue_on_commit
from moderation.services._one_statement import OneStatement
from moderation.services.transitions import record_event, records_illegal_transitions, transition_review
from moderation.services.decide import decide_locked
from moderation.services.policy import content_language, policy_active_id_subquery, policy_published

logger = logging.getLogger(__name__)


_OUTCOME_EVENTS = {
    ResultOutcome.STALE: EventKind.STALE_RESULT,
    ResultOutcome.DUPLICATE: EventKind.DUPLICATE_RESULT,
    ResultOutcome.ALREADY_FINAL: EventKind.ALREADY_FINAL,
    ResultOutcome.ORPHAN: EventKind.ORPHAN_RESULT,
    # Recorded like an orphan (the operation is not this provider's to answer); the event's
    # detail names both providers.
    ResultOutcome.WRONG_PROVIDER: EventKind.ORPHAN_RESULT,
}


# --- claim --------------------------------------------------------------------------------------


@records_illegal_transitions
def review_claim(*, review_id, worker_id: str, job_id: str = "") -> ModerationRequest | None:
    """Move a pending review to processing and store its new request (a fresh idempotency key).

    Of several workers claiming at once exactly one wins: the row lock makes the others wait,
    and they then read a status other than pending. A loser returns None having changed nothing
    and without calling the provider (docs/design.md, invariant 2). The key is stored here, in the claim's
    transaction, before any request can leave (docs/design.md, invariant 3).
    """
    with context.bind(review_id=review_id, worker_id=worker_id, job_id=job_id):
        try:
            with transaction.atomic():
                review = ContentReview.objects.select_for_update().get(pk=review_id)
                if review.status != ReviewStatus.PENDING:
                    lost_to = review.status
                else:
                    return review_claim_locked(review, worker_id=worker_id, job_id=job_id)
        except ConcurrentTransition:
            # Only reachable if the row changed under an unlocked read: still a lost race.
            lost_to = "a concurrent transition"
        record_event(EventKind.CLAIM_LOST, review_id=review_id, status=lost_to)
        return None


def review_claim_locked(review: ContentReview, *, worker_id: str, job_id: str, actor: str = Actor.WORKER) -> ModerationRequest:
    previous_key = review.active_idempotency_key
    request = ModerationRequest.objects.create(
        review=review,
        provider=settings.MODERATION_PROVIDER,
        max_attempts=settings.MODERATION_MAX_ATTEMPTS,
        # A review back in pending after a decision is being reprocessed: a new operation that
        # supersedes the one which decided it.
        cause=Cause.REPROCESS if previous_key else Cause.JOB_STARTED,
        supersedes=ModerationRequest.objects.get(idempotency_key=previous_key) if previous_key else None,
        trace_parent=tracing.carrier(),  # a callback for this operation continues this trace
    )
    review.active_idempotency_key = request.idempotency_key
    review.worker_id = worker_id
    review.provider_request_id = ""
    review.processing_started_at = timezone.now()
    review.completed_at = None
    transition_review(
        review,
        Cause.JOB_STARTED,
        actor=actor,
        actor_id=worker_id,
        idempotency_key=request.idempotency_key,
        job_id=job_id,
        update_fields=["active_idempotency_key", "worker_id", "provider_request_id", "processing_started_at",
                       "completed_at"],
    )
    return request


@records_illegal_transitions
def review_give_up_waiting(*, review_id, reason: str) -> bool:
    """A review waited too long for an unavailable provider: a human decides.

    A pending one goes pending -> processing -> manual_review in one transaction, through the
    two legal transitions (claim, then provider_failed), so the log shows both and why; a
    processing one (its retry postponed by the circuit) has its live operation given up.
    False if it no longer waits.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update(skip_locked=True).filter(pk=review_id).first()
        if review is None or review.provider_wait_since is None:
            return False
        if review.status == ReviewStatus.PENDING:
            request = review_claim_locked(
                review, worker_id="circuit-breaker", job_id=context.current().get("job_id", ""), actor=Actor.SYSTEM
            )
        elif review.status == ReviewStatus.PROCESSING:
            request = ModerationRequest.objects.get(idempotency_key=review.active_idempotency_key)
        else:
            return False
        request_give_up_locked(review, request, reason)
        return True


def request_close_live_locked(review: ContentReview, *, why: str) -> None:
    """Close the review's live operation, if still open, as failed: nothing retries it and a late
    result for it finds the review decided. Call holding the review's row lock."""
    if not review.active_idempotency_key:
        return
    now = timezone.now()
    ModerationRequest.objects.filter(
        idempotency_key=review.active_idempotency_key, status__in=OPEN_REQUEST_STATUSES
    ).update(status=RequestStatus.FAILED, next_attempt_at=None, completed_at=now, updated_at=now, last_error=why)


def request_give_up_locked(
    review: ContentReview, request: ModerationRequest, reason: str, *, actor: str = Actor.SYSTEM
) -> None:
    """The operation failed for good: a human decides (processing -> manual_review).

    Call while holding the review's row lock. `actor`: `webhook` when a provider's callback
    reported the failure.
    """
    ModerationRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.FAILED, next_attempt_at=None, completed_at=timezone.now()
    )
    if review.status != ReviewStatus.PROCESSING or review.active_idempotency_key != request.idempotency_key:
        return  # superseded or decided meanwhile: the failure of an old operation changes nothing
    decide_locked(
        review,
        cause=Cause.PROVIDER_FAILED,
        label=ReviewStatus.MANUAL_REVIEW,
        source=DecisionSource.SYSTEM,
        request=request,
        reason=f"provider failed: {reason}",
        actor=actor,
        actor_id=_actor_id(actor),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=request.attempt_no,
        transition_reason=reason,
    )


def request_supersede_locked(
    review: ContentReview, old: ModerationRequest, *, reason: str, actor: str = Actor.SYSTEM
) -> ModerationRequest:
    """Replace the review's live operation with a new one (new key); call holding the row lock.

    From here on a result for the old key is stale (docs/design.md, invariant 4): the provider may still answer
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
        trace_parent=tracing.carrier(),
    )
    review.active_idempotency_key = new.idempotency_key
    review.provider_request_id = ""
    transition_review(
        review,
        Cause.RETRY_RECONCILE,
        actor=actor,
        actor_id="reconcile" if actor == Actor.SYSTEM else _actor_id(actor),
        idempotency_key=new.idempotency_key,
        job_id=context.current().get("job_id", ""),
        reason=reason,
        update_fields=["active_idempotency_key", "provider_request_id"],
    )
    enqueue_on_commit("moderation.tasks.dispatch_request", for_review=review.pk, request_id=new.pk)
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
    provider: str | None = None,
) -> ResultOutcome:
    """Apply a provider result, if and only if it belongs to the review's live operation.

    `provider`: who reported the result (a callback's endpoint); an operation of another
    provider is `wrong_provider` and changes nothing. None: the caller asked the operation's own
    provider (a synchronous answer, a status query).

    The result applies only while the review is `processing` and its active key is the
    result's key (docs/design.md, invariant 4); otherwise the outcome is recorded and nothing changes. The row
    lock makes two deliveries of one result queue up: the second finds the first's decision.
    """
    with context.bind(idempotency_key=idempotency_key):
        try:
            outcome, review_id = _finalize_once(idempotency_key, result, cause, callback_id, attempt_no, provider)
        except ConcurrentTransition:
            # The row changed between our read and our write (only possible without the lock):
            # look once more; the result is then classified against the winner's state. Inside
            # a caller's transaction (the inbox's) there is no savepoint to look again from:
            # the caller's transaction rolls back and its own retry (the sweeper) applies.
            if transaction.get_connection().in_atomic_block:
                raise
            outcome, review_id = _finalize_once(idempotency_key, result, cause, callback_id, attempt_no, provider)
        if outcome is not ResultOutcome.APPLIED:
            record_event(
                _OUTCOME_EVENTS[outcome],
                review_id=review_id,
                idempotency_key=idempotency_key,
                cause=cause,
                callback_id=callback_id,
                **_wrong_provider_detail(outcome, provider),
            )
        return outcome


def _lock_by_key(idempotency_key) -> tuple[ContentReview | None, ModerationRequest | None]:
    """Lock the review of an operation (by its key), then read the operation under that lock.

    Read before the lock, a waiter would judge a result against the request as it was before
    the winner completed it.
    """
    review = (
        ContentReview.objects.select_for_update(of=("self",))
        .select_related("client", "content")  # for the decision's notification, in the same query
        .filter(requests__idempotency_key=idempotency_key)
        .first()
    )
    if review is None:
        return None, None
    # The newest policy's id rides along (the decision's policy, without a statement of its own).
    return review, ModerationRequest.objects.annotate(active_policy_id=policy_active_id_subquery()).get(
        idempotency_key=idempotency_key
    )


def _finalize_once(idempotency_key, result, cause, callback_id, attempt_no, provider) -> tuple[ResultOutcome, object]:
    # savepoint=False: in a caller's transaction (the inbox processing a callback) this block is
    # not undone alone; whatever it raises rolls the caller's transaction back as a whole. A
    # savepoint would cost two round trips for a partial rollback nobody uses.
    with transaction.atomic(savepoint=False):
        review, request = _lock_by_key(idempotency_key)
        if review is None:
            return ResultOutcome.ORPHAN, None
        outcome = _classify(review, request, provider)
        if outcome is ResultOutcome.APPLIED:
            _apply_result_locked(review, request, result, cause, callback_id, attempt_no)
        return outcome, review.pk


def _classify(review: ContentReview, request: ModerationRequest, provider: str | None = None) -> ResultOutcome:
    if provider is not None and request.provider != provider:
        # A correctly signed message from one provider about another's operation: the
        # signature proves who sent it, not that the operation is theirs to answer.
        return ResultOutcome.WRONG_PROVIDER
    if request.status == RequestStatus.COMPLETED:
        return ResultOutcome.DUPLICATE
    if request.status == RequestStatus.SUPERSEDED or review.active_idempotency_key != request.idempotency_key:
        return ResultOutcome.STALE
    if review.status != ReviewStatus.PROCESSING:
        return ResultOutcome.ALREADY_FINAL
    return ResultOutcome.APPLIED


def _apply_result_locked(review, request, result: ModerationResult, cause, callback_id, attempt_no) -> None:
    policy = policy_published(getattr(request, "active_policy_id", None))
    detection = content_language(review.content)
    verdict = decide(policy, result, text=rule_text(review.content), detection=detection)
    now = timezone.now()
    # The operation is complete: written in the statement that inserts the decision.
    writes = OneStatement()
    writes.update(ModerationRequest.objects.filter(pk=request.pk),
                  status=RequestStatus.COMPLETED, completed_at=now, next_attempt_at=None, updated_at=now)
    fields = ()
    if result.provider_request_id and not review.provider_request_id:
        review.provider_request_id = result.provider_request_id
        fields = ("provider_request_id",)
    decide_locked(
        review,
        cause=cause,
        label=verdict.label,
        source=DecisionSource.PROVIDER,
        score=verdict.score,
        flagged=result.flagged,
        categories=result.categories,
        category_scores=result.category_scores,
        model=result.model,
        policy=policy,
        explanation=verdict.explanation,
        rule_matches=[match_record(match) for match in verdict.rule_matches],
        model_used=verdict.model_used,
        request=request,
        callback_id=callback_id,
        # A callback's result is applied by the web process that received it (or the sweeper):
        # the actor is the callback, named by its event id.
        actor=Actor.WEBHOOK if cause == Cause.PROVIDER_CALLBACK else Actor.WORKER,
        actor_id=_actor_id(Actor.WEBHOOK if cause == Cause.PROVIDER_CALLBACK else Actor.WORKER),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=attempt_no if attempt_no is not None else request.attempt_no,
        transition_reason=verdict.explanation,
        update_fields=fields,
        writes=writes,
    )


@records_illegal_transitions
def request_fail_reported(*, idempotency_key, error: str, provider: str | None = None,
                          reported: bool = True) -> ResultOutcome:
    """The provider reports it could not moderate an operation (a `moderation.failed` callback);
    or, `reported` False, its answer could not be applied here (`error` says why).

    An idempotent provider would give the same key the same answer, so the live operation is
    superseded by a new one (new key), or handed to a human after MODERATION_MAX_SUPERSEDES.
    A report about any other operation (or from another provider) changes nothing, as for results.
    """
    with context.bind(idempotency_key=idempotency_key):
        with transaction.atomic(savepoint=False):  # as in _finalize_once
            review, request = _lock_by_key(idempotency_key)
            outcome = _classify(review, request, provider) if review else ResultOutcome.ORPHAN
            if outcome is ResultOutcome.APPLIED:
                reason = (f"provider reported failure: {error}" if reported else error)[:2000]
                ModerationRequest.objects.filter(pk=request.pk).update(last_error=reason)
                if request.generation >= settings.MODERATION_MAX_SUPERSEDES:
                    request_give_up_locked(review, request, reason, actor=Actor.WEBHOOK)
                else:
                    request_supersede_locked(review, request, reason=reason, actor=Actor.WEBHOOK)
        if outcome is not ResultOutcome.APPLIED:
            record_event(
                _OUTCOME_EVENTS[outcome], review_id=review.pk if review else None,
                idempotency_key=idempotency_key, cause="provider_failed_callback",
                **_wrong_provider_detail(outcome, provider),
            )
        return outcome


def _actor_id(actor: str) -> str:
    """Who acted, from the bound context: a callback's event id, else the worker's id."""
    ids = context.current()
    if actor == Actor.WEBHOOK:
        return ids.get("provider_event_id", "")
    return ids.get("worker_id", "")


def _wrong_provider_detail(outcome: ResultOutcome, provider: str | None) -> dict:
    return {"outcome": outcome, "reported_by": provider} if outcome is ResultOutcome.WRONG_PROVIDER else {}


def review_id_for_key(idempotency_key):
    """The review an operation's key belongs to (None for an unknown key): for log context."""
    return ModerationRequest.objects.filter(idempotency_key=idempotency_key).values_list("review_id", flat=True).first()
