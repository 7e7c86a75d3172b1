"""How a review's status changes (`transition_review` for one review, `transition_reviews_bulk`
for a batch's claim: docs/design.md, invariant 1), and how the pipeline records what it refused to do."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_fsm import InvalidResultState, TransitionNotAllowed, can_proceed
from simple_history.signals import post_create_historical_record, pre_create_historical_record

from audit import context
from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation.errors import IllegalTransition
from moderation.models import REVIEW_HISTORY, TRANSITION_FOR_CAUSE, Cause, ContentReview, ReviewStatus
from moderation.review_queues import queue_entry
from moderation.services._one_statement import OneStatement
from moderation.services.policy import policy_active

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def transition_review(
    review: ContentReview,
    cause: Cause,
    *,
    actor: str,
    actor_id: str = "",
    label: str | None = None,
    idempotency_key=None,
    job_id: str = "",
    attempt_no: int | None = None,
    reason: str = "",
    history_user=None,
    update_fields: Iterable[str] = (),
    report_count: int = 0,
) -> ReviewTransition:
    """Run the state machine transition for `cause`, save the review and write its audit row.

    Call inside `transaction.atomic()` while holding the review's row lock: the status change and
    its transition row commit together or not at all (docs/design.md, invariant 1). Raises IllegalTransition
    when the state machine refuses; the caller's transaction then rolls back whatever it wrote.

    A review that lands in manual_review joins a human queue here, the one place its queue and
    priority are computed (`report_count`: the distinct users who reported it, for the priority);
    one that leaves manual_review leaves its queue.
    """
    from_status = review.status
    method = getattr(review, TRANSITION_FOR_CAUSE[cause])
    try:
        method(label) if label is not None else method()
    except (TransitionNotAllowed, InvalidResultState) as exc:  # InvalidResultState: a target not allowed
        raise IllegalTransition(review_id=review.pk, from_status=from_status, cause=cause) from exc
    review.version += 1
    update_fields = [*update_fields, *_requeue(review, from_status, cause, report_count)]
    review._change_reason = cause  # simple-history: why this history row exists
    if history_user is not None:
        review._history_user = history_user
    # The conditional UPDATE (ConcurrentTransitionMixin: WHERE status = <status read>) first,
    # alone: it raises ConcurrentTransition when it matches nothing. Its history row, which
    # simple-history would insert on save, goes with the transition row in one statement.
    review.skip_history_when_saving = True
    try:
        review.save(update_fields=["status", "version", "updated_at", *update_fields])
    finally:
        del review.skip_history_when_saving
    with context.bind(review_id=review.pk, idempotency_key=idempotency_key or review.active_idempotency_key):
        logger.info("review %s: %s -> %s (%s)", review.pk, from_status, review.status, cause)
    transition = ReviewTransition(
        review=review,
        from_status=from_status,
        to_status=review.status,
        cause=cause,
        actor=actor,
        actor_id=actor_id,
        idempotency_key=idempotency_key,
        job_id=job_id,
        attempt_no=attempt_no,
        reason=reason,
    )
    history = review_history_row(review)
    writes = OneStatement()
    for row in (history, transition):
        if row is not None:
            writes.insert(row)
    writes.execute()
    if history is not None:
        post_create_historical_record.send(
            sender=type(history), instance=review, history_instance=history, using=None
        )
    return transition


def review_history_row(review: ContentReview, *, created: bool = False):
    """The unsaved history row simple-history writes when a review is saved (its
    `create_historical_record`, without the save), or None when history is turned off.
    `created`: the review's first row (it is being inserted), else a change."""
    if not getattr(settings, "SIMPLE_HISTORY_ENABLED", True):
        return None
    records, history_type = REVIEW_HISTORY, "+" if created else "~"
    history_date = getattr(review, "_history_date", timezone.now())
    history_user = records.get_history_user(review)
    reason = records.get_change_reason_for_object(review, history_type, None)
    row = review.history.model(
        history_date=history_date, history_type=history_type, history_user=history_user,
        history_change_reason=reason,
        **{field.attname: getattr(review, field.attname) for field in records.fields_included(review)},
    )
    pre_create_historical_record.send(
        sender=type(row), instance=review, history_date=history_date, history_user=history_user,
        history_change_reason=reason, history_instance=row, using=None,
    )
    return row


_QUEUE_FIELDS = ("queue", "priority", "queued_at", "queue_order_at")


def _requeue(review: ContentReview, from_status: str, cause: Cause, report_count: int) -> tuple[str, ...]:
    """Set (or clear) the review's place in the human queues for the status it just took. An erased
    content leaves nothing to judge: its review waits in no queue."""
    if review.status == ReviewStatus.MANUAL_REVIEW and cause != Cause.CONTENT_ERASED:
        decision = review.decision
        entry = queue_entry(
            policy_active(), cause=cause, category_scores=decision.category_scores if decision else {},
            report_count=report_count, now=timezone.now(),
        )
        review.queue, review.priority = entry.queue, entry.priority
        review.queued_at, review.queue_order_at = entry.queued_at, entry.order_at
        return _QUEUE_FIELDS
    if from_status == ReviewStatus.MANUAL_REVIEW or review.queue:
        review.queue, review.priority, review.queued_at, review.queue_order_at = "", None, None, None
        return _QUEUE_FIELDS
    return ()


