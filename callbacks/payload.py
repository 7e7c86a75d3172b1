"""The callback body of the `webhook` protocol, validated into a typed event."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from moderation.providers import MalformedAnswer, ModerationResult

COMPLETED = "moderation.completed"
ERASED = "[erased]"
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


def redacted(body: str, scrub: Callable[[str], str] | None = None) -> str:
    """The body of a callback whose content was erased: what de-duplication, replay and the
    decision's explanation need (type, ids, model, flags and scores), nothing a provider may
    have quoted of the input. `scrub` removes quotes from what is kept (an `error`, a category
    name); without it (the erased words are gone by then) an `error` is dropped whole. A body
    that is not a JSON object keeps nothing.

    What is kept still parses: a stored callback that was not processed yet is processed
    after the erasure like any other (its review is final, so it changes nothing).
    """
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(document, dict):
        return ""
    data = document.get("data") if isinstance(document.get("data"), dict) else {}
    kept: dict = {k: data[k] for k in ("id", "idempotency_key", "model") if isinstance(data.get(k), str)}
    if isinstance(data.get("results"), list):
        kept["results"] = [
            {k: item[k] for k in ("flagged", "categories", "category_scores") if k in item}
            for item in data["results"]
            if isinstance(item, dict)
        ]
    if "error" in data:
        error = data["error"] if isinstance(data["error"], str) else json.dumps(data["error"])
        kept["error"] = error if scrub else ERASED
    kind = document.get("type") if isinstance(document.get("type"), str) else ""
    text = json.dumps({"type": kind, "data": kept, "erased": True}, sort_keys=True)
    if scrub is None:
        return text
    text = scrub(text)
    try:
        json.loads(text)
    except ValueError:  # a quote that spanned the JSON's own syntax: keep nothing rather than guess
        return ""
    return text
