"""Read-only queries shared by the admin, commands and (later) metrics."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Sum
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from callbacks.models import CallbackOutcome, ProviderCallback
import re
import uuid

from moderation.models import Content, ContentReview, ModerationRequest, ProviderCircuit, ReviewStatus

_HEX_PREFIX = re.compile(r"^[0-9a-f]{4,31}$")


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
        "stuck": ContentReview.objects.filter(
            status=ReviewStatus.PROCESSING,
            updated_at__lt=now - timedelta(seconds=settings.MODERATION_STUCK_AFTER_S),
        ).count(),
        "stale_24h": ProviderCallback.objects.filter(received_at__gte=day_ago, outcome=CallbackOutcome.STALE).count(),
        "duplicates_24h": ProviderCallback.objects.filter(last_duplicate_at__gte=day_ago).aggregate(
            n=Sum("duplicate_count")
        )["n"] or 0,
        "lost_claims_24h": events.get(EventKind.CLAIM_LOST, 0),
        "illegal_24h": events.get(EventKind.ILLEGAL_TRANSITION, 0),
        "circuits": list(ProviderCircuit.objects.order_by("provider")),
    }


def review_ids_matching(term: str, limit: int = 200) -> set:
    """Reviews a moderator may mean by `term`: a review id (or its first characters, as shown in
    the list), a content id, an external id, an idempotency key, a provider request id or a
    provider event id. Each kind is its own indexed lookup; none scans a table."""
    term = term.strip()
    found: set = set()
    try:
        as_uuid = uuid.UUID(term)
    except ValueError:
        as_uuid = None
    if as_uuid:
        found |= set(ContentReview.objects.filter(pk=as_uuid).values_list("pk", flat=True))
        found |= set(ContentReview.objects.filter(content_id=as_uuid).values_list("pk", flat=True))
        found |= set(ModerationRequest.objects.filter(idempotency_key=as_uuid).values_list("review_id", flat=True))
    elif _HEX_PREFIX.match(term.replace("-", "").lower()):
        prefix = term.replace("-", "").lower()
        low, high = uuid.UUID(prefix.ljust(32, "0")), uuid.UUID(prefix.ljust(32, "f"))
        found |= set(ContentReview.objects.filter(pk__gte=low, pk__lte=high).values_list("pk", flat=True)[:limit])
    found |= set(Content.objects.filter(external_id=term).values_list("review__pk", flat=True)[:limit])
    found |= set(ContentReview.objects.filter(provider_request_id=term).values_list("pk", flat=True)[:limit])
    found |= set(ModerationRequest.objects.filter(provider_request_id=term).values_list("review_id", flat=True)[:limit])
    keys = ProviderCallback.objects.filter(provider_event_id=term).values_list("idempotency_key", flat=True)[:limit]
    found |= set(ModerationRequest.objects.filter(idempotency_key__in=list(keys)).values_list("review_id", flat=True))
    found.discard(None)
    return found