def record_event(
    kind: EventKind,
    *,
    review_id=None,
    idempotency_key=None,
    level: int = logging.INFO,
    **detail: Any,
) -> PipelineEvent:
    """Record that the pipeline looked at work and changed nothing (a lost claim, a stale result...).

    Worker and job ids come from the bound logging context.
    """
    ids = context.current()
    with context.bind(review_id=review_id, idempotency_key=idempotency_key):
        logger.log(level, "%s: %s", kind.label, detail or "")
    return PipelineEvent.objects.create(
        kind=kind,
        review_id=review_id,
        idempotency_key=idempotency_key,
        worker_id=ids.get("worker_id", ""),
        job_id=ids.get("job_id", ""),
        detail={k: str(v) for k, v in detail.items() if v is not None},
    )


def records_illegal_transitions(func: Callable[P, R]) -> Callable[P, R]:
    """Count and log an illegal transition after the service's own transaction has rolled back.

    The attempt leaves the review and the transition log untouched; only the event row remains.
    """

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except IllegalTransition as exc:
            if transaction.get_connection().needs_rollback:
                # Raised in a caller's transaction without a savepoint of its own: that whole
                # transaction rolls back, and an event written in it would go with it.
                with context.bind(review_id=exc.review_id):
                    logger.warning("illegal transition from %s (%s) in %s", exc.from_status, exc.cause, func.__name__)
                raise
            record_event(
                EventKind.ILLEGAL_TRANSITION,
                review_id=exc.review_id,
                level=logging.WARNING,
                from_status=exc.from_status,
                cause=exc.cause,
                service=func.__name__,
            )
            raise

    return wrapper


def transition_reviews_bulk(
    reviews: list[ContentReview],
    cause: Cause,
    *,
    keys: dict,
    values: dict[str, Any],
    now,
) -> list[ContentReview]:
    """`transition_review` for many reviews taking one cause from one status, in bulk: the same
    state machine check per review, then one conditional UPDATE (docs/design.md, invariant 1;
    "Batches"). Write their audit rows with `transitions_record_bulk` next, in the same transaction.

    Call inside `transaction.atomic()` holding the reviews' row locks. `keys`: each review's new
    active idempotency key (review pk -> key); `values`: the other fields every review takes. The
    UPDATE applies only where the row still has the status read (as `ConcurrentTransitionMixin`
    does for one save): returns the reviews it moved, in the order given, updated in memory; a
    review it did not move is left untouched, in memory as in the database. Only for a transition
    with one source and a target outside manual_review (no queue entry to compute).
    """
    method_name = TRANSITION_FOR_CAUSE[cause]
    meta = getattr(ContentReview, method_name)._django_fsm
    (source,) = meta.transitions  # one source: the conditional UPDATE checks that status
    target = meta.get_transition(source).target
    if target == ReviewStatus.MANUAL_REVIEW or not isinstance(target, str):
        raise ValueError(f"{cause} cannot be applied in bulk (its target needs a queue entry or a label)")
    for review in reviews:
        if not can_proceed(getattr(review, method_name)):  # django-fsm's guard: from `source` only
            raise IllegalTransition(review_id=review.pk, from_status=review.status, cause=cause)
    moved = _update_conditionally(reviews, source=source, target=target, keys=keys, values=values, now=now)
    done = [r for r in reviews if r.pk in moved]
    for review in done:
        getattr(review, method_name)()
        review.version += 1
        review.active_idempotency_key = keys[review.pk]
        review.updated_at = now
        for name, value in values.items():
            setattr(review, name, value)
        review.queue, review.priority, review.queued_at, review.queue_order_at = "", None, None, None
        with context.bind(review_id=review.pk, idempotency_key=keys[review.pk]):
            logger.info("review %s: %s -> %s (%s)", review.pk, source, target, cause)
    return done


def transitions_record_bulk(
    reviews: list[ContentReview], cause: Cause, *, from_status: str, actor: str, actor_id: str, job_id: str
) -> None:
    """The history rows and transition rows of reviews `transition_reviews_bulk` moved: one insert
    each, the same rows `transition_review` writes one by one."""
    for review in reviews:
        review._change_reason = cause  # simple-history: why this history row exists
    ContentReview.history.bulk_history_create(reviews, update=True, default_date=timezone.now())
    ReviewTransition.objects.bulk_create([
        ReviewTransition(review=review, from_status=from_status, to_status=review.status, cause=cause, actor=actor,
                         actor_id=actor_id, idempotency_key=review.active_idempotency_key, job_id=job_id)
        for review in reviews
    ])


def _update_conditionally(reviews, *, source: str, target: str, keys: dict, values: dict, now) -> set:
    """UPDATE ... WHERE status = <source> RETURNING id: the ids of the rows it moved."""
    from django.db import connection

    if not reviews:
        return set()
    meta = ContentReview._meta
    columns = {name: meta.get_field(name).column for name in values}
    sets = ", ".join(f"{_qn(column)} = %s" for column in columns.values())
    params = [meta.get_field(name).get_db_prep_save(value, connection) for name, value in values.items()]
    rows = ", ".join(["(%s::uuid, %s::uuid)"] * len(reviews))
    for review in reviews:
        params += [review.pk, keys[review.pk]]
    # The queue fields are cleared as `_requeue` clears them for a review leaving for a status
    # other than manual_review (a pending review normally has none).
    sql = (
        f"UPDATE {_qn(meta.db_table)} AS r SET status = %s, version = r.version + 1, updated_at = %s, "
        f"active_idempotency_key = v.key, queue = '', priority = NULL, queued_at = NULL, queue_order_at = NULL"
        f"{', ' + sets if sets else ''} FROM (VALUES {rows}) AS v(id, key) "
        f"WHERE r.id = v.id AND r.status = %s RETURNING r.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [target, now, *params, source])
        return {row[0] for row in cursor.fetchall()}


def _qn(name: str) -> str:
    from django.db import connection

    return connection.ops.quote_name(name)
