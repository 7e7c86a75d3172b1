"""API clients and their bearer tokens (only a SHA-256 hash is stored)."""

from __future__ import annotations

import base64
import hashlib
import secrets

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from moderation.errors import UnsafeWebhookUrl
from moderation.models import ApiClient
from moderation.db.compiled import CompiledSelect
from moderation.netguard import LOCAL_TRIALS, webhook_url_check

TOKEN_PREFIX = "mod_"


def hash_token(token: str) -> str:
    # Tokens are 256 random bits: a fast unsalted hash is safe here (unlike passwords), and
    # lets authentication find the client with one indexed lookup.
    return hashlib.sha256(token.encode()).hexdigest()


def new_webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@transaction.atomic
def api_client_create(*, name: str, webhook_url: str = "") -> tuple[ApiClient, str]:
    """Create a client; returns it with its token, which is never stored and cannot be shown
    again. Its webhook signing secret (`client.webhook_secret`) is shown once by the command."""
    name = name.strip()
    if not name:
        raise ValidationError("a client needs a name")
    if webhook_url:
        api_client_check_webhook_url(webhook_url)
    if ApiClient.objects.filter(name=name).exists():
        raise ValidationError(f"an API client named {name!r} already exists")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    client = ApiClient.objects.create(
        name=name, token_hash=hash_token(token), token_prefix=token[:10], webhook_url=webhook_url,
        webhook_secret=new_webhook_secret(),
    )
    return client, token


def api_client_check_webhook_url(url: str) -> None:
    """Raise ValidationError unless `url` may receive this platform's webhooks: a well-formed
    http(s) URL whose host resolves only to addresses netguard allows (checked again at every
    delivery, against the address connected to)."""
    URLValidator(schemes=["http", "https"])(url)
    try:
        webhook_url_check(url)
    except UnsafeWebhookUrl as exc:
        raise ValidationError(f"webhook URL refused: {exc}; {LOCAL_TRIALS}") from exc


def api_client_update(*, client_id: int, name: str, webhook_url: str = "", user=None) -> ApiClient:
    """Rename a client or change its webhook URL (its token and secret are never edited): checked as
    at creation (a name, one no other client has, a URL that may receive webhooks) and written
    under the client's row lock, with a history row naming `user` and what changed. Raises
    ValidationError."""
    name = name.strip()
    if not name:
        raise ValidationError("a client needs a name")
    if webhook_url:
        api_client_check_webhook_url(webhook_url)  # no server-side request forgery
    with transaction.atomic():
        client = ApiClient.objects.select_for_update().get(pk=client_id)
        if ApiClient.objects.filter(name=name).exclude(pk=client_id).exists():
            raise ValidationError(f"an API client named {name!r} already exists")
        changed = [what for what, old, new in (("name", client.name, name), ("webhook URL", client.webhook_url, webhook_url))
                   if old != new]
        client.name, client.webhook_url = name, webhook_url
        client._history_user = user
        client._change_reason = f"changed {', '.join(changed) or 'nothing'}"
        client.save(update_fields=["name", "webhook_url"])
    return client


# Every API request's lookup, compiled once (moderation/db/compiled.py).
_ACTIVE_CLIENT = CompiledSelect(lambda token_hash: ApiClient.objects.filter(token_hash=token_hash, is_active=True))


def api_client_authenticate(token: str) -> ApiClient | None:
    if not token.startswith(TOKEN_PREFIX):
        return None
    return _ACTIVE_CLIENT.first(hash_token(token))


@transaction.atomic
def api_client_revoke(*, name: str) -> ApiClient:
    """Revoke a client's token at once: its next request is a 401."""
    from django.utils import timezone

    client = ApiClient.objects.select_for_update().filter(name=name).first()
    if client is None:
        raise ValidationError(f"no API client named {name!r}")
    if client.is_active:
        client.is_active, client.revoked_at = False, timezone.now()
        client.save(update_fields=["is_active", "revoked_at"])
    return client
