"""Read queries the services share with the read side. One definition per idea: "stuck" is here.

A review is stuck when its live operation (the request holding the review's active key) is open,
not waiting for a scheduled retry, and has not moved for MODERATION_STUCK_AFTER_S seconds. The
sweeper's reconcile, `reconcile_stuck`, the stuck gauge, the admin dashboard and the review list's
"stuck" filter all use this definition, so they always agree.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.db.models import F, QuerySet
from django.utils import timezone

from moderation.models import OPEN_REQUEST_STATUSES, ContentReview, ModerationRequest, ReviewStatus


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
