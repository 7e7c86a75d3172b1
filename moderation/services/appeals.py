"""Appeals (docs/design.md, "Reports, appeals and statements of reasons").

The owner of rejected content appeals the decision: at most one appeal per decision, and the
review goes back to a human (rejected -> manual_review, cause appeal). A moderator resolves it by
deciding the review (`review_override`): rejected again upholds it, approved overturns it. The
moderator who made the appealed decision may not decide its appeal (four eyes).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.errors import AppealExists, AppealWindowClosed, FourEyesRequired, NotAppealable
from moderation.models import Appeal, AppealStatus, Cause, ContentReview, Decision, ReviewStatus, appeal_outcome
from moderation.transparency.notices import appealable_until
from moderation.services.transitions import records_illegal_transitions, transition_review


@records_illegal_transitions
def appeal_file(*, review_id, appellant_id: str, statement: str) -> Appeal:
    """File an appeal against the review's current decision, and send the review to a human.

    The review's row lock serialises appeals of one review: of concurrent ones the first
    creates the appeal and moves the review, the others then find it (AppealExists). The
    unique constraint on the appealed decision holds even without the lock. The appeal window
    (the decision's policy's `appeal_window_days`) is checked under the same lock.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = ContentReview.objects.select_for_update(of=("self",)).select_related("content").get(pk=review_id)
        if review.decision_id and Appeal.objects.filter(
            Q(decision_id=review.decision_id) | Q(resolution_id=review.decision_id)
        ).exists():
            # The decision was appealed already, or it is an appeal's own outcome.
            raise AppealExists(f"the decision in force on review {review.pk} was already appealed")
        if review.status != ReviewStatus.REJECTED:
            raise NotAppealable(f"review {review.pk} is {review.status}: only a rejection can be appealed")
        if review.content.erased_at is not None:
            # No review queue offers erased content: the appeal would wait for ever (docs/design.md, 16).
            raise NotAppealable(f"the content of review {review.pk} was erased: there is nothing left to judge")
        decision = Decision.objects.select_related("policy").get(pk=review.decision_id)
        until = appealable_until(decision.created_at, decision.policy)
        if timezone.now() > until:
            raise AppealWindowClosed(f"the decision on review {review.pk} could be appealed until {until.isoformat()}")
        appeal = Appeal.objects.create(
            review=review, decision_id=review.decision_id, appellant_id=appellant_id, statement=statement
        )
        transition_review(review, Cause.APPEAL, actor=Actor.SYSTEM, actor_id="appeal", reason=f"appeal {appeal.pk} filed")
    return appeal


def appeal_open_locked(review: ContentReview) -> Appeal | None:
    """The review's open appeal, if any; call holding the review's row lock."""
    return Appeal.objects.select_related("decision").filter(review=review, status=AppealStatus.OPEN).first()


def four_eyes_check(*, appealed_by, moderator, what: str, appeal_id) -> None:
    """Four eyes on an appeal (docs/design.md, "Reports, appeals"; "Authors"): refuse `moderator`
    when they are the one (`appealed_by`, a user's pk or None for the platform) who made what is
    appealed, `what` in words ("made the appealed decision", "took the appealed action"). The one
    rule for content and account appeals."""
    if appealed_by is not None and moderator is not None and appealed_by == moderator.pk:
        why = f"{moderator} {what}: another moderator must decide"
        raise FourEyesRequired(f"{why} appeal {appeal_id}", reason=f"{why} its appeal")


def appeal_check_four_eyes(appeal: Appeal, moderator) -> None:
    """Refuse the moderator who made the appealed decision."""
    four_eyes_check(appealed_by=appeal.decision.moderator_id, moderator=moderator,
                    what="made the appealed decision", appeal_id=appeal.pk)


def appeal_resolve_locked(appeal: Appeal, decision: Decision) -> None:
    """Close the appeal with the decision that resolves it; in that decision's transaction."""
    appeal.status = appeal_outcome(decision.label)
    appeal.resolution = decision
    appeal.resolved_at = timezone.now()
    appeal.save(update_fields=["status", "resolution", "resolved_at"])
