"""The admin index's figures: reviews by status, stuck ones, the last day's non-events, and the
human work (moderation.observability.workplace)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, Sum
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from callbacks.models import ProviderCallback
from moderation.observability import workplace
from moderation.models import ContentReview, ProviderCircuit, ResultOutcome, ReviewStatus
from moderation.selectors import stuck_reviews


def dashboard_figures(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    day_ago = now - timedelta(hours=24)
    counts = dict(ContentReview.objects.values_list("status").annotate(n=Count("id")).order_by())
    events = dict(
        PipelineEvent.objects.filter(created_at__gte=day_ago, kind__in=[EventKind.CLAIM_LOST, EventKind.ILLEGAL_TRANSITION])
        .values_list("kind").annotate(n=Count("id")).order_by()
    )
    return {
        "by_status": [(status, counts.get(status, 0)) for status in ReviewStatus.values],
        "stuck": stuck_reviews(now=now).count(),
        "stale_24h": ProviderCallback.objects.filter(received_at__gte=day_ago, outcome=ResultOutcome.STALE).count(),
        "duplicates_24h": ProviderCallback.objects.filter(last_duplicate_at__gte=day_ago).aggregate(
            n=Sum("duplicate_count")
        )["n"] or 0,
        "lost_claims_24h": events.get(EventKind.CLAIM_LOST, 0),
        "illegal_24h": events.get(EventKind.ILLEGAL_TRANSITION, 0),
        "circuits": list(ProviderCircuit.objects.order_by("provider")),
        "review_queues": workplace.review_queue_figures(now),
        "decisions_per_moderator": workplace.decisions_per_moderator(now=now),
        "overturns": workplace.overturn_rates(),
        "time_in_review_queue": workplace.time_in_review_queue(now=now),
    }
