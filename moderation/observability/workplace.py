"""How the humans and the model are doing: the review queues, the moderators' throughput, how often a
moderator reverses the model, and how long reviews wait. The admin index and /metrics read
these; each is one indexed query, so neither slows down as the tables grow. Also what a page of
reviews' reports say (`report_summaries`), for the queue list and the review page."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Count, F, Min, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from moderation.models import (
    ContentReview,
    Decision,
    DecisionSource,
    QueueVisit,
    Report,
    ReviewQueue,
    ReviewStatus,
    standing_decision_sql,
)
from moderation.selectors import decision_times, of_queues
from moderation.services.routing import QueueInfo, review_queues

DEFINITIVE = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


@dataclass(frozen=True)
class ReviewQueueFigures:
    queue: str
    label: str
    depth: int
    leased: int
    oldest_queued_at: datetime | None
    oldest_age_s: float | None


def review_queue_figures(now: datetime | None = None, *, queues: list[QueueInfo] | None = None) -> list[ReviewQueueFigures]:
    """Per review queue (`queues`, built-in and custom: every one when None): reviews waiting, how
    many are leased to a moderator, the oldest's age. Counted from review_queue_order_idx alone
    (its included columns), whatever the number of queues."""
    now = now or timezone.now()
    queues = review_queues() if queues is None else queues
    rows = {row["queue"]: row for row in review_queue_counts(now)}
    figures = []
    for queue in queues:
        row = rows.get(queue.slug, {})
        oldest = row.get("oldest")
        figures.append(ReviewQueueFigures(queue.slug, queue.label, row.get("depth", 0), row.get("leased", 0), oldest,
                                          (now - oldest).total_seconds() if oldest else None))
    return figures


def review_queue_counts(now: datetime):
    """Depth, leases and oldest entry of every review queue with reviews waiting: one pass over
    review_queue_order_idx (every column it reads is in the index), grouped in its order."""
    return (ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW).values("queue").order_by()
            .annotate(depth=Count("pk"), leased=Count("pk", filter=Q(lease_expires_at__gt=now)), oldest=Min("queued_at")))


def decisions_per_moderator(*, days: int = 7, now: datetime | None = None, hidden_queues=()) -> list[dict]:
    """Approvals and rejections by each moderator on each of the last `days` days (UTC), leaving
    out those of reviews of `hidden_queues` (moderation.selectors.of_queues)."""
    since = (now or timezone.now()) - timedelta(days=days)
    decisions = Decision.objects.standing().filter(source=DecisionSource.MODERATOR, created_at__gte=since,
                                                   label__in=DEFINITIVE)
    hidden = of_queues(hidden_queues, through="review")
    return list(
        (decisions if hidden is None else decisions.exclude(hidden))
        .annotate(day=TruncDate("created_at")).values("day", "moderator__username").order_by("-day", "moderator__username")
        .annotate(decisions=Count("pk"))
    )


def moderator_decision_totals() -> list[tuple[str, str, int]]:
    """(moderator, label, decisions) since the beginning: a counter for /metrics."""
    return list(
        Decision.objects.standing().filter(source=DecisionSource.MODERATOR, label__in=DEFINITIVE)
        .values_list("moderator__username", "label").order_by().annotate(n=Count("pk"))
    )


# A moderator's approve/reject and the model decision it followed (the review's previous
# decision, when that was the provider's approve/reject). The category is the one the human
# decision is about: the moderator's violation category for a rejection, else the model's top
# category. Driven by the partial index on moderators' decisions.
_OVERTURNS = """
SELECT coalesce(nullif(h.category, ''), m.top_category, '') AS category, p.version,
       count(*) AS reviewed, count(*) FILTER (WHERE h.label <> m.label) AS overturned
