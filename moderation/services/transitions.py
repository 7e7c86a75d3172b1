"""How a review's status changes: `transition_reviews` (`transition_review` for one review), the
one path (docs/design.md, invariant 1); how a review leaves the review queues; and how the pipeline
records what it refused to do."""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, reduce, wraps
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import models, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone
from django_fsm import ConcurrentTransition, InvalidResultState, TransitionNotAllowed
from simple_history.signals import post_create_historical_record, pre_create_historical_record

from audit import context
from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation.errors import IllegalTransition
from moderation.models import (
    REVIEW_HISTORY,
    TRANSITION_FOR_CAUSE,
    Author,
    Cause,
    ContentReview,
    QueueVisit,
    ReviewStatus,
)
from moderation.review_queues import QueueEntry
from moderation.services.routing import review_queue_entry
from moderation.db.compiled import CompiledUpdate
from moderation.db.one_statement import OneStatement
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
    report_count: float = 0,
    author: Author | None = None,
    entry: QueueEntry | None = None,
) -> ReviewTransition:
    """`transition_reviews` for one review; returns its transition row. `author`: the review's
    author, when the caller holds its row lock; `entry`: its place in the queues, when the caller
    computed it (both as `transition_reviews` takes them)."""
    (transition,) = transition_reviews(
        [review], cause, actor=actor, actor_id=actor_id, label=label, idempotency_keys=[idempotency_key],
        job_id=job_id, attempt_no=attempt_no, reason=reason, history_user=history_user,
        update_fields=update_fields, report_count=report_count,
        authors={author.pk: author} if author is not None else None, entries=[entry],
    )
    return transition


def transition_reviews(
    reviews: Sequence[ContentReview],
    cause: Cause,
    *,
    actor: str,
    actor_id: str = "",
    label: str | None = None,
    idempotency_keys: Sequence | None = None,
    job_id: str = "",
    attempt_no: int | None = None,
    reason: str = "",
    history_user=None,
    update_fields: Iterable[str] = (),
    report_count: float = 0,
    authors: Mapping[int, Author] | None = None,
    entries: Sequence[QueueEntry | None] | None = None,
) -> list[ReviewTransition]:
    """Run the state machine transition for `cause` on each review, save the reviews and write
    their audit rows: the one way a review's status changes (docs/design.md, invariant 1).

    Call inside `transaction.atomic()` while holding the reviews' row locks: the status changes
    and their transition rows commit together or not at all. Raises IllegalTransition when the
    state machine refuses any of them; the caller's transaction then rolls back whatever it wrote.

    Two statements for any number of reviews (a batch's claim moves sixteen): one conditional
    UPDATE writes every review's new status, version and `update_fields` (their in-memory values),
    each row only if it still has the status read, as `ConcurrentTransitionMixin` guards a save;
    should any row have moved meanwhile (possible only without the lock) it raises
    ConcurrentTransition. Then one statement inserts the history rows (simple-history's, which
    a save would have written) and the transition rows. `idempotency_keys`: the operation key
    each transition row names, one per review in order (None: none).

    A review that lands in manual_review joins a review queue here, at the place the one
    computation gives (moderation.services.routing.review_queue_entry; `report_count`: the
    distinct users who reported it, each by its weight, for the priority; `authors`: the reviews'
    authors the caller holds locked, by id, whose points and standing it reads, where a batch
    locked them up front); or at the place `entries` gives, one per review in order (None:
    computed here), which the caller computed with it (an undo: the place the review had). One
    that leaves manual_review leaves its queue (`review_queue_leave`).
    """
    keys = list(idempotency_keys) if idempotency_keys is not None else [None] * len(reviews)
    places = list(entries) if entries is not None else [None] * len(reviews)
    authors = authors or {}
    method_name, now = TRANSITION_FOR_CAUSE[cause], timezone.now()
    fields, from_statuses = {"status", "updated_at", *update_fields}, []
    for review, entry in zip(reviews, places, strict=True):
        from_status = review.status
        method = getattr(review, method_name)
        try:
            method(label) if label is not None else method()
        except (TransitionNotAllowed, InvalidResultState) as exc:  # InvalidResultState: a target not allowed
            raise IllegalTransition(review_id=review.pk, from_status=from_status, cause=cause) from exc
        from_statuses.append(from_status)
        review.version += 1
        review.updated_at = now
        fields.update(_queue_for(review, from_status, cause, report_count, authors.get(review.author_id), entry))
        review._change_reason = cause  # simple-history: why this history row exists
        if history_user is not None:
            review._history_user = history_user
    _update_unless_moved(reviews, from_statuses, fields)
    writes, rows = OneStatement(), []
    _queue_visits(writes, reviews, from_statuses, cause, now)
    for review, from_status, key in zip(reviews, from_statuses, keys, strict=True):
        review._update_initial_state()  # what a later save of it checks against (ConcurrentTransitionMixin)
        with context.bind(review_id=review.pk, idempotency_key=key or review.active_idempotency_key):
            logger.info("review %s: %s -> %s (%s)", review.pk, from_status, review.status, cause)
        transition = ReviewTransition(
            review=review, from_status=from_status, to_status=review.status, cause=cause, actor=actor,
            actor_id=actor_id, idempotency_key=key, job_id=job_id, attempt_no=attempt_no, reason=reason,
        )
        history = review_history_row(review)
        for row in (history, transition):
            if row is not None:
                writes.insert(row)
        rows.append((review, history, transition))
    writes.execute()
    for review, history, _ in rows:
        if history is not None:
            post_create_historical_record.send(
                sender=type(history), instance=review, history_instance=history, using=None
            )
    return [transition for _, _, transition in rows]


