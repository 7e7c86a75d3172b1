"""Moderator QA (docs/qa.md): golden items, second reviews, and the time a decision took.

Everything here runs on human work only ("Review next", a moderator's decision): the
submission and the automatic decisions never reach it (docs/design.md, "Hot paths").

A QA answer is scored, never applied: it writes no decision, no transition, no notification
and no statement of reasons; the review it is about does not change. Two guards keep it fair
(docs/design.md, invariant 21):

- a moderator never gets the same golden item twice: handing one out is an INSERT that the
  unique constraint `qa_golden_once_per_moderator` arbitrates, and the answer is written under
  the item's row lock, once;
- a second review never goes to the moderator whose decision it reviews: "Review next" leaves
  those out in its locking SELECT (SKIP LOCKED, so two moderators never get one item), and the
  answer refuses them again under the item's row lock.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.utils import timezone

from moderation.errors import ContentErased, FourEyesRequired, LeasedToOther, NotApplicable, NoteTooLong
from moderation.models import (
    QA_NOTE_MAX,
    ContentReview,
    Decision,
    DecisionTime,
    GoldenItem,
    ModerationPolicy,
    QaItem,
    QaKind,
    ReviewStatus,
)
from moderation.services.policy import policy_active
from moderation.services.routing import queue_check_access
from moderation.validation import decision_category, decision_reason

ANSWER_LABELS = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


def _open_items():
    return QaItem.objects.filter(answered_at__isnull=True, skipped_at__isnull=True)


def qa_item_shown(*, moderator, review_id, now: datetime | None = None) -> QaItem | None:
    """The QA item of review `review_id` that `moderator`'s review page shows instead of the
    review (blind): the open one handed to them (its decision is this item's answer), else one
    they answered within a lease's time (the page then shows their answer, as a review shows the
    decision just made). None: the page shows the review."""
    if moderator is None or not getattr(moderator, "pk", None):
        return None
    now = now or timezone.now()
    recent = now - timedelta(seconds=settings.MODERATOR_LEASE_S)
    return (QaItem.objects.filter(moderator=moderator, review_id=review_id, skipped_at__isnull=True)
            .filter(Q(answered_at__isnull=True) | Q(answered_at__gte=recent))
            .select_related("golden", "first_decision").order_by(F("answered_at").desc(nulls_first=True), "-id").first())


def qa_item_take_locked(*, moderator, queue: str | None, forbidden: set[str], now: datetime,
                        skip: Collection = ()) -> QaItem | None:
    """Inside "Review next"'s transaction: the QA item to hand `moderator` instead of a review of
    `queue` (every queue when None; `forbidden`: the queues they may not take), or None. The one
    they hold (lease live) first, else the oldest second review nobody holds of a decision they
    did not make, in one locking read; else, at the active policy's `qa_golden_rate`, a golden
    item they never had.

    The first decider is left out in the locking SELECT (PostgreSQL checks it again on the row it
    locks), and SKIP LOCKED hands one item to one moderator however many ask at once."""
    free = Q(kind=QaKind.SECOND_REVIEW) & (Q(moderator__isnull=True) | Q(leased_until__lt=now))
    items = (_open_items().filter(Q(moderator=moderator, leased_until__gte=now) | free)
             .exclude(first_decision__moderator=moderator)
             .exclude(queue__in=forbidden).exclude(review__content__erased_at__isnull=False))
    if queue is not None:
        items = items.filter(queue=queue)
    if skip:  # the reviews the moderator passed over lately (review_take_next)
        items = items.exclude(review_id__in=list(skip))
    held_first = Case(When(moderator=moderator, then=Value(0)), default=Value(1))
    item = items.select_for_update(skip_locked=True, of=("self",)).order_by(held_first, "created_at", "id").first()
    if item is not None:
        item.moderator = moderator
        return _leased(item, now)
    rate = policy_active().qa_golden_rate
    if rate > 0 and random.random() < rate:  # noqa: S311 - a sample, not a secret
        return _golden_take(moderator, queue, forbidden, now)
    return None


def _golden_take(moderator, queue, forbidden, now) -> QaItem | None:
    """Hand `moderator` a golden item they never had. Which one is read without a lock; the
    INSERT is what decides: of two requests racing for the same one, the unique constraint
    lets one in, and the other hands out nothing (a review instead)."""
    had = QaItem.objects.filter(golden=OuterRef("pk"), moderator=moderator)
    decided_it = Decision.objects.filter(review=OuterRef("review"), moderator=moderator)
    # A golden review gone back to a human meanwhile (an appeal, reports) is not handed out: it
    # is a review again, to be decided for real.
    candidates = (GoldenItem.objects.filter(retired_at__isnull=True, review__content__erased_at__isnull=True,
                                            review__status__in=ANSWER_LABELS)
                  .exclude(Exists(had)).exclude(Exists(decided_it)).exclude(marked_by=moderator)
                  .exclude(queue__in=forbidden))
    if queue is not None:
        candidates = candidates.filter(Q(queue=queue) | Q(queue=""))
    golden = candidates.order_by("?").first()
    if golden is None:
        return None
    try:
        with transaction.atomic():  # a savepoint: the refused INSERT leaves "Review next" going
            return QaItem.objects.create(kind=QaKind.GOLDEN, review_id=golden.review_id, golden=golden,
                                         queue=queue or golden.queue, moderator=moderator, taken_at=now,
                                         leased_until=now + timedelta(seconds=settings.MODERATOR_LEASE_S))
    except IntegrityError:  # qa_golden_once_per_moderator: this moderator had it, a moment ago
        return None


def _leased(item: QaItem, now: datetime) -> QaItem:
    item.leased_until = now + timedelta(seconds=settings.MODERATOR_LEASE_S)
    item.taken_at = item.taken_at or now
    QaItem.objects.filter(pk=item.pk).update(moderator=item.moderator, leased_until=item.leased_until,
                                             taken_at=item.taken_at)
    return item


def qa_item_release(*, review_id, moderator) -> bool:
    """"Next review" or "Return to the queue" on QA work: a golden item is passed over for good
    (never handed to them again, not scored); a second review goes back for another moderator."""
    with transaction.atomic():
        item = _open_items().select_for_update().filter(moderator=moderator, review_id=review_id).first()
        if item is None:
            return False
        if item.kind == QaKind.GOLDEN:
            QaItem.objects.filter(pk=item.pk).update(skipped_at=timezone.now(), leased_until=None)
        else:
            QaItem.objects.filter(pk=item.pk).update(moderator=None, leased_until=None, taken_at=None)
    return True


def qa_answer(
    *,
    item_id: int,
    moderator,
    label: str,
    category: str = "",
    reason: str = "",
    reason_codes: Sequence[str] = (),
    note: str = "",
) -> QaItem:
    """A moderator's decision on QA work: checked as a decision is (the category and the reasons
    against the active policy: a QA item refuses what a review would), scored, and stored on the
    item. Never applied: the review, its decisions and its outbox stay as they are.

    Under the item's row lock: it must still be this moderator's and unanswered (a second submit
    is refused: one answer per item), and a second review's answerer must not be the first
    decision's maker (FourEyesRequired).
    """
    if label not in ANSWER_LABELS:
        raise NotApplicable(f"a decision is {' or '.join(ANSWER_LABELS)}")
    policy = policy_active()
    category = decision_category(label, category, policy)
    reason, reason_codes = decision_reason(label, category, reason, reason_codes, policy)
    note = (note or "").strip()
    with transaction.atomic():
        item = (QaItem.objects.select_for_update(of=("self",)).select_related("golden", "first_decision", "review")
                .get(pk=item_id))
        _check_answerable(item, moderator)
        now = timezone.now()
        item.answered_at, item.label, item.category = now, label, category
        item.reason, item.reason_codes, item.note = reason, reason_codes, _notes(item.note, note)
        if len(item.note) > QA_NOTE_MAX:
            raise NoteTooLong(f"a note is at most {QA_NOTE_MAX} characters (this one has {len(note)})")
        item.seconds = (now - item.taken_at).total_seconds() if item.taken_at else None
        if item.kind == QaKind.GOLDEN:
            item.correct = label == item.golden.expected_label and category == item.golden.expected_category
        else:
            first = item.first_decision
            item.agrees = label == first.label and category == (first.category or "")
        item.leased_until = None
        item.save(update_fields=["answered_at", "label", "category", "reason", "reason_codes", "note", "seconds",
                                 "correct", "agrees", "leased_until"])
    return item


def qa_note_add(*, item_id: int, moderator, text: str) -> QaItem:
    """A note written on QA work's page: kept with the item (never on its review, where others
    would read it), shown on the page as a note is."""
    text = (text or "").strip()
    if not text:
        raise NotApplicable("a note needs some text")
    with transaction.atomic():
        item = QaItem.objects.select_for_update(of=("self",)).select_related("first_decision", "review").get(pk=item_id)
        _check_answerable(item, moderator)
        item.note = _notes(item.note, text)
        if len(item.note) > QA_NOTE_MAX:
            raise NoteTooLong(f"a note is at most {QA_NOTE_MAX} characters (this one has {len(text)})")
        item.save(update_fields=["note"])
    return item


def _notes(before: str, note: str) -> str:
    return "\n\n".join(part for part in (before, note) if part)


def _check_answerable(item: QaItem, moderator) -> None:
    """Refuse an answer to an item that is not, or no longer, this moderator's to answer."""
    if item.answered_at is not None or item.skipped_at is not None:
        raise NotApplicable("already decided")
    if item.moderator_id != moderator.pk:
        holder = str(item.moderator) if item.moderator_id else ""
        raise LeasedToOther(f"{holder or 'nobody'} holds this QA item", holder=holder, until=item.leased_until)
    if item.kind == QaKind.SECOND_REVIEW and item.first_decision.moderator_id == moderator.pk:
        raise FourEyesRequired("a second review is made by a moderator other than the first",
                               reason="you made the decision this would review")
    queue_check_access(item.review, user=moderator)


