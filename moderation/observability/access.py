"""Who may read the operators' endpoints (/metrics, and /readyz's failure detail)."""

from __future__ import annotations

import hmac

from django.conf import settings


def is_operator(request) -> bool:
    """Staff (an admin session) or a scraper sending `Authorization: Bearer <METRICS_TOKEN>`."""
    header = request.headers.get("Authorization", "").encode()  # bytes: compare_digest refuses non-ASCII str
    token_ok = bool(settings.METRICS_TOKEN) and hmac.compare_digest(header, f"Bearer {settings.METRICS_TOKEN}".encode())
    return token_ok or (request.user.is_authenticated and request.user.is_staff)
