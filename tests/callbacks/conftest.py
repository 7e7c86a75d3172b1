from __future__ import annotations

import json
import uuid

import pytest
from rest_framework.test import APIClient

from moderation.signing import sign

SECRET = "whsec_" + "c2VjcmV0LWZvci10ZXN0cy0xMjM0NTY3ODkwMTIzNDU2"  # base64 of a test secret
OLD_SECRET = "whsec_" + "b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dC0xMjM0"
URL = "/api/v1/callbacks/webhook/"


@pytest.fixture(autouse=True)
def webhook_secrets(settings):
    settings.CALLBACK_SECRETS = {"webhook": [SECRET, OLD_SECRET]}


def completed(key, *, score: float = 0.1, provider_id: str = "prov-1") -> dict:
    return {
        "type": "moderation.completed",
        "data": {
            "id": provider_id,
            "idempotency_key": str(key),
            "model": "sim-1",
            "results": [{"flagged": score >= 0.5, "categories": {"hate": score >= 0.5}, "category_scores": {"hate": score}}],
        },
    }


def deliver(body, *, event_id: str | None = None, secret: str = SECRET, at: float | None = None, headers=None):
    """POST a signed callback the way a provider does; returns the response."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = sign(secret, event_id=event_id or f"evt_{uuid.uuid4().hex}", body=raw, at=at)
    signed.update(headers or {})
    return APIClient().generic(
        "POST", URL, raw, content_type="application/json", **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()}
    )