FROM moderation_decision h{join}
JOIN LATERAL (
    SELECT d.label, d.source, d.policy_id,
           (SELECT key FROM jsonb_each(d.category_scores) ORDER BY value::float8 DESC, key LIMIT 1) AS top_category
    FROM moderation_decision d WHERE d.review_id = h.review_id AND d.id < h.id AND {standing_d}
    ORDER BY d.id DESC LIMIT 1
) m ON m.source = 'provider' AND m.label IN ('approved', 'rejected')
LEFT JOIN moderation_moderationpolicy p ON p.id = m.policy_id
WHERE h.source = 'moderator' AND h.label IN ('approved', 'rejected') AND {standing_h}{hidden}
GROUP BY 1, 2 ORDER BY 1, 2
"""
# Undone decisions count on neither side: not as the moderator's, and not as the model decision
# a later moderator's followed (Decision.objects.standing).
_STANDING = {"standing_d": standing_decision_sql("d"), "standing_h": standing_decision_sql("h")}
# Of reviews a viewer may see, for the figures that leave some out: each row's review `r` not of
# a queue they may not see (moderation.selectors.of_queues, in SQL).
_HIDDEN_REVIEWS = " AND r.last_queue <> ALL(%s)"


@dataclass(frozen=True)
class Overturns:
    category: str
    policy_version: int | None
    reviewed: int
    overturned: int

    @property
    def rate(self) -> float:
        return self.overturned / self.reviewed if self.reviewed else 0.0


def overturn_rates(*, hidden_queues=()) -> list[Overturns]:
    """How often moderators reverse the model's approve/reject, by category and policy version:
    the figure supervisors tune thresholds with. Reviews of `hidden_queues` are left out."""
    with connection.cursor() as cursor:
        if hidden_queues:
            cursor.execute(_OVERTURNS.format(join="\nJOIN moderation_contentreview r ON r.id = h.review_id",
                                             hidden=_HIDDEN_REVIEWS, **_STANDING), [sorted(hidden_queues)])
        else:
            cursor.execute(_OVERTURNS.format(join="", hidden="", **_STANDING))
        return [Overturns(*row) for row in cursor.fetchall()]


@dataclass(frozen=True)
class TimeInReviewQueue:
    queue: str
    left: int
    p50_s: float
    p95_s: float


def time_in_review_queue(*, days: int = 7, now: datetime | None = None, hidden_queues=()) -> list[TimeInReviewQueue]:
    """p50 and p95 of how long the reviews that left a review queue in the last `days` days waited
    in it (built-in queues first, then the operators' own), leaving out the queues in
    `hidden_queues`: the queue visits (docs/design.md,
    "Deadlines"), which an undo reopens: an exit a moderator undid is none."""
    since = (now or timezone.now()) - timedelta(days=days)
    visits = QueueVisit.objects.filter(left_at__gte=since).exclude(queue__in=list(hidden_queues))
    found = {row["queue"]: row for row in decision_times(visits, "queue")}
    order = [queue for queue in ReviewQueue.values if queue in found] + sorted(set(found) - set(ReviewQueue.values))
    return [TimeInReviewQueue(queue, found[queue]["decided"], found[queue]["median_s"], found[queue]["p95_s"])
            for queue in order]


# --- what the reports of a review say, for the queue list and the review page ----------------------

REASONS_SHOWN = 3  # the most common reasons a row names; the others are counted in "more"


@dataclass(frozen=True)
class ReportSummary:
    """The reports of the decision a review has in force (the ones the threshold counted:
    docs/design.md, "Reports"), for a moderator deciding whether the reporters are right."""

    count: int
    weight: Decimal  # the sum of the reporters' weights when each report came (Report.weight)
    open: int  # not yet resolved: the moderator's decision will judge them
    reasons: tuple[tuple[str, int], ...]  # (reason, reports), most common first
    kinds: tuple[tuple[str, int], ...]  # (report kind, reports), most common first

    @property
    def top_reason(self) -> str:
        return self.reasons[0][0] if self.reasons else ""

    @property
    def shown_reasons(self) -> tuple[tuple[str, int], ...]:
        return self.reasons[:REASONS_SHOWN]

    @property
    def more_reasons(self) -> int:
        return len(self.reasons) - REASONS_SHOWN if len(self.reasons) > REASONS_SHOWN else 0


def report_summaries(reviews) -> dict:
    """{review id: ReportSummary} for the reviews given (a page of them), in one grouped query over
    their own reports (the (review, reporter) index): never a query per review, never a scan of
    the reports table. A review without reports has no entry.

    The reports counted are the decision in force's, as the threshold counts them: a report
    made while a review had no decision belongs to a review that still has none.
    """
    ids = [review.pk for review in reviews]
    if not ids:
        return {}
    rows = (
        Report.objects.filter(review_id__in=ids)
        .filter(Q(decision_id=F("review__decision_id"))
                | Q(decision_id__isnull=True, review__decision_id__isnull=True))
        .values("review_id", "reason", "kind").order_by()
        .annotate(n=Count("pk"), weight=Sum("weight"), open=Count("pk", filter=Q(outcome="")))
    )
    grouped: dict = defaultdict(lambda: {"count": 0, "weight": Decimal(0), "open": 0,
                                         "reasons": Counter(), "kinds": Counter()})
    for row in rows:
        summary = grouped[row["review_id"]]
        summary["count"] += row["n"]
        summary["weight"] += row["weight"] or 0
        summary["open"] += row["open"]
        summary["reasons"][row["reason"]] += row["n"]
        summary["kinds"][row["kind"]] += row["n"]
    return {review_id: ReportSummary(count=s["count"], weight=s["weight"], open=s["open"],
                                     reasons=_most_common(s["reasons"]), kinds=_most_common(s["kinds"]))
            for review_id, s in grouped.items()}


def _most_common(counts: Counter) -> tuple[tuple[str, int], ...]:
    # Ties in name order: the same reports always read the same, and prefill the same category.
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
