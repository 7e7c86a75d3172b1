"""The admin index's figures: reviews by status, stuck ones, the last day's non-events, and the
human work (moderation.observability.workplace).

The figures of reviews (by status, stuck, the queues, the moderators' decisions, overturns, time
in queue) count only those the viewer may see (moderation.selectors): a queue only its groups'
members see adds nothing to another moderator's index. The pipeline's own figures (stale
results, duplicate callbacks, failed claims, illegal transitions, circuits) are of its work, not
of a review's content, and stay whole."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, Sum
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from callbacks.models import ProviderCallback
from moderation.observability import workplace
from moderation.models import ContentReview, ProviderCircuit, ResultOutcome, ReviewStatus
from moderation.selectors import of_queues, queues_forbidden, stuck_reviews
from moderation.services.routing import review_queues


def dashboard_figures(now: datetime | None = None, *, viewer=None) -> dict:
    """The index's figures, as `viewer` may see them (every review when None)."""
    now = now or timezone.now()
    day_ago = now - timedelta(hours=24)
    hidden = queues_forbidden(viewer)
    unseen = of_queues(hidden)

    def seen(reviews):
        return reviews if unseen is None else reviews.exclude(unseen)

    counts = dict(seen(ContentReview.objects.all()).values_list("status").annotate(n=Count("id")).order_by())
    events = dict(
        PipelineEvent.objects.filter(created_at__gte=day_ago, kind__in=[EventKind.CLAIM_LOST, EventKind.ILLEGAL_TRANSITION])
        .values_list("kind").annotate(n=Count("id")).order_by()
    )
    return {
        "by_status": [(status, counts.get(status, 0)) for status in ReviewStatus.values],
        "stuck": seen(stuck_reviews(now=now)).count(),
        "stale_24h": ProviderCallback.objects.filter(received_at__gte=day_ago, outcome=ResultOutcome.STALE).count(),
        "duplicates_24h": ProviderCallback.objects.filter(last_duplicate_at__gte=day_ago).aggregate(
            n=Sum("duplicate_count")
        )["n"] or 0,
        "lost_claims_24h": events.get(EventKind.CLAIM_LOST, 0),
        "illegal_24h": events.get(EventKind.ILLEGAL_TRANSITION, 0),
        "circuits": list(ProviderCircuit.objects.order_by("provider")),
        "review_queues": workplace.review_queue_figures(now, queues=review_queues(viewer)),
        "decisions_per_moderator": workplace.decisions_per_moderator(now=now, hidden_queues=hidden),
        "overturns": workplace.overturn_rates(hidden_queues=hidden),
        "time_in_review_queue": workplace.time_in_review_queue(now=now, hidden_queues=hidden),
    }
