"""Provider results: how one is judged against the review's live operation, and how it is applied.

One finalize for every result: a callback's, a synchronous answer's, a status query's (one
result, `review_finalize`) and a batch's (its results together, `results_finalize`). Locking
rule (see pipeline.py): the reviews' row locks are taken first, in id order, and the operations
are read under them; a result applies only if its review is `processing` and its active key is
the result's key (docs/design.md, invariant 4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition

from audit import context
from audit.models import Actor, EventKind
from moderation.models import (
    Author,
    Cause,
    ContentReview,
    DecisionSource,
    ModerationRequest,
    RequestStatus,
    ResultOutcome,
    ReviewStatus,
)
from moderation.verdicts import MEDIA_KINDS, decide, media_decide, notice_verdict, restricted_verdict, rule_text
from moderation.providers import NO_MODEL, ModerationResult
from moderation.services.authors import authors_lock
from moderation.db.compiled import CompiledSelect, CompiledUpdate
from moderation.db.one_statement import OneStatement
from moderation.services.decide import decide_locked
from moderation.services.policy import content_language, policy_active_id_subquery, policy_published
from moderation.services.transitions import record_event, records_illegal_transitions

logger = logging.getLogger(__name__)


# The event that records a result which changed nothing, by its outcome.
OUTCOME_EVENTS = {
    ResultOutcome.STALE: EventKind.STALE_RESULT,
    ResultOutcome.DUPLICATE: EventKind.DUPLICATE_RESULT,
    ResultOutcome.ALREADY_FINAL: EventKind.ALREADY_FINAL,
    ResultOutcome.ORPHAN: EventKind.ORPHAN_RESULT,
    # Recorded like an orphan (the operation is not this provider's to answer); the event's
    # detail names both providers.
    ResultOutcome.WRONG_PROVIDER: EventKind.ORPHAN_RESULT,
}


@dataclass(frozen=True)
class OperationResult:
    """A provider's result for one operation (by its key), and where it came from: the attempt
    that got it, or the callback that brought it."""

    idempotency_key: object
    result: ModerationResult
    attempt_no: int | None = None
    callback_id: int | None = None


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
    """`results_finalize` of one result: a callback's, a synchronous answer's, a status query's."""
    with context.bind(idempotency_key=idempotency_key):
        (outcome,) = results_finalize(
            [OperationResult(idempotency_key, result, attempt_no=attempt_no, callback_id=callback_id)],
            cause=cause, provider=provider,
        )
        return outcome


def results_finalize(results: list[OperationResult], *, cause: Cause, provider: str | None = None) -> list[ResultOutcome]:
    """Apply each provider result if and only if it belongs to its review's live operation, in
    one transaction; returns each one's outcome, in order.

    `provider`: who reported the results (a callback's endpoint); an operation of another
    provider is `wrong_provider` and changes nothing. None: the caller asked the operations' own
    provider (a synchronous answer, a batch's call, a status query).

    The result applies only while the review is `processing` and its active key is the
    result's key (docs/design.md, invariant 4); otherwise the outcome is recorded (an event) and
    nothing changes. The row locks make two deliveries of one result queue up: the second finds
    the first's decision. Anything raised rolls the whole transaction back: a caller finalizing
    many results then finalizes each alone, so that one that fails holds none of the others
    (docs/design.md, "Batches").
    """
    try:
        outcomes = _finalize_locked(results, cause, provider)
    except ConcurrentTransition:
        # A row changed between our read and our write (only possible without the lock): look
        # once more; each result is then classified against the winner's state. Inside a
        # caller's transaction (the inbox's) there is no savepoint to look again from: the
        # caller's transaction rolls back and its own retry (the sweeper) applies.
        if transaction.get_connection().in_atomic_block:
            raise
        outcomes = _finalize_locked(results, cause, provider)
    for item, (outcome, review_id) in zip(results, outcomes, strict=True):
        if outcome is not ResultOutcome.APPLIED:
            with context.bind(review_id=review_id, attempt_no=item.attempt_no):
                outcome_record(outcome, review_id=review_id, idempotency_key=item.idempotency_key, cause=cause,
                               provider=provider, callback_id=item.callback_id)
    return [outcome for outcome, _ in outcomes]


def _finalize_locked(results: list[OperationResult], cause: Cause, provider: str | None) -> list[tuple]:
    # savepoint=False: in a caller's transaction (the inbox processing a callback) this block is
    # not undone alone; whatever it raises rolls the caller's transaction back as a whole. A
    # savepoint would cost two round trips for a partial rollback nobody uses.
    with transaction.atomic(savepoint=False):
        locked = reviews_lock_by_keys([item.idempotency_key for item in results])
        outcomes: list[tuple] = [(ResultOutcome.ORPHAN, None)] * len(results)
        found = [(review, request, i) for i, (review, request) in enumerate(locked) if review is not None]
        found.sort(key=lambda each: each[0].pk)  # in the order they were locked
        for review, request, i in found:
            outcomes[i] = (result_classify(review, request, provider), review.pk)
        # The authors whose strikes these results may change, locked after the reviews and in id
        # order (moderation/services/authors.py): two batches never deadlock on them. Each is handed
        # to its review's decide path, which writes its strike and reads its points under that lock.
        applied = [(review, request, i) for review, request, i in found if outcomes[i][0] is ResultOutcome.APPLIED]
        authors = authors_lock(review.author_id for review, _, _ in applied)
        for review, request, i in applied:
            item = results[i]
            with context.bind(review_id=review.pk, idempotency_key=request.idempotency_key, attempt_no=item.attempt_no):
                result_apply_locked(review, request, item.result, cause=cause, callback_id=item.callback_id,
                                    attempt_no=item.attempt_no, author=authors.get(review.author_id))
        return outcomes