def decision_lease_started(review: ContentReview, moderator) -> datetime | None:
    """When `moderator`'s lease of `review` (locked) began: "Review next" leases for
    MODERATOR_LEASE_S. None when they do not hold it (a bulk action, a decision from the list)."""
    if (moderator is None or review.leased_to_id != getattr(moderator, "pk", None)
            or review.lease_expires_at is None or review.lease_expires_at < timezone.now()):
        return None
    return review.lease_expires_at - timedelta(seconds=settings.MODERATOR_LEASE_S)


def qa_after_decision_locked(review: ContentReview, decision: Decision, *, moderator, policy: ModerationPolicy,
                             started: datetime | None) -> None:
    """In a moderator's decision's transaction (the review locked): how long it took, when they
    held the review (`started`: `decision_lease_started`, read before the decision ended the
    lease), and, at the policy's `qa_double_review_rate`, its second review, waiting for another
    moderator in the queue the review left."""
    if started is not None:
        DecisionTime.objects.create(decision=decision, moderator=moderator,
                                    seconds=max((timezone.now() - started).total_seconds(), 0.0))
    rate = policy.qa_double_review_rate
    if rate > 0 and random.random() < rate:  # noqa: S311 - a sample, not a secret
        QaItem.objects.create(kind=QaKind.SECOND_REVIEW, review=review, first_decision=decision,
                              queue=review.last_queue or "")


