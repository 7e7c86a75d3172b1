"""Which human review queue a review waits in, and how urgently: decided once, when it enters
(docs/workplace.md). Pure functions, no database access. (The job queue is moderation/jobs.py.)"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from moderation.models import Cause, ModerationPolicy, ReportKind, ReviewQueue

# Which queue a review waits in, by the cause that sent it to manual_review.
QUEUE_FOR_CAUSE = {
    Cause.PROVIDER_RESULT: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_CALLBACK: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_FAILED: ReviewQueue.PROVIDER_FAILURES,
    Cause.MANUAL_ESCALATION: ReviewQueue.ESCALATIONS,
    Cause.USER_REPORTS: ReviewQueue.REPORTS,
    Cause.APPEAL: ReviewQueue.APPEALS,
    Cause.NOTICE: ReviewQueue.NOTICES,
}


_MAX_HOURS_AHEAD = 24 * 365 * 10
# A trusted flagger's review goes ahead of every other notice (DSA Art. 22): its order key moves
# earlier by more than any priority can move one (the cap above), so it comes before every DSA
# notice queued in the last ten years, whatever their priorities.
TRUSTED_FLAGGER_LEAD = timedelta(hours=_MAX_HOURS_AHEAD + 1)


@dataclass(frozen=True)
class QueueEntry:
    queue: str
    priority: float
    queued_at: datetime
    # The order key: the entry time moved earlier by the priority, at the policy's exchange rate
    # of points per hour waited. Ordering by it serves the most urgent first, and a review that
    # has waited long enough overtakes newer, more urgent ones (no starvation).
    order_at: datetime


def priority(policy: ModerationPolicy, *, category_scores: dict, report_count: float = 0, appealed: bool = False,
             author_points: int = 0) -> float:
    """Priority points of a review entering a review queue: the model's top category score, the
    distinct users who reported it, each counted by its weight (docs/design.md, "Reporters": 1
    for a reporter not yet rated, 0 muted), whether its owner appealed, and its author's active
    strike points (a repeat offender's content ranks higher in every queue), weighted by the
    policy.

    An appeal's priority leaves the model's score out: the score is the appealed decision's (a
    moderator's rejection has none), so counting it would rank appeals of confident model
    rejections far ahead of appeals of human decisions. An appeal ranks by its own weight, its
    author's strike points and, through the order key, how long it has waited."""
    top = 0.0 if appealed else max((float(v) for v in (category_scores or {}).values()), default=0.0)
    return round(
        policy.priority_score_weight * top
        + policy.priority_report_weight * max(report_count, 0)
        + policy.priority_appeal_weight * (1 if appealed else 0)
        + policy.priority_strike_weight * max(author_points, 0),
        4,
    )


# Causes whose review waits in "Restricted authors" when its author was restricted at submission.
PROVIDER_CAUSES = (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK, Cause.PROVIDER_FAILED)


def queue_entry(policy: ModerationPolicy, *, cause: Cause, category_scores: dict, report_count: float = 0,
                now: datetime, author_restricted: bool = False, author_points: int = 0,
                notice_kind: str = "", media: bool = False) -> QueueEntry:
    """Where and how urgently a review waits when `cause` sends it to manual_review. A review with
    a notice (`notice_kind`) that a notice or its provider result sends waits in "DSA notices and
    trusted flaggers", a trusted flagger's ahead of every DSA notice; other content submitted
    while its author was suspended or banned waits in "Restricted authors"; an image or audio
    (`media`) its job sent to a human waits in "Images", not with the model's doubts."""
    noticed = bool(notice_kind) and (cause == Cause.NOTICE or cause in PROVIDER_CAUSES)
    if noticed:
        queue = ReviewQueue.NOTICES
    elif author_restricted and cause in PROVIDER_CAUSES:
        queue = ReviewQueue.RESTRICTED_AUTHORS
    elif media and cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK):
        queue = ReviewQueue.IMAGES
    else:
        queue = QUEUE_FOR_CAUSE.get(cause, ReviewQueue.LOW_CONFIDENCE)
    points = priority(policy, category_scores=category_scores, report_count=report_count,
                      appealed=cause == Cause.APPEAL, author_points=author_points)
    # Capped at ten years ahead: any priority beyond that is "first", and the date stays valid.
    ahead = timedelta(hours=min(points / policy.priority_age_points_per_hour, _MAX_HOURS_AHEAD))
    if noticed and notice_kind == ReportKind.TRUSTED_FLAGGER:
        ahead += TRUSTED_FLAGGER_LEAD
    return QueueEntry(queue=queue, priority=points, queued_at=now, order_at=now - ahead)