# Compiled once (moderation/db/compiled.py): every callback and every batch runs them.
_REVIEWS_LOCK = CompiledSelect(
    lambda keys: ContentReview.objects.select_for_update(of=("self",))
    .select_related("client", "content")  # for the decision's notification, in the same query
    .filter(requests__idempotency_key__in=keys)
    .order_by("pk")
)
# The newest policy's id rides along (the decision's policy, without a statement of its own).
_REQUESTS_READ = CompiledSelect(
    lambda keys: ModerationRequest.objects.annotate(active_policy_id=policy_active_id_subquery())
    .filter(idempotency_key__in=keys)
)

_OPERATION_COMPLETED = CompiledUpdate(lambda pk: ModerationRequest.objects.filter(pk=pk),
                                      ("status", "completed_at", "next_attempt_at", "updated_at"))


def reviews_lock_by_keys(keys: list) -> list[tuple[ContentReview | None, ModerationRequest | None]]:
    """Lock the reviews of operations (by their keys), in id order, then read the operations under
    those locks: (review, operation) for each key, in order; (None, None) for an unknown key.

    Read before the locks, a waiter would judge a result against the request as it was before
    the lock's holder completed it. Every lock of several reviews is taken in id order, so two
    writers never deadlock.
    """
    keys = [ModerationRequest._meta.get_field("idempotency_key").to_python(key) for key in keys]
    known = [key for key in keys if key is not None]
    reviews = {review.pk: review for review in _REVIEWS_LOCK.all(known)}
    if not reviews:
        return [(None, None)] * len(keys)
    requests = {request.idempotency_key: request for request in _REQUESTS_READ.all(known)}
    return [(reviews.get(requests[key].review_id), requests[key]) if key in requests else (None, None)
            for key in keys]


def result_classify(review: ContentReview, request: ModerationRequest, provider: str | None = None) -> ResultOutcome:
    """What a result for `request` does to `review`: `applied` only for the live operation of a
    review still processing (docs/design.md, invariant 4). Call holding the review's row lock,
    with `request` read under it."""
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


def result_apply_locked(review: ContentReview, request: ModerationRequest, result: ModerationResult, *,
                        cause: Cause, callback_id: int | None = None, attempt_no: int | None = None,
                        author: Author | None = None) -> None:
    """Decide `review` from a result `result_classify` found `applied`, and complete its operation.
    Call holding the review's row lock, and `author`'s (the review's author, locked after the
    reviews: `authors_lock`) when it has one."""
    if review.content.kind in MEDIA_KINDS:
        # Judged under the version its banks were matched with, pinned before the provider was
        # called (moderation/services/media.py): never a version published since.
        policy = policy_published(request.policy_id or getattr(request, "active_policy_id", None))
        verdict = media_decide(policy, None if result is NO_MODEL else result, kind=review.content.kind,
                               media=request.media or {"error": "the media was never read"})
    else:
        policy = policy_published(getattr(request, "active_policy_id", None))
        detection = content_language(review.content)
        verdict = decide(policy, result, text=rule_text(review.content), detection=detection)
    judged = verdict.label
    if review.author_restricted:
        verdict = restricted_verdict(policy, verdict)
    if review.notice_kind:  # read under the lock a notice takes to set it: none lands unseen
        verdict = notice_verdict(verdict)
    now = timezone.now()
    # The operation is complete: written in the statement that inserts the decision.
    writes = OneStatement()
    writes.update_compiled(_OPERATION_COMPLETED, request.pk,
                           status=RequestStatus.COMPLETED, completed_at=now, next_attempt_at=None, updated_at=now)
    fields = ()
    if result.provider_request_id and not review.provider_request_id:
        review.provider_request_id = result.provider_request_id
        fields = ("provider_request_id",)
    # A callback's result is applied by the web process that received it (or the sweeper): the
    # actor is the callback, named by its event id.
    actor = Actor.WEBHOOK if cause == Cause.PROVIDER_CALLBACK else Actor.WORKER
    decide_locked(
        review,
        cause=cause,
        label=verdict.label,
        source=DecisionSource.PROVIDER,
        score=verdict.score,
        flagged=None if result is NO_MODEL else result.flagged,
        categories=result.categories,
        category_scores=result.category_scores if verdict.scores is None else verdict.scores,
        parts=verdict.parts,
        rationale=verdict.rationale,
        model=result.model,
        policy=policy,
        explanation=verdict.explanation,
        rule_matches=verdict.stored_matches(),
        model_used=verdict.model_used,
        request=request,
        callback_id=callback_id,
        actor=actor,
        actor_id=actor_id_bound(actor),
        idempotency_key=request.idempotency_key,
        job_id=context.current().get("job_id", ""),
        attempt_no=attempt_no if attempt_no is not None else request.attempt_no,
        transition_reason=verdict.explanation,
        update_fields=fields,
        writes=writes,
        counts_strike=verdict.label == judged,  # not a rejection only because the author is restricted
        author=author,
    )


def outcome_record(outcome: ResultOutcome, *, review_id, idempotency_key, cause: str, provider: str | None = None,
                   **detail) -> None:
    """Record (an event) a result or a failure report that changed nothing, and why."""
    if outcome is ResultOutcome.WRONG_PROVIDER:
        detail.update(outcome=outcome, reported_by=provider)
    record_event(OUTCOME_EVENTS[outcome], review_id=review_id, idempotency_key=idempotency_key, cause=cause,
                 **detail)


def actor_id_bound(actor: str) -> str:
    """Who acted, from the bound context: a callback's event id, else the worker's id."""
    ids = context.current()
    if actor == Actor.WEBHOOK:
        return ids.get("provider_event_id", "")
    return ids.get("worker_id", "")
