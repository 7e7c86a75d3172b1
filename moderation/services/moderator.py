"""Human work: the review queues, overrides, escalations, reprocessing, notes.

A human decision is sticky: a provider result for any earlier operation finds the review no
longer `processing` and changes nothing (docs/design.md, invariant 10). Two moderators never hold one review:
"Review next" leases a review to one of them (SKIP LOCKED), and an override by anyone else
while the lease runs is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.errors import (
    AppealOpen,
    ContentErased,
    LeasedToOther,
    NotApplicable,
    NoteTooLong,
    NotUndoable,
    ReasonRequired,
    ReviewChange,
    SecondLookOpen,
    StaleVersion,
)
from moderation.words import STATUS_NOW
from moderation.models import (
    NOTE_MAX_CHARS,
    Appeal,
    AppealStatus,
    Author,
    Cause,
    ContentReview,
    Decision,
    DecisionSource,
    DecisionUndo,
    ModeratorNote,
    QueueVisit,
    Report,
    ReviewQueue,
    ReviewStatus,
    SecondLook,
)
from moderation.review_queues import QueueEntry
from moderation.validation import decision_category, decision_reason
from moderation.jobs import enqueue_on_commit
from moderation.services.transitions import records_illegal_transitions, transition_review
from moderation.services.appeals import appeal_check_four_eyes, appeal_open_locked
from moderation.services.second_looks import (
    second_look_check_settler,
    second_look_close_locked,
    second_look_open_locked,
    second_look_reason,
    second_look_refuse_change,
)
from moderation.services.strikes import strike_undo_locked
from moderation.services.decide import decide_locked
from moderation.services.notifications import notification_cancel_locked
from moderation.services.pipeline import request_close_live_locked, reviews_claim_locked
from moderation.services.policy import policy_active
from moderation.services.qa import (
    decision_lease_started,
    qa_after_decision_locked,
    qa_item_release,
    qa_item_take_locked,
    qa_second_review_withdraw_locked,
)
from moderation.services.statements import statement_withdraw_locked
from moderation.selectors import visible_to
from moderation.services.routing import queue_check_access, queues_forbidden, review_queue_entry, review_queue_slugs


def _lock_checked(review_id, expected_version: int | None, moderator=None, now: datetime | None = None) -> ContentReview:
    """Lock the review; refuse if it changed since `expected_version` or another moderator holds it."""
    review = ContentReview.objects.select_for_update(of=("self",)).select_related("client", "content").get(pk=review_id)
    if expected_version is not None and review.version != expected_version:
        changes = list(
            review.transitions.order_by("-id")[: max(review.version - expected_version, 0)]
            .values_list("from_status", "to_status", "cause", "actor", "actor_id", "created_at")
        )
        raise StaleVersion(
            review_id=review_id,
            expected=expected_version,
            actual=review.version,
            changes=[ReviewChange(*change) for change in reversed(changes)],
        )
    now = now or timezone.now()
    holder = review.leased_to
    if holder is not None and holder != moderator and review.lease_expires_at and review.lease_expires_at > now:
        raise LeasedToOther(f"{holder} is reviewing this until {review.lease_expires_at:%H:%M:%S}",
                            holder=str(holder), until=review.lease_expires_at)
    # A review in a queue only some groups may take is theirs to decide too (row locked: its
    # queue cannot change meanwhile).
    queue_check_access(review, user=moderator)
    return review


def _require_decided(review: ContentReview) -> None:
    """Overrides and reprocessing apply to decided reviews. A moderator's choice of another (a bulk
    action over mixed reviews) is refused here, so it is not counted as an illegal transition,
    which means a bug."""
    if not review.is_final:
        raise NotApplicable("not decided yet")


def _required(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("a reason is required")
    return reason


def review_take_next(
    *, moderator, queue: str | None = None, skip: Collection = (), now: datetime | None = None
) -> ContentReview | None:
    """Lease to `moderator` the most urgent review nobody holds in review queue `queue` (every
    review queue when None), or give back the one they already hold there (one review at a
    time). `skip`: the ids of reviews the moderator passed over lately, not to be handed back.

    Urgency is the order key set when the review entered its queue (moderation.review_queues.queue_entry).
    SKIP LOCKED: two moderators asking at once each get a different review, never the same.
    An expired lease holds nothing, so an abandoned review returns to its review queue.
    """
    now = now or timezone.now()
    # Never the appeal of the moderator's own decision: they may not decide it (four eyes); never
    # a review of a queue they may not take (its groups'): the condition is in the locking
    # SELECT, which PostgreSQL checks again on the row it locks.
    forbidden = queues_forbidden(moderator)
    waiting = (_waiting(queue).exclude(_appeal_of_own_decision(moderator))
               .exclude(queue__in=forbidden).order_by("queue_order_at", "id"))
    if skip:
        waiting = waiting.exclude(pk__in=list(skip))
    with transaction.atomic():
        # Two indexed reads instead of one ORDER BY CASE, which would sort the whole review queue.
        # Between them, QA work (docs/qa.md): handed out like a review and shown like one, blind;
        # its review is returned as it is, neither leased nor changed.
        review = waiting.select_for_update(skip_locked=True, of=("self",)).filter(
            leased_to=moderator, lease_expires_at__gte=now).first()
        if review is None:
            item = qa_item_take_locked(moderator=moderator, queue=queue, forbidden=forbidden, now=now, skip=skip)
            if item is not None:
                return item.review
            review = (waiting.select_for_update(skip_locked=True, of=("self",))
                      .filter(Q(leased_to__isnull=True) | Q(lease_expires_at__lt=now)).first())
        if review is None:
            return None
        expires = now + timedelta(seconds=settings.MODERATOR_LEASE_S)
        ContentReview.objects.filter(pk=review.pk).update(leased_to=moderator, lease_expires_at=expires)
        review.leased_to, review.lease_expires_at = moderator, expires
    return review


def reviews_waiting_for_another(*, moderator, queue: str | None = None) -> int:
    """How many reviews of review queue `queue` (every one when None) "Review next" will never
    give `moderator`: appeals of their own decisions, which another moderator must decide (four
    eyes). Read when it found nothing, so that the moderator is told why rather than "empty".
    Reviews of queues they may not see are not counted (nor named)."""
    return visible_to(moderator, _waiting(queue).filter(_appeal_of_own_decision(moderator))).count()


def _waiting(queue: str | None):
    """The reviews waiting for a human in review queue `queue` (every one when None); erased
    content leaves nothing to judge."""
    if queue is not None and queue not in ReviewQueue.values and queue not in (known := review_queue_slugs()):
        raise ValueError(f"unknown queue {queue!r}; one of {', '.join(sorted(known))}")
    waiting = ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, content__erased_at__isnull=True)
    return waiting if queue is None else waiting.filter(queue=queue)


def _appeal_of_own_decision(moderator) -> Exists:
    return Exists(Appeal.objects.filter(review=OuterRef("pk"), status=AppealStatus.OPEN, decision__moderator=moderator))


def review_release(*, review_id, moderator) -> bool:
    """Give a leased review back to its review queue (QA work: `qa_item_release`)."""
    if qa_item_release(review_id=review_id, moderator=moderator):
        return True
    return bool(ContentReview.objects.filter(pk=review_id, leased_to=moderator).update(leased_to=None, lease_expires_at=None))


@records_illegal_transitions
def review_override(
    *,
    review_id,
    label: str,
    reason: str = "",
    moderator,
    expected_version: int | None = None,
    actor: str = Actor.ADMIN,
    category: str = "",
    note: str = "",
    reason_codes: Sequence[str] = (),
    share_reason: bool = False,
    expected_policy_id: int | None = None,
) -> Decision:
    """A moderator's decision (manual_review|approved|rejected -> approved|rejected).

    A rejection names a violation category of the active policy (an approval names none), and
    the decision names that version, as every decision names the one in force.
    With `expected_version` (what the moderator saw), a review that changed meanwhile is refused
    with StaleVersion instead of being overwritten blindly. On a review under appeal the decision
    resolves the appeal, and the moderator who made the appealed decision is refused
    (FourEyesRequired): checked under the row lock that also keeps a new appeal out meanwhile.
    An internal `note` is written in the decision's transaction: a refused decision leaves no
    note either. On a review sent for a second look only a senior moderator decides, and the
    decision closes the second look (moderation/services/second_looks.py), under the same lock.

    The reason (docs/workplace.md, "Canned reasons"): `reason_codes`, canned reasons the policy
    lists for the category (an approval's under "_approval"), and the free text `reason`, which
    reaches the client only with `share_reason`. A rejection needs one or the other; an approval
    needs neither unless the policy's `approval_needs_reason` says so. With `expected_policy_id`
    (a bulk job's frozen version) a decision under any other version is refused (NotApplicable).
    """
    # One read of the version in force: the category and the reasons are checked against it and
    # the decision names it.
    policy = policy_active()
    if expected_policy_id is not None and policy.pk != expected_policy_id:
        # A bulk job confirmed under another version (its categories and canned reasons): that
        # version's decision is no longer the one asked for (docs/workplace.md, "Bulk actions by query").
        raise NotApplicable(f"the policy changed since the job was confirmed: version {policy.version} is in force")
    category = decision_category(label, category, policy)
    reason, reason_codes = decision_reason(label, category, reason, reason_codes, policy)
    note = _note_text(note)
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        _require_decided(review)
        _refuse_erased(review, "decide")
        appeal = appeal_open_locked(review)
        if appeal is not None:
            appeal_check_four_eyes(appeal, moderator)
        second_look = second_look_open_locked(review)
        if second_look is not None:
            second_look_check_settler(second_look, moderator)
        # (Leaving manual_review ends its lease with its place in the review queue: review_queue_leave.)
        started = decision_lease_started(review, moderator)
        decision = decide_locked(
            review,
            cause=Cause.MANUAL_OVERRIDE,
            label=label,
            source=DecisionSource.MODERATOR,
            moderator=moderator,
            reason=reason,
            reason_codes=reason_codes,
            reason_shared=bool(share_reason and reason),
            category=category,
            policy=policy,
            actor=actor,
            actor_id=str(moderator) if moderator else "",
            transition_reason="; ".join([*reason_codes, *([reason] if reason else [])]),
            history_user=moderator,
            appeal=appeal,
        )
        # Moderator QA: how long it took, and whether another moderator reviews it again (docs/qa.md).
        qa_after_decision_locked(review, decision, moderator=moderator, policy=policy, started=started)
        if second_look is not None:
            second_look_close_locked(second_look, decision, moderator)
        if note:
            ModeratorNote.objects.create(review=review, author=moderator, text=note, decision=decision)
    return decision


def review_note_add(*, review_id, author, text: str) -> ModeratorNote:
    """Add an internal note to a review (any status; notes never change the review). Refused
    (QueueForbidden) to a moderator who may not see the review: a note is work on it."""
    text = _note_text(text)
    if not text:
        raise ReasonRequired("a note needs some text")
    review = ContentReview.objects.only("pk", "last_queue").get(pk=review_id)
    queue_check_access(review, user=author)
    return ModeratorNote.objects.create(review=review, author=author, text=text)


def _note_text(text: str) -> str:
    text = (text or "").strip()
    if len(text) > NOTE_MAX_CHARS:
        raise NoteTooLong(f"a note is at most {NOTE_MAX_CHARS} characters (this one has {len(text)})")
    return text


@records_illegal_transitions
def review_escalate(
    *, review_id, reason: str, moderator, expected_version: int | None = None, release: bool = True
) -> ContentReview:
    """Take a review out of the provider's hands: a human decides (-> manual_review).

    One step, one reason: the review joins the escalations queue and, unless `release`, is
    leased to the moderator who escalated it, who goes on to decide it (docs/workplace.md,
    "The decide panel"). A bulk escalation releases what it escalates.
    A pending review first moves `pending -> processing` as a worker's job moves it
    (`reviews_claim_locked`; two logged transitions). The live operation is closed as failed, so
    nothing retries it and a late result for it is `already_final`. Erased content is refused
    (ContentErased): nothing is left to judge.
    """
    reason = _required(reason)
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        _refuse_erased(review, "escalate")
        if review.status not in (ReviewStatus.PENDING, ReviewStatus.PROCESSING):
            # Likewise (_require_decided): a bulk escalation over decided reviews.
            raise NotApplicable(f"already {STATUS_NOW[review.status]}")
        if review.status == ReviewStatus.PENDING:
            reviews_claim_locked([review], worker_id=str(moderator), job_id="", actor=Actor.ADMIN)
        if review.status == ReviewStatus.PROCESSING:
            request_close_live_locked(review, why=f"escalated by {moderator}: {reason}")
        decide_locked(
            review,
            cause=Cause.MANUAL_ESCALATION,
            label=ReviewStatus.MANUAL_REVIEW,
            source=DecisionSource.MODERATOR,
            moderator=moderator,
            reason=reason,
            actor=Actor.ADMIN,
            actor_id=str(moderator),
            transition_reason=reason,
            history_user=moderator,
        )
        if not release and moderator is not None:
            _lease(review, moderator)
    return review


def review_second_look(*, review_id, reason: str, moderator, expected_version: int | None = None) -> SecondLook:
    """Send a decided (approved or rejected) review to the escalations queue for a senior
    moderator's second look, with a reason (docs/workplace.md, "A second look at a decided
    review"). The review keeps its status and decision, and the client is told nothing.

    At most one second look per review is open: the review's row lock serialises requests, so of
    concurrent ones the first opens it and the others are refused (SecondLookOpen); the partial
    unique constraint holds even without the lock. Refused for a review that changed since
    `expected_version`, that another moderator holds, of a queue the moderator may not see,
    whose content was erased, or that is not decided (NotApplicable)."""
    reason = second_look_reason(reason)
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        _refuse_erased(review, "look at again")
        if review.status not in (ReviewStatus.APPROVED, ReviewStatus.REJECTED) or review.decision_id is None:
            raise NotApplicable(f"it is {STATUS_NOW[review.status]}, not decided: a second look is for a decision")
        if (open_look := second_look_open_locked(review)) is not None:
            why = f"{open_look.requested_by} already asked for a second look at this decision"
            raise SecondLookOpen(f"review {review.pk}: {why}", reason=why)
        return SecondLook.objects.create(review=review, decision_id=review.decision_id, requested_by=moderator,
                                         reason=reason)


def _lease(review: ContentReview, moderator) -> None:
    """Lease `review` (locked, in manual_review) to `moderator` for MODERATOR_LEASE_S."""
    expires = timezone.now() + timedelta(seconds=settings.MODERATOR_LEASE_S)
    ContentReview.objects.filter(pk=review.pk).update(leased_to=moderator, lease_expires_at=expires)
    review.leased_to, review.lease_expires_at = moderator, expires


def _refuse_erased(review: ContentReview, what: str) -> None:
    """Erased content leaves nothing to judge (docs/design.md, 16): refused under the row lock."""
    if review.content.erased_at is not None:
        why = f"its content was erased; nothing is left to {what}"
        raise ContentErased(f"review {review.pk}: {why}", reason=why)


@records_illegal_transitions
def review_reprocess(
    *,
    review_id,
    actor: str,
    actor_id: str,
    reason: str = "",
    user=None,
    expected_version: int | None = None,
) -> ContentReview:
    """Send a decided review through the provider again (-> pending; a new operation, new key).

    A review under appeal is refused (AppealOpen): a moderator other than the appealed
    decision's must decide it, and the provider's new answer would decide it instead.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, user)
        _require_decided(review)
        _refuse_erased(review, "reprocess")
        second_look_refuse_change(review, "reprocessed")
        if appeal_open_locked(review) is not None:
            raise AppealOpen(f"review {review.pk} is under appeal: a moderator decides it",
                             reason="it is under appeal: a moderator decides it")
        review.last_enqueued_at = timezone.now()
        transition_review(  # (out of manual_review, its lease ends with its queue: review_queue_leave)
            review,
            Cause.REPROCESS,
            actor=actor,
            actor_id=actor_id,
            reason=reason,
            history_user=user,
            update_fields=["last_enqueued_at"],
        )
        enqueue_on_commit("moderation.tasks.moderate_review", for_review=review.pk, review_id=review.pk)
    return review


@records_illegal_transitions
def review_undo(*, review_id, decision_id: int, moderator, expected_version: int | None = None) -> ContentReview:
    """Take back `moderator`'s decision `decision_id` of a review they decided from manual_review:
    the review is back in manual_review, leased to them, with the decision in force before it
    (docs/workplace.md, "Undo").

    Allowed while the decision is the one in force (`expected_version`: the version it left;
    anything since refuses with StaleVersion), nobody else holds the review, and nothing of the
    decision has left: its notification is cancelled, its statement of reasons withdrawn and its
    strike ended under their row locks, in this transaction, or the undo is refused with
    NotUndoable saying why ("the client was already notified at 14:02 UTC"). A decision that
    resolved an appeal or reports is refused: their owners and reporters are told, and the
    reporters' accuracy counted. The decision row stays, as every decision does (invariant 9);
    the undo is its own transition, in the timeline and the history.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = _lock_checked(review_id, expected_version, moderator)
        decision = review.decision
        if decision is None or decision.pk != decision_id:
            raise NotUndoable("it is no longer the decision in force")
        if decision.source != DecisionSource.MODERATOR or decision.moderator_id != getattr(moderator, "pk", None):
            raise NotUndoable("only the moderator who made a decision may undo it")
        second_look_refuse_change(review, "undone")
        before, entered = _state_before(review, decision)
        had = review.last_queue  # where it waited when decided: it goes back there (`_entry_back`)
        if Appeal.objects.filter(resolution=decision).exists():
            raise NotUndoable("it resolved an appeal, whose owner is told: decide again instead")
        resolved = Report.objects.filter(resolved_by=decision).count()
        if resolved:
            raise NotUndoable(f"it resolved {resolved} report{'s' if resolved > 1 else ''}, whose reporters are told: "
                              "decide again instead")
        # Locks after the review's, in the decide path's order: the author, then the rows of what left.
        author = strike_undo_locked(review, decision)
        statement_withdraw_locked(decision)
        notification_cancel_locked(decision)
        qa_second_review_withdraw_locked(decision)
        DecisionUndo.objects.create(decision=decision, moderator=moderator)  # no figure counts it now
        review.decision_id, review.completed_at, review.pile_on = before.decision_id, before.completed_at, before.pile_on
        transition_review(
            review, Cause.UNDO, actor=Actor.ADMIN, actor_id=str(moderator),
            reason=f"undid the decision {decision.label}{f' ({decision.category})' if decision.category else ''}",
            history_user=moderator, update_fields=["decision", "completed_at", "pile_on"],
            entry=_entry_back(review, entered, had, author),
        )
        _lease(review, moderator)
    return review


def _state_before(review: ContentReview, decision: Decision):
    """The review as it was before `decision` (its history row) and the transition that had sent
    it to manual_review; NotUndoable for a decision not made from manual_review."""
    after, before = (list(review.history.order_by("-history_id")[:2]) + [None, None])[:2]
    if after is None or before is None or after.decision_id != decision.pk:
        raise NotUndoable("its record is not the review's latest change")
    if before.status != ReviewStatus.MANUAL_REVIEW:
        raise NotUndoable(f"it was made on a review that was {before.get_status_display().lower()}, "
                          "not waiting for a human: decide again instead")
    entered = (review.transitions.filter(to_status=ReviewStatus.MANUAL_REVIEW).exclude(cause=Cause.UNDO)
               .order_by("-id").first())
    return before, entered


def _entry_back(review: ContentReview, entered, had: str, author: Author | None) -> QueueEntry:
    """The place the undone review goes back to, in the queue it had (`had`) and in its place there:
    the one computation of its entry (moderation.services.routing.review_queue_entry), for the
    cause that sent it there, as of when it did (an undo is no reason to wait more or less), with
    the decision in force before (`review.decision`, set back) and its author's points without
    the undone strike (`author`, locked by the undo, else read). A review of a group-only queue
    goes back to that queue, not to one the rules give now, where others would see it; one that
    kept no record of its queue (decided before `last_queue` was) goes where that entry routes
    it. No user report counts in it: a decision that resolved reports is not undone."""
    cause = Cause(entered.cause) if entered is not None else Cause.MANUAL_ESCALATION
    entry = review_queue_entry(review, policy_active(), cause=cause, author=author,
                               now=entered.created_at if entered is not None else timezone.now())
    # Its deadline is the one it had (docs/design.md, "Deadlines"): the visit the undo reopens keeps it.
    due = QueueVisit.objects.filter(review_id=review.pk).order_by("-id").values_list("due_at", flat=True).first()
    entry = replace(entry, due_at=due) if due is not None else entry
    return replace(entry, queue=had) if had else entry
