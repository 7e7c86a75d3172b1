"""The provider pipeline: claim reviews, supersede or give up an operation, a reported failure.

(Dispatching an attempt is in dispatch.py, a batch's attempts in batch.py, and applying a result
in results.py.) Locking rule: the review's row lock guards the review *and* its moderation
requests. Every service that changes either takes `select_for_update()` on the review first (on
several reviews, in id order), so two writers of one review always queue up in the same order
and never deadlock.
"""

from __future__ import annotations

import logging
from functools import cache
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django_fsm import ConcurrentTransition

from audit import context, tracing
from audit.models import Actor, EventKind, ReviewTransition
from moderation.jobs import enqueue_on_commit
from moderation.models import (
    OPEN_REQUEST_STATUSES,
    Cause,
    ContentReview,
    DecisionSource,
    ModerationRequest,
    RequestStatus,
    ResultOutcome,
    ReviewStatus,
)
from moderation.db.compiled import CompiledSelect
from moderation.services.decide import decide_locked
from moderation.services.policy import policy_published
from moderation.services.results import actor_id_bound, outcome_record, result_classify, reviews_lock_by_keys
from moderation.services.transitions import (
    record_event,
    records_illegal_transitions,
    transition_review,
    transition_reviews,
)

logger = logging.getLogger(__name__)


# --- claim --------------------------------------------------------------------------------------


@dataclass
class Claim:
    """What a claimer took: its requests (its own review's first), or why it took none."""

    requests: list[ModerationRequest] = field(default_factory=list)
    lost: str = ""  # "claimed by batch <job id>" or "claim lost"


def review_claim(*, review_id, worker_id: str, job_id: str = "") -> ModerationRequest | None:
    """`reviews_claim` of one review: its new request, or None if the claim was lost."""
    claim = reviews_claim(review_id=review_id, worker_id=worker_id, job_id=job_id, size=1)
    return claim.requests[0] if claim.requests else None


@records_illegal_transitions
def reviews_claim(*, review_id, worker_id: str, job_id: str = "", size: int = 1) -> Claim:
    """Move `review_id` (if still pending) and up to `size - 1` other pending reviews, oldest
    enqueued first, to processing, each with a new request (a fresh idempotency key), in one
    transaction.

    Of several workers claiming one review at once exactly one wins: its row lock makes the others
    wait, and they then read a status other than pending. A loser returns no request having
    changed nothing and without calling the provider (docs/design.md, invariant 2). The others
    are locked with `FOR UPDATE SKIP LOCKED`, so two batch claimers never wait for each other and
    never take the same review; the status change itself is a conditional UPDATE (`WHERE status =
    'pending'`), a second line of defence. Reviews waiting for the provider's circuit are left to
    the sweeper, which enqueues them again once the circuit lets work through. The keys are stored
    here, in the claim's transaction, before any request can leave (docs/design.md, invariant 3).
    """
    with context.bind(review_id=review_id, worker_id=worker_id, job_id=job_id):
        try:
            with transaction.atomic():
                own = _REVIEW_LOCK.first(ContentReview._meta.pk.to_python(review_id))
                if own is None:
                    raise ContentReview.DoesNotExist(f"no review {review_id}")
                if own.status != ReviewStatus.PENDING:
                    lost_to = own.status
                else:
                    others = [] if size <= 1 else _others_lock(size - 1).all(own.pk)
                    return Claim(reviews_claim_locked([own, *others], worker_id=worker_id, job_id=job_id))
        except ConcurrentTransition:
            # Only reachable if a row changed under an unlocked read: still a lost race.
            lost_to = "a concurrent transition"
        if size > 1:
            claimed = review_claimed_by_batch(review_id=review_id, job_id=job_id)
            if claimed:  # another job's batch took it: the expected way of things with batches, not a lost race
                return Claim(lost=claimed)
        record_event(EventKind.CLAIM_LOST, review_id=review_id, status=lost_to)
        return Claim(lost="claim lost")