def _update_unless_moved(reviews: Sequence[ContentReview], from_statuses: list[str], fields: set[str]) -> None:
    """One UPDATE of `fields` (their in-memory values; a value that differs between reviews as a
    CASE on the id, as `bulk_update` writes it) and of the version, on the rows that still have
    the status each review was read with. Raises ConcurrentTransition unless every row matched.
    Its SQL is compiled once per set of fields and shape (moderation/db/compiled.py) where
    every review gets the same values: a callback's one review, a batch's claim."""
    meta = ContentReview._meta
    values: dict[str, Any] = {}
    for name in fields:
        field = meta.get_field(name)
        each = [getattr(review, field.attname) for review in reviews]
        if all(value == each[0] for value in each):
            values[field.attname] = each[0]
        else:
            values[field.attname] = Case(
                *(When(pk=review.pk, then=Value(value, output_field=field)) for review, value in zip(reviews, each, strict=True)),
                output_field=field,
            )
    by_status: dict[str, list] = {}
    for review, status in zip(reviews, from_statuses, strict=True):
        by_status.setdefault(status, []).append(meta.pk.to_python(review.pk))
    groups = [each for status, pks in by_status.items() for each in (status, pks)]
    moved = _transition_update(tuple(sorted(values))).run(*groups, **values)
    if moved != len(reviews):
        raise ConcurrentTransition(
            f"{len(reviews) - moved} of {len(reviews)} reviews changed status since they were read"
        )


def _unmoved(groups: Sequence[tuple[str, list]]) -> Q:
    """The rows of each (status read, ids) that still have that status: the conditional part of
    a transition's UPDATE (`WHERE status = <status read>`), its guard against a concurrent
    transition where no lock was taken."""
    return reduce(operator.or_, (Q(status=status, pk__in=pks) for status, pks in groups))


@cache
def _transition_update(names: tuple[str, ...]) -> CompiledUpdate:
    """A transition's UPDATE of `names` and the version, on the rows `_unmoved` keeps (read when
    compiled: a test that takes the guard out gets it, `compiled_forget`)."""
    def unmoved_rows(*groups) -> models.QuerySet:
        return ContentReview.objects.filter(_unmoved(list(zip(groups[::2], groups[1::2], strict=True))))
    return CompiledUpdate(unmoved_rows, names, fixed={"version": F("version") + 1})


@cache
def _review_history_model() -> type:
    # Read once: simple-history's descriptor builds a manager class on every access (`review.history`).
    return ContentReview.history.model


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
    row = _review_history_model()(
        history_date=history_date, history_type=history_type, history_user=history_user,
        history_change_reason=reason,
        **{field.attname: getattr(review, field.attname) for field in records.fields_included(review)},
    )
    pre_create_historical_record.send(
        sender=type(row), instance=review, history_date=history_date, history_user=history_user,
        history_change_reason=reason, history_instance=row, using=None,
    )
    return row


