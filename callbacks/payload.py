"""The callback body of the `webhook` protocol, validated into a typed event."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from moderation.providers import MalformedAnswer, ModerationResult

COMPLETED = "moderation.completed"
FAILED = "moderation.failed"


class InvalidCallback(ValueError):
    """The body is not a callback we understand; the message says why."""


@dataclass(frozen=True)
class CallbackEvent:
    type: str
    provider_request_id: str
    idempotency_key: uuid.UUID
    result: ModerationResult | None
    error: str = ""


def parse(body: str) -> CallbackEvent:
    try:
        document = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidCallback(f"body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's digit limit
        raise InvalidCallback(f"body is not acceptable JSON: {type(exc).__name__}") from None
    if not isinstance(document, dict):
        raise InvalidCallback("body must be a JSON object")
    kind, data = document.get("type"), document.get("data")
    if kind not in (COMPLETED, FAILED):
        raise InvalidCallback(f"type must be {COMPLETED!r} or {FAILED!r}")
    if not isinstance(data, dict):
        raise InvalidCallback("data must be an object")
    provider_id, key = data.get("id"), data.get("idempotency_key")
    if not isinstance(provider_id, str) or not provider_id or len(provider_id) > 255:
        raise InvalidCallback("data.id must be a non-empty string of at most 255 characters")
    try:
        key = uuid.UUID(key) if isinstance(key, str) else None
    except ValueError:
        key = None
    if key is None:
        raise InvalidCallback("data.idempotency_key must be a UUID string")
    if kind == FAILED:
        error = data.get("error", "")
        return CallbackEvent(kind, provider_id, key, None, error if isinstance(error, str) else json.dumps(error))
    try:
        result = ModerationResult.from_payload(data)
    except MalformedAnswer as exc:
        raise InvalidCallback(str(exc)) from exc
    return CallbackEvent(kind, provider_id, key, result)
