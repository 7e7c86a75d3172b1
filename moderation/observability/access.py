"""Who may read the operators' endpoints (/metrics, and /readyz's failure detail)."""

from __future__ import annotations

import hmac

from django.conf import settings

from moderation.selectors import queues_forbidden


def is_operator(request) -> bool:
    """Staff (an admin session) or a scraper sending `Authorization: Bearer <METRICS_TOKEN>`. The
    figures count every review queue: staff kept out of one (a group-only queue, docs/workplace.md
    "Routing rules and queue access") are not operators."""
    header = request.headers.get("Authorization", "").encode()  # bytes: compare_digest refuses non-ASCII str
    token_ok = bool(settings.METRICS_TOKEN) and hmac.compare_digest(header, f"Bearer {settings.METRICS_TOKEN}".encode())
    return token_ok or (request.user.is_authenticated and request.user.is_staff and not queues_forbidden(request.user))