# A review out of the review queues: no queue, no priority, no place in line, and no moderator
# holding it (a lease is taken only on a review in a queue).
QUEUE_LEFT = {"queue": "", "priority": None, "queued_at": None, "queue_order_at": None, "due_at": None,
              "leased_to": None, "lease_expires_at": None}


def review_queue_leave(review: ContentReview) -> dict[str, Any]:
    """Take `review` out of the review queues and out of any moderator's lease, in memory: returns
    the fields and values to write (the caller writes them, in its transaction). The one place a
    review leaves its queue: when its status leaves manual_review (`transition_reviews`), or when
    its content is erased."""
    for name, value in QUEUE_LEFT.items():
        setattr(review, name, value)
    return dict(QUEUE_LEFT)


def _queue_for(review: ContentReview, from_status: str, cause: Cause, report_count: float,
               author: Author | None, entry: QueueEntry | None) -> tuple[str, ...]:
    """Set (or clear) the review's place in the review queues for the status it just took (`entry`,
    else the one computation's); returns the fields set. An erased content leaves nothing to
    judge: its review waits in no queue."""
    if review.status == ReviewStatus.MANUAL_REVIEW and cause != Cause.CONTENT_ERASED:
        if entry is None:
            entry = review_queue_entry(review, policy_active(), cause=cause, now=timezone.now(),
                                       report_count=report_count, author=author)
        review.queue = review.last_queue = entry.queue  # last_queue stays when it leaves: who may see it
        review.priority, review.queued_at, review.queue_order_at = entry.priority, entry.queued_at, entry.order_at
        review.due_at = entry.due_at
        return ("queue", "last_queue", "priority", "queued_at", "queue_order_at", "due_at")
    if from_status == ReviewStatus.MANUAL_REVIEW or review.queue:
        return tuple(review_queue_leave(review))
    return ()


def _queue_visits(writes: OneStatement, reviews: Sequence[ContentReview], from_statuses: list[str], cause: Cause,
                  now) -> None:
    """Record the reviews' stays in the review queues for the deadline figures (docs/design.md,
    "Deadlines"), in the transition's statement: a review entering manual_review opens a visit
    at its anchor and due time; one leaving closes its open visit, `decided` when a decision
    (approved, rejected) took it out, not an erasure or a reprocess (sent back to the model). An undo reopens the visit its decision
    closed: an undone decision is no decision, and the anchor and due time stay."""
    closing: dict[bool, list] = {True: [], False: []}
    for review, from_status in zip(reviews, from_statuses, strict=True):
        if from_status == ReviewStatus.MANUAL_REVIEW and review.status != ReviewStatus.MANUAL_REVIEW:
            # Sent back to the model (reprocess) or erased: it left without a decision.
            decided = review.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED) and cause != Cause.CONTENT_ERASED
            closing[decided].append(review.pk)
    for decided, ids in closing.items():
        if ids:
            writes.update(QueueVisit.objects.filter(review_id__in=ids, left_at__isnull=True), left_at=now, decided=decided)
    for review, from_status in zip(reviews, from_statuses, strict=True):
        if review.status != ReviewStatus.MANUAL_REVIEW or from_status == ReviewStatus.MANUAL_REVIEW or not review.queue:
            continue
        if cause == Cause.UNDO:
            last = QueueVisit.objects.filter(review_id=review.pk).order_by("-id").values("pk")[:1]
            writes.update(QueueVisit.objects.filter(pk__in=last), left_at=None, decided=False, queue=review.queue)
        else:
            writes.insert(QueueVisit(review_id=review.pk, queue=review.queue, cause=cause,
                                     notice_kind=review.notice_kind, anchor_at=review.queued_at, due_at=review.due_at))


def queue_visit_leave(review_ids) -> int:
    """Close the open visits of reviews that leave their queue without a decision (their content
    erased while they waited): no decision, so no figure counts them."""
    return QueueVisit.objects.filter(review_id__in=review_ids, left_at__isnull=True).update(
        left_at=timezone.now(), decided=False)


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
