"""Idempotent API requests, the way Stripe does them: one key, one outcome."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from moderation.errors import IdempotencyKeyReused
from moderation.models import ApiClient, IdempotencyRecord

_CLAIM = """
INSERT INTO moderation_idempotencyrecord (client_id, key, fingerprint, created_at)
VALUES (%s, %s, %s, %s)
ON CONFLICT (client_id, key) DO NOTHING
"""


def fingerprint(data) -> str:
    """The same body however it is spelled (key order, whitespace)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def idempotent_call(
    *, client: ApiClient, key: str, body_fingerprint: str, compute: Callable[[], tuple[int, dict]]
) -> tuple[int, dict, bool]:
    """Run `compute` once per (client, key); replay its (status, body) to every retry.

    Returns (status, body, replayed). A key used before with another body raises
    IdempotencyKeyReused. Two requests with one key at once: the second's INSERT waits on the
    first's uncommitted row, then reads the stored response. If `compute` raises (bad input, a
    crash), the whole transaction rolls back and the key stays free for a corrected retry.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM, [client.pk, key, body_fingerprint, timezone.now()])
        record = IdempotencyRecord.objects.select_for_update().get(client=client, key=key)
        if record.fingerprint != body_fingerprint:
            raise IdempotencyKeyReused("this Idempotency-Key was used with a different request body")
        if record.status_code is not None:
            return record.status_code, record.response, True
        status, body = compute()
        record.status_code, record.response = status, body
        record.save(update_fields=["status_code", "response"])
        return status, body, False


def idempotency_records_expired(*, now: datetime | None = None):
    """Records past IDEMPOTENCY_TTL_H (the sweeper deletes them, and so does `prune`)."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.IDEMPOTENCY_TTL_H)
    return IdempotencyRecord.objects.filter(created_at__lt=cutoff)


def idempotency_records_expire(*, now: datetime | None = None) -> int:
    return idempotency_records_expired(now=now).delete()[0]