def qa_second_review_withdraw_locked(decision: Decision) -> None:
    """An undone decision is not reviewed again: its open second review goes (under the item's
    row lock, so an answer committed meanwhile stays)."""
    QaItem.objects.filter(first_decision=decision, answered_at__isnull=True).delete()


def golden_mark(*, review_id, expected_label: str, expected_category: str = "", lead) -> GoldenItem:
    """A team lead marks a decided review golden, with the decision it should get. Refused for a
    review not decided (approved or rejected), erased content, one already golden, a label that is
    not a decision, and a rejection without a category of the active policy."""
    if expected_label not in ANSWER_LABELS:
        raise NotApplicable(f"a golden item expects {' or '.join(ANSWER_LABELS)}")
    category = decision_category(expected_label, expected_category, policy_active())
    with transaction.atomic():
        review = ContentReview.objects.select_for_update(of=("self",)).select_related("content").get(pk=review_id)
        queue_check_access(review, user=lead)
        if review.content.erased_at is not None:
            raise ContentErased(f"review {review.pk}: its content was erased", reason="its content was erased")
        if review.status not in ANSWER_LABELS:
            raise NotApplicable("only a decided review (approved or rejected) can be golden")
        if GoldenItem.objects.filter(review=review).exists():
            raise NotApplicable("it is already a golden item")
        return GoldenItem.objects.create(review=review, expected_label=expected_label, expected_category=category,
                                         queue=review.last_queue or "", marked_by=lead)


def golden_retire(*, golden_id: int, lead) -> GoldenItem:
    """Hand a golden item out no more (answers given stay, and count). QueueForbidden for a lead
    who may not see its review."""
    with transaction.atomic():
        golden = GoldenItem.objects.select_for_update(of=("self",)).select_related("review").get(pk=golden_id)
        queue_check_access(golden.review, user=lead)
        if golden.retired_at is None:
            golden.retired_at = timezone.now()
            golden.save(update_fields=["retired_at"])
    return golden


def qa_disagreement_settle(*, item_id: int, lead, settlement: str) -> QaItem:
    """A team lead settles a second review that disagreed with the first decision, saying how.
    QueueForbidden for a lead who may not see its review."""
    settlement = (settlement or "").strip()
    if not settlement:
        raise NotApplicable("say how it was settled")
    if len(settlement) > QA_NOTE_MAX:
        raise NoteTooLong(f"at most {QA_NOTE_MAX} characters (this has {len(settlement)})")
    with transaction.atomic():
        item = QaItem.objects.select_for_update(of=("self",)).select_related("review").get(pk=item_id)
        queue_check_access(item.review, user=lead)
        if item.kind != QaKind.SECOND_REVIEW or item.agrees is not False:
            raise NotApplicable("only a second review that disagreed is settled")
        if item.settled_at is not None:
            raise NotApplicable(f"already settled by {item.settled_by}")
        item.settled_by, item.settled_at, item.settlement = lead, timezone.now(), settlement
        item.save(update_fields=["settled_by", "settled_at", "settlement"])
    return item
