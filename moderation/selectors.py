"""Read queries the services share with the read side. One definition per idea: "stuck" and
"visible to" are here.

A review is stuck when its live operation (the request holding the review's active key) is open,
not waiting for a scheduled retry, and has not moved for MODERATION_STUCK_AFTER_S seconds. The
sweeper's reconcile, `reconcile_stuck`, the stuck gauge, the admin dashboard and the review list's
"stuck" filter all use this definition, so they always agree.

A review is visible to a user unless the queue it waits in, or last waited in once it left
(`ContentReview.last_queue`), names groups the user is in none of (docs/workplace.md, "Routing
rules and queue access"). Every admin page, list, count and search, and the services that lease,
decide or annotate a review, ask `queues_forbidden` or the helpers built on it below.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.db.models import Aggregate, Count, F, FloatField, Func, Q, QuerySet
from django.utils import timezone

from moderation.models import (
    OPEN_REQUEST_STATUSES,
    ContentReview,
    ModerationQueue,
    ModerationRequest,
    QueueVisit,
    ReviewStatus,
)


def stuck_cutoff(*, now: datetime | None = None, stuck_after: float | None = None) -> datetime:
    """An operation untouched since before this is silent (`stuck_after` seconds, default
    MODERATION_STUCK_AFTER_S)."""
    seconds = settings.MODERATION_STUCK_AFTER_S if stuck_after is None else stuck_after
    return (now or timezone.now()) - timedelta(seconds=seconds)


def stuck_requests(*, now: datetime | None = None, stuck_after: float | None = None) -> QuerySet[ModerationRequest]:
    """The live operations of processing reviews that have not moved for `stuck_after` seconds."""
    return ModerationRequest.objects.filter(
        status__in=OPEN_REQUEST_STATUSES,
        next_attempt_at__isnull=True,
        updated_at__lt=stuck_cutoff(now=now, stuck_after=stuck_after),
        review__status=ReviewStatus.PROCESSING,
        review__active_idempotency_key=F("idempotency_key"),
    )


def stuck_reviews(*, now: datetime | None = None, stuck_after: float | None = None) -> QuerySet[ContentReview]:
    """The reviews of `stuck_requests` (each review has at most one live operation)."""
    return ContentReview.objects.filter(pk__in=stuck_requests(now=now, stuck_after=stuck_after).values("review_id"))


def stuck_review_ids(*, limit: int, now: datetime | None = None, stuck_after: float | None = None) -> list:
    """The ids of up to `limit` stuck reviews, the longest silent first."""
    rows = stuck_requests(now=now, stuck_after=stuck_after).order_by("updated_at")
    return list(rows.values_list("review_id", flat=True)[:limit])


def estimated_rows(queryset) -> int | None:
    """The planner's estimate of the rows `queryset` returns (None when it cannot tell)."""
    try:
        sql, params = queryset.query.sql_with_params()
    except Exception:  # noqa: BLE001 - an empty result set (`.none()`) has no SQL
        return None
    with connections[queryset.db].cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


# --- who may see a review (docs/workplace.md, "Routing rules and queue access") ----------------

def queues_forbidden(user, *, rows: dict | None = None) -> set[str]:
    """The slugs of the queues `user` may not see or take: those with groups, none of which they
    are in. Empty for a superuser (and for no user: the system's own reads). One query (none when
    `rows`, {slug: ModerationQueue} prefetched with their groups)."""
    if user is None or getattr(user, "is_superuser", False):
        return set()
    if rows is None:
        return set(ModerationQueue.objects.filter(groups__isnull=False)
                   .exclude(groups__in=user.groups.all()).values_list("slug", flat=True).distinct())
    mine = set(user.groups.values_list("pk", flat=True))
    return {slug for slug, row in rows.items() if (ids := {g.pk for g in row.groups.all()}) and not ids & mine}


def of_queues(queues, *, through: str = "") -> Q | None:
    """The condition that a row is of a review that waits, or last waited, in one of `queues`: on
    reviews (`through` "") or on rows that reach their review by the lookup `through` ("review",
    "request__review"). None for no queues. The rule itself: every check below comes to this."""
    if not queues:
        return None
    return Q(**{f"{through}__last_queue__in" if through else "last_queue__in": sorted(queues)})


def hidden_from(user, *, through: str = "") -> Q | None:
    """The condition that a row is of a review `user` may not see (`of_queues` of their
    `queues_forbidden`); None when they may see every review."""
    return of_queues(queues_forbidden(user), through=through)


def visible_to(user, rows: QuerySet, *, through: str = "") -> QuerySet:
    """`rows` without those of reviews `user` may not see (`hidden_from`); a row whose review
    is NULL (a pipeline event of no review) stays."""
    hidden = hidden_from(user, through=through)
    return rows if hidden is None else rows.exclude(hidden)


def reviews_visible_to(user, reviews: QuerySet[ContentReview] | None = None) -> QuerySet[ContentReview]:
    """The reviews (of `reviews`; all when None) `user` may see."""
    return visible_to(user, ContentReview.objects.all() if reviews is None else reviews)


def review_visible_to(user, review: ContentReview) -> bool:
    """Whether `user` may see `review` (read with its `last_queue`): `of_queues` in Python. A
    review that never waited for a human is everyone's, and costs no query (most reviews: the
    services ask it holding the review's row lock)."""
    return not review.last_queue or review.last_queue not in queues_forbidden(user)


# --- time to decision (docs/design.md, "Deadlines") ----------------------------------------------

class Percentile(Aggregate):
    """PostgreSQL's percentile_cont(`fraction`): the value below which that share of the group
    lies, interpolated (0.5: the median)."""

    function = "percentile_cont"
    name = "Percentile"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, *, fraction: float, **extra):
        if not 0 <= fraction <= 1:
            raise ValueError(f"a percentile's fraction is from 0 to 1, not {fraction}")
        super().__init__(expression, fraction=float(fraction), **extra)


def _seconds_to_decision() -> Func:
    return Func(F("left_at"), F("anchor_at"), template="EXTRACT(EPOCH FROM %(expressions)s)", arg_joiner=" - ",
                output_field=FloatField())


def decisions_between(since: datetime, until: datetime) -> QuerySet[QueueVisit]:
    """The visits that a decision ended in [since, until): the rows every time-to-decision figure
    counts. An undone decision reopened its visit, so it is none of them (queue_visit_decided_idx)."""
    return QueueVisit.objects.filter(decided=True, left_at__gte=since, left_at__lt=until)


def decision_times(visits: QuerySet[QueueVisit], *keys) -> list[dict]:
    """The one computation of time to decision (docs/design.md, "Deadlines"): per group of
    `visits` by `keys` (field names or annotations already on `visits`), the decisions
    (`decided`), the median and 95th percentile of the seconds from anchor to decision
    (`median_s`, `p95_s`; None for no decision) and how many came after their due time
    (`breached`). The deadline page, /metrics and the transparency report all read it."""
    return list(visits.order_by().values(*keys).annotate(
        decided=Count("pk"),
        median_s=Percentile(_seconds_to_decision(), fraction=0.5),
        p95_s=Percentile(_seconds_to_decision(), fraction=0.95),
        breached=Count("pk", filter=Q(left_at__gt=F("due_at"))),
    ).order_by(*keys))
