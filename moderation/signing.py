"""Standard Webhooks signatures (the `standardwebhooks` library), with secret rotation."""

from __future__ import annotations

import binascii
import time
from datetime import datetime, UTC

from django.conf import settings
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


class InvalidSignature(Exception):
    pass


def verify(provider: str, body: bytes, headers: dict[str, str]) -> None:
    """Accept the body if any active secret of the provider signed it, recently enough."""
    secrets = settings.CALLBACK_SECRETS.get(provider) or []
    if not secrets:
        raise InvalidSignature(f"no webhook secret is configured for {provider}")
    timestamp = headers.get("webhook-timestamp", "")
    try:
        age = abs(time.time() - float(timestamp))
    except ValueError:
        raise InvalidSignature("missing or malformed webhook-timestamp") from None
    if age > settings.CALLBACK_TOLERANCE_S:
        raise InvalidSignature("webhook-timestamp outside the tolerance")
    for secret in secrets:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
            return
        except (WebhookVerificationError, ValueError, binascii.Error):
            # ValueError/binascii.Error: a malformed signature header is just a bad signature.
            continue
    raise InvalidSignature("no valid signature for any active secret")


def sign(secret: str, *, event_id: str, body: bytes, at: float | None = None) -> dict[str, str]:
    """The three headers a provider sends (used by the simulator and by tests)."""
    timestamp = datetime.fromtimestamp(at if at is not None else time.time(), tz=UTC)
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, timestamp, body.decode()),
    }
