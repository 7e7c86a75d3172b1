"""Finding reviews by any id a moderator or operator may hold (the admin's search box)."""

from __future__ import annotations

import re
import uuid

from callbacks.models import ProviderCallback
from moderation.models import SHORT_ID_LENGTH, Content, ContentReview, ModerationRequest, short_id_expression

_HEX_PREFIX = re.compile(r"^[0-9a-f]{4,31}$")


def review_ids_matching(term: str, limit: int = 200) -> set:
    """Reviews a moderator may mean by `term`: a review id (its short id, as shown in the list, or
    its first characters), a content id, an external id, an idempotency key, a provider request id or a
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
        if len(prefix) == SHORT_ID_LENGTH:
            found |= set(by_short_id(ContentReview.objects, prefix).values_list("pk", flat=True)[:limit])
    found |= set(Content.objects.filter(external_id=term).values_list("review__pk", flat=True)[:limit])
    found |= set(ContentReview.objects.filter(provider_request_id=term).values_list("pk", flat=True)[:limit])
    found |= set(ModerationRequest.objects.filter(provider_request_id=term).values_list("review_id", flat=True)[:limit])
    keys = ProviderCallback.objects.filter(provider_event_id=term).values_list("idempotency_key", flat=True)[:limit]
    found |= set(ModerationRequest.objects.filter(idempotency_key__in=list(keys)).values_list("review_id", flat=True))
    found.discard(None)
    return found


def by_short_id(reviews, short_id: str):
    """The reviews whose short id (`ContentReview.short_id`) is `short_id`: one lookup in its index."""
    return reviews.alias(short_id=short_id_expression()).filter(short_id=short_id.lower())
