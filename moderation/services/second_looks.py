"""A second look at a decided review (docs/workplace.md, "A second look at a decided review").

A moderator or team lead asks for it with a reason (`review_second_look`, in
moderation/services/moderator.py beside the other actions on a review). The review keeps its
status and its decision, and nothing is sent to the client. A senior moderator settles it:

- `second_look_confirm`: the decision stands; the second look is closed, nothing else changes and
  nobody is told;
- or the normal override path (`review_override`), which decides the review again (one decision,
  one notification to the client, the transition log and the history as for every override) and
  closes the second look with that decision, in its transaction (`second_look_close_locked`).

Until then nobody else changes the decision: an override by someone who may not settle a second
look, an undo and a reprocess are refused (`second_look_refuse_change`). Everything here runs
under the review's row lock, which serialises it with the request and every decision of the
review: two seniors settling at once, one wins and the other is told it is settled already.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit import context
from moderation.errors import NotApplicable, SecondLookOpen, SecondLookRefused
from moderation.models import SECOND_LOOK_REASON_MAX, ContentReview, Decision, SecondLook, SecondLookStatus
from moderation.services.routing import queue_check_access
from moderation.validation import required_reason

SETTLE_PERMISSION = "moderation.settle_second_look"


def second_look_reason(reason: str) -> str:
    """The reason given, stripped: required, and at most SECOND_LOOK_REASON_MAX characters."""
    return required_reason(reason, limit=SECOND_LOOK_REASON_MAX, what="a second look needs a reason")


def second_look_open_locked(review: ContentReview) -> SecondLook | None:
    """The review's open second look, if any; call holding the review's row lock."""
    return (SecondLook.objects.select_related("requested_by", "decision__moderator")
            .filter(review=review, status=SecondLookStatus.OPEN).first())


def second_look_check_settler(look: SecondLook, moderator) -> None:
    """Refuse who may not settle `look`: without the senior permission, the moderator who asked
    for it, or the one who made the decision it looks at (another pair of eyes decides)."""
    if moderator is None or not moderator.has_perm(SETTLE_PERMISSION):
        why = (f"{look.requested_by} asked a senior moderator for a second look at this decision: "
               "it stands until a senior moderator changes or confirms it")
        raise SecondLookOpen(f"review {look.review_id}: {why}", reason=why)
    if look.requested_by_id == moderator.pk:
        why = "you asked for this second look: another senior moderator settles it"
        raise SecondLookRefused(f"review {look.review_id}: {why}", reason=why)
    if look.decision.moderator_id is not None and look.decision.moderator_id == moderator.pk:
        why = "you made the decision sent for a second look: another senior moderator settles it"
        raise SecondLookRefused(f"review {look.review_id}: {why}", reason=why)


def second_look_refuse_change(review: ContentReview, what: str) -> None:
    """Refuse `what` (an undo, a reprocess) while a second look is open; holding the row lock."""
    look = second_look_open_locked(review)
    if look is not None:
        why = (f"a senior moderator is taking a second look at this decision ({look.requested_by} asked): "
               f"it cannot be {what} until they change or confirm it")
        raise SecondLookOpen(f"review {review.pk}: {why}", reason=why)


def second_look_close_locked(look: SecondLook, decision: Decision, moderator) -> None:
    """Close `look` with the senior's new `decision`, in that decision's transaction."""
    look.status, look.resolution, look.resolved_by = SecondLookStatus.CHANGED, decision, moderator
    look.resolved_at = decision.created_at or timezone.now()
    look.save(update_fields=["status", "resolution", "resolved_by", "resolved_at"])


def second_look_confirm(*, review_id, moderator, reason: str) -> SecondLook:
    """A senior moderator confirms the decision sent for a second look: the second look is
    closed and nothing else changes (no decision, no transition, no notification). Refused
    (NotApplicable) when none is open, which is what the slower of two seniors settling at once
    is told."""
    reason = second_look_reason(reason)
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update(of=("self",)).get(pk=review_id)
        queue_check_access(review, user=moderator)
        look = second_look_open_locked(review)
        if look is None:
            raise NotApplicable("no second look is open: another senior moderator settled it, or nobody asked for one")
        second_look_check_settler(look, moderator)
        look.status, look.resolved_by, look.resolution_reason = SecondLookStatus.CONFIRMED, moderator, reason
        look.resolved_at = timezone.now()
        look.save(update_fields=["status", "resolved_by", "resolution_reason", "resolved_at"])
    return look
