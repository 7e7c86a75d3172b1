"""User reports (docs/design.md, "Reports, appeals and statements of reasons").

A client passes on its users' reports of a review. One report per reporter and review, however
concurrent; when the reporters of an approved review's decision reach the active policy's
`report_threshold`, the review goes to a human once (cause user_reports), announced to the
client by a `review.reported` notification.

A `dsa_notice` or `trusted_flagger` report (DSA Art. 16 and 22) sends the review to a human
whatever the threshold: an approved one at once (cause notice), one still pending or processing
when its result lands (the review keeps the notice, `notice_kind`, which finalize reads under the
same lock). A notice's move is its transition row (cause notice, actor_id the kind): it is no
threshold crossing, so it writes no ReportEscalation and no `review.reported`, which the contract
sends for the threshold only.

Each report carries its reporter's weight as it arrives (moderation/services/reporters.py: 1 for
a reporter not yet rated, 0.5 to 2.0 by accuracy, 0 muted), and the threshold compares the sum of
the weights of the decision's reporters with `report_threshold`. A muted reporter's report is
stored and counted (`report_count`) all the same. Under the same lock a report marks the review a
pile-on (`pile_on_mark_locked`) when the open reports came in a burst, or mostly from reporters of
low accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.models import (
    ERASED,
    NOTICE_KINDS,
    Cause,
    ContentReview,
    ModerationPolicy,
    NotificationKind,
    PileOn,
    Report,
    ReportEscalation,
    ReportKind,
    ReviewStatus,
)
from moderation.services.transitions import records_illegal_transitions, transition_review
from moderation.services.outbox import outbox_row, outbox_write, reported_body
from moderation.services.policy import policy_active
from moderation.services.report_outcomes import report_resolve_on_filing_locked
from moderation.services.reporters import NEUTRAL, reporter_weight_locked


@dataclass(frozen=True)
class ReportFiled:
    report: Report
    created: bool
    report_count: int  # distinct reporters of the review, this one included


@records_illegal_transitions
def report_file(*, review_id, reporter_id: str, reason: str, detail: str = "",
                kind: str = ReportKind.USER) -> ReportFiled:
    """Store `reporter_id`'s report of a review, or return the one they already made.

    The review's row lock serialises every report of one review: the lookup, the count and the
    status check all see the reports committed before, so one reporter's concurrent reports
    make one row and the threshold moves the review once (after which it is no longer
    approved). The unique (review, reporter) constraint holds even without the lock. The same
    lock orders a notice against a result, a decision or a reprocess: whichever comes second
    sees what the first did.
    """
    with context.bind(review_id=review_id), transaction.atomic():
        # Not the decision in the same query: a lock that waited for a decision's commit gets
        # the review's new row but the join's old one (no decision), so it is read after the lock.
        review = (
            ContentReview.objects.select_for_update(of=("self",))
            .select_related("client", "content")
            .get(pk=review_id)
        )
        report = Report.objects.filter(review=review, reporter_id=reporter_id).first()
        created = report is None
        # Read after the lock too, for the same reason: an erasure the lock waited for is in the
        # review's row, not in the joined content's.
        review.content.refresh_from_db(fields=["erased_at"])
        erased = review.content.erased_at is not None
        if created:
            # After the review's lock, as the locking rule of moderation/services/reporters.py asks.
            weight = reporter_weight_locked(client_id=review.client_id, reporter_id=reporter_id)
            # A report of erased content is counted, but its detail (which may quote what was
            # erased) is not kept, and it sends nothing to a human: there is nothing to judge.
            report = Report.objects.create(
                review=review, decision_id=review.decision_id, reporter_id=reporter_id, reason=reason, kind=kind,
                detail=ERASED if erased and detail else detail, weight=weight,
            )
        # One scan for both: the count the answer gives, and the weights a notice's priority sums
        # (one report per reporter, so the sum of the weights of its distinct reporters).
        totals = Report.objects.filter(review=review).aggregate(count=Count("pk"), weight=Sum("weight"))
        count = totals["count"]
        # A notice on a rejected review, or any report of erased content: no decision will come
        # to judge it, so it is resolved at once (moderation/services/report_outcomes.py).
        if created:
            report_resolve_on_filing_locked(review, report)
        if created and not erased:
            policy = policy_active()
            pile_on_mark_locked(review, policy)
            if kind in NOTICE_KINDS:
                _notice_locked(review, ReportKind(kind), count, totals["weight"] or Decimal(0))
            else:
                _escalate_if_due(review, count, policy)
    return ReportFiled(report=report, created=created, report_count=count)


def pile_on_mark_locked(review: ContentReview, policy: ModerationPolicy) -> str:
    """Mark the review a pile-on if its open reports (those no decision resolved yet, this one
    included) look like one, and return the mark (docs/design.md, "Reporters").

    Call holding the review's row lock, after storing the report. `burst`: at least the policy's
    `pile_on_reports` of them arrived within its last `pile_on_minutes`. Else `low_accuracy`: at
    least two of them, and at least half weigh under 1 (reporters rarely right, the muted
    included). A mark stays until a decision that resolves the reports (decide_locked) clears
    it: later reports do not change it.
    """
    if review.pile_on:
        return review.pile_on
    since = timezone.now() - timedelta(minutes=policy.pile_on_minutes)
    counts = Report.objects.filter(review=review, outcome="").aggregate(
        open=Count("pk"), recent=Count("pk", filter=Q(created_at__gte=since)),
        light=Count("pk", filter=Q(weight__lt=NEUTRAL)),
    )
    if counts["recent"] >= policy.pile_on_reports:
        mark = PileOn.BURST
    elif counts["open"] >= 2 and 2 * counts["light"] >= counts["open"]:
        mark = PileOn.LOW_ACCURACY
    else:
        return ""
    review.pile_on = mark
    ContentReview.objects.filter(pk=review.pk).update(pile_on=mark)
    return mark


def _escalate_if_due(review: ContentReview, report_count: int, policy: ModerationPolicy) -> ReportEscalation | None:
    """Move an approved review whose decision's reporters weigh up to the threshold to a human.

    Call holding the review's row lock. Only the reporters of the decision in force count, each
    by the weight it had when its report arrived (the contract: the sum of the weights of
    distinct reporters, compared with `report_threshold`): a moderator who confirms an approval
    starts the count again, and reports made while no decision was in force (a review still
    pending) count toward none. The threshold is checked when a report arrives, the only moment
    the sum can reach it. The escalation keeps how many reporters that was, and the reason says
    what they weighed.
    """
    if review.status != ReviewStatus.APPROVED:
        return None
    counted = Report.objects.filter(review=review, decision_id=review.decision_id).aggregate(
        reporters=Count("pk"), weight=Sum("weight"))
    reporters, weight = counted["reporters"], counted["weight"] or Decimal(0)
    if weight < policy.report_threshold:
        return None
    transition = transition_review(
        review,
        Cause.USER_REPORTS,
        actor=Actor.SYSTEM,
        actor_id="report-threshold",
        report_count=float(weight),  # the reports queue orders by it
        reason=f"{reporters} users reported the decision, weighing {weight} "
               f"(policy v{policy.version} threshold {policy.report_threshold})",
    )
    escalation = ReportEscalation.objects.create(
        review=review, decision_id=review.decision_id, transition=transition, report_count=reporters,
        threshold=policy.report_threshold,
    )
    outbox_write([outbox_row(review, kind=NotificationKind.REVIEW_REPORTED, body=reported_body(review, report_count),
                             escalation=escalation)])
    return escalation


def _notice_locked(review: ContentReview, kind: ReportKind, report_count: int, weight: Decimal) -> None:
    """Keep the strongest notice on the review, and send an approved review to a human at once.

    Call holding the review's row lock. A pending or processing review keeps the notice for its
    result (finalize turns any result into manual_review); one already with a human, or
    rejected, is not moved. Every state keeps it: a noticed review is never approved
    automatically, after a reprocess either.
    """
    if NOTICE_KINDS.index(kind) > (NOTICE_KINDS.index(review.notice_kind) if review.notice_kind else -1):
        review.notice_kind = kind
    if review.status != ReviewStatus.APPROVED:
        ContentReview.objects.filter(pk=review.pk).update(notice_kind=review.notice_kind)
        return
    transition_review(
        review,
        Cause.NOTICE,
        actor=Actor.SYSTEM,
        actor_id=kind,
        report_count=float(weight),  # the queue's priority counts the reporters by their weight
        reason=f"{kind.label}: a human decides whatever the report threshold",
        update_fields=("notice_kind",),
    )