def reviews_claim_locked(
    reviews: list[ContentReview], *, worker_id: str, job_id: str, actor: str = Actor.WORKER
) -> list[ModerationRequest]:
    """Move the locked pending `reviews` to processing, each with a new operation (a fresh key):
    its request, its transition row and its history row, in a constant number of statements.
    Returns their requests, in the order given. Call holding the reviews' row locks."""
    previous = {review.pk: review.active_idempotency_key for review in reviews}
    reprocessed = [key for key in previous.values() if key]
    superseded = (
        {m.idempotency_key: m for m in ModerationRequest.objects.filter(idempotency_key__in=reprocessed)}
        if reprocessed else {}
    )
    carrier = tracing.carrier()  # a callback for these operations continues this trace
    requests = ModerationRequest.objects.bulk_create([
        ModerationRequest(
            review=review,
            provider=settings.MODERATION_PROVIDER,
            max_attempts=settings.MODERATION_MAX_ATTEMPTS,
            # A review back in pending after a decision is being reprocessed: a new operation
            # that supersedes the one which decided it.
            cause=Cause.REPROCESS if previous[review.pk] else Cause.JOB_STARTED,
            supersedes=superseded.get(previous[review.pk]),
            trace_parent=carrier,
        )
        for review in reviews
    ])
    now = timezone.now()
    for review, request in zip(reviews, requests, strict=True):
        review.active_idempotency_key = request.idempotency_key
        review.worker_id = worker_id
        review.provider_request_id = ""
        review.processing_started_at = now
        review.completed_at = None
    # (After the operations: the timeline orders a claim's rows by time.)
    transition_reviews(
        reviews,
        Cause.JOB_STARTED,
        actor=actor,
        actor_id=worker_id,
        idempotency_keys=[request.idempotency_key for request in requests],
        job_id=job_id,
        update_fields=["active_idempotency_key", "worker_id", "provider_request_id", "processing_started_at",
                       "completed_at"],
    )
    return requests


# A claim's locks, compiled once (moderation/db/compiled.py): every job takes them.
_REVIEW_LOCK = CompiledSelect(lambda pk: ContentReview.objects.select_for_update().filter(pk=pk))


@cache
def _others_lock(limit: int) -> CompiledSelect:
    """The pending reviews a batch claims beside its own (at most `limit`), oldest enqueued
    first, skipping those another claimer holds."""
    return CompiledSelect(
        lambda own: ContentReview.objects.select_for_update(skip_locked=True)
        .filter(status=ReviewStatus.PENDING, provider_wait_since__isnull=True)
        .exclude(pk=own)
        .order_by("last_enqueued_at")[:limit]
    )


def review_claimed_by_batch(*, review_id, job_id: str) -> str:
    """"claimed by batch <job id>" if another job's claim already took the review (it is no longer
    pending), else "". One read, no lock and no transaction: the cheap way out for the jobs of the
    reviews a batch took. Anything else (still pending, or moved on without any claim by another
    job) goes through `reviews_claim`, which decides under the lock."""
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
            (request,) = reviews_claim_locked(
                [review], worker_id="circuit-breaker", job_id=context.current().get("job_id", ""), actor=Actor.SYSTEM
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
        actor_id=actor_id_bound(actor),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=request.attempt_no,
        transition_reason=reason,
        # The version in force: the one whose id rode along with the operation's read, when it did.
        policy=policy_published(getattr(request, "active_policy_id", None)),
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
        actor_id="reconcile" if actor == Actor.SYSTEM else actor_id_bound(actor),
        idempotency_key=new.idempotency_key,
        job_id=context.current().get("job_id", ""),
        reason=reason,
        update_fields=["active_idempotency_key", "provider_request_id"],
    )
    enqueue_on_commit("moderation.tasks.dispatch_request", for_review=review.pk, request_id=new.pk)
    return new


# --- a reported failure -------------------------------------------------------------------------


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
        with transaction.atomic(savepoint=False):  # as in results_finalize
            ((review, request),) = reviews_lock_by_keys([idempotency_key])
            outcome = result_classify(review, request, provider) if review else ResultOutcome.ORPHAN
            if outcome is ResultOutcome.APPLIED:
                reason = (f"provider reported failure: {error}" if reported else error)[:2000]
                ModerationRequest.objects.filter(pk=request.pk).update(last_error=reason)
                if request.generation >= settings.MODERATION_MAX_SUPERSEDES:
                    request_give_up_locked(review, request, reason, actor=Actor.WEBHOOK)
                else:
                    request_supersede_locked(review, request, reason=reason, actor=Actor.WEBHOOK)
        if outcome is not ResultOutcome.APPLIED:
            outcome_record(outcome, review_id=review.pk if review else None, idempotency_key=idempotency_key,
                           cause="provider_failed_callback", provider=provider)
        return outcome


def review_id_for_key(idempotency_key):
    """The review an operation's key belongs to (None for an unknown key): for log context."""
    return ModerationRequest.objects.filter(idempotency_key=idempotency_key).values_list("review_id", flat=True).first()
