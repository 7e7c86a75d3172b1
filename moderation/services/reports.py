"""User reports (docs/design.md, "Reports, appeals and statements of reasons").

A client passes on its users' reports of a review. One report per reporter and review, however
concurrent; when the reporters of an approved review's decision reach the active policy's
`report_threshold`, the review goes to a human once (cause user_reports), announced to the
client by a `review.reported` notification.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from audit import context
from audit.models import Actor
from moderation.models import (
    ERASED,
    Cause,
    ContentReview,
    NotificationKind,
    Report,
    ReportEscalation,
    ReviewStatus,
)
from moderation.services.transitions import records_illegal_transitions, transition_review
from moderation.services.outbox import outbox_write, reported_body
from moderation.services.policy import policy_active


@dataclass(frozen=True)
class ReportFiled:
    report: Report
    created: bool
    report_count: int  # distinct reporters of the review, this one included


@records_illegal_transitions
def report_file(*, review_id, reporter_id: str, reason: str, detail: str = "") -> ReportFiled:
    """Store `reporter_id`'s report of a review, or return the one they already made.

    The review's row lock serialises every report of one review: the lookup, the count and the
    status check all see the reports committed before, so one reporter's concurrent reports
    make one row and the threshold moves the review once (after which it is no longer
    approved). The unique (review, reporter) constraint holds even without the lock.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        review = (
            ContentReview.objects.select_for_update(of=("self",))
            .select_related("client", "content", "decision")
            .get(pk=review_id)
        )
        report = Report.objects.filter(review=review, reporter_id=reporter_id).first()
        created = report is None
        erased = review.content.erased_at is not None
        if created:
            # A report of erased content is counted, but its detail (which may quote what was
            # erased) is not kept, and it sends nothing to a human: there is nothing to judge.
            report = Report.objects.create(
                review=review, decision=review.decision, reporter_id=reporter_id, reason=reason,
                detail=ERASED if erased and detail else detail,
            )
        count = Report.objects.filter(review=review).count()
        if created and not erased:
            _escalate_if_due(review, count)
    return ReportFiled(report=report, created=created, report_count=count)


def _escalate_if_due(review: ContentReview, report_count: int) -> ReportEscalation | None:
    """Move an approved review whose decision's reporters reach the threshold to a human.

    Call holding the review's row lock. Only the reporters of the decision in force count: a
    moderator who confirms an approval starts the count again, and reports made while no
    decision was in force (a review still pending) count toward none. The threshold is
    checked when a report arrives, the only moment the count can reach it.
    """
    if review.status != ReviewStatus.APPROVED:
        return None
    policy = policy_active()
    reporters = Report.objects.filter(review=review, decision_id=review.decision_id).count()
    if reporters < policy.report_threshold:
        return None
    transition = transition_review(
        review,
        Cause.USER_REPORTS,
        actor=Actor.SYSTEM,
        actor_id="report-threshold",
        report_count=reporters,  # the reports queue orders by it
        reason=f"{reporters} users reported the decision (policy v{policy.version} threshold {policy.report_threshold})",
    )
    escalation = ReportEscalation.objects.create(
        review=review, decision=review.decision, transition=transition, report_count=reporters,
        threshold=policy.report_threshold,
    )
    outbox_write(review, kind=NotificationKind.REVIEW_REPORTED, body=reported_body(review, report_count),
                 escalation=escalation)
    return escalation
