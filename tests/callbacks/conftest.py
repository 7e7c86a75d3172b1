from __future__ import annotations

import json
import uuid

import pytest
from rest_framework.test import APIClient

from lab.simulator import Faults, ProviderSimulator
from moderation import providers
from moderation.signing import sign

SECRET = "whsec_" + "c2VjcmV0LWZvci10ZXN0cy0xMjM0NTY3ODkwMTIzNDU2"  # base64 of a test secret
OLD_SECRET = "whsec_" + "b2xkLXNlY3JldC1iZWluZy1yb3RhdGVkLW91dC0xMjM0"
URL = "/api/v1/callbacks/webhook/"


@pytest.fixture(autouse=True)
def webhook_secrets(settings):
    # Tests run operations on the scripted and local providers too: each provider's callbacks
    # come to its own endpoint, signed with these.
    settings.CALLBACK_SECRETS = {name: [SECRET, OLD_SECRET] for name in ("webhook", "scripted", "local")}


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


def deliver(body, *, event_id: str | None = None, secret: str = SECRET, at: float | None = None, headers=None,
            provider: str | None = None):
    """POST a signed callback the way a provider does; returns the response. It comes to the
    endpoint of the provider whose operation it names (`provider`: another one's)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    signed = sign(secret, event_id=event_id or f"evt_{uuid.uuid4().hex}", body=raw, at=at)
    signed.update(headers or {})
    url = URL if provider is None and isinstance(body, bytes) else f"/api/v1/callbacks/{provider or _provider_of(body)}/"
    return APIClient().generic(
        "POST", url, raw, content_type="application/json", **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()}
    )


def _provider_of(body) -> str:
    """The provider of the operation a callback body names ("webhook" when it names none)."""
    from moderation.models import ModerationRequest

    try:
        key = uuid.UUID(body["data"]["idempotency_key"])
    except (TypeError, KeyError, ValueError, AttributeError):
        return "webhook"
    provider = ModerationRequest.objects.filter(idempotency_key=key).values_list("provider", flat=True).first()
    return provider or "webhook"


@pytest.fixture
def simulate(settings, live_server):
    """simulate(**faults) starts a simulator and points the webhook provider at it."""
    started = []

    def start(**faults) -> ProviderSimulator:
        simulator = ProviderSimulator(secret=SECRET, api_key="sim-key", faults=Faults(seed=7, **faults)).start()
        started.append(simulator)
        settings.MODERATION_PROVIDER = "webhook"
        settings.PROVIDER_URL = simulator.url
        settings.PROVIDER_API_KEY = "sim-key"
        settings.PROVIDER_TIMEOUT_S = 1.0
        settings.PUBLIC_BASE_URL = live_server.url
        providers.unregister("webhook")
        providers.register("webhook", providers._webhook)
        return simulator

    yield start
    for simulator in started:
        simulator.stop()
    providers.unregister("webhook")
    providers.register("webhook", providers._webhook)
