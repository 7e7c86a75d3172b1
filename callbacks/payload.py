"""The callback body of the `webhook` protocol, validated into a typed event."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from moderation.models import ERASED
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
    if unstorable := _unstorable(document):
        raise InvalidCallback(unstorable)
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


# The key a body names, found in text that is not JSON (a malformed body cut short).
_NAMED_KEY = re.compile(r'"idempotency_key"\s*:\s*"([0-9A-Fa-f-]{32,36})"')


def named_key(body: str) -> uuid.UUID | None:
    """The operation a callback body names, even when it is not a valid callback: its
    `data.idempotency_key` when the body is JSON, else the first `"idempotency_key": "<uuid>"`
    written in it. A signed but malformed body is stored with it, so erasure finds it."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        found = _NAMED_KEY.search(body)
        key = found.group(1) if found else None
    else:
        data = document.get("data") if isinstance(document, dict) else None
        key = data.get("idempotency_key") if isinstance(data, dict) else None
    try:
        return uuid.UUID(key) if isinstance(key, str) else None
    except ValueError:
        return None


def redacted(body: str, scrub: Callable[[str], str] | None = None, *, known: frozenset[str] = frozenset()) -> str:
    """The body of a callback whose content was erased: what de-duplication, replay and the
    decision's explanation need (type, ids, model, flags and scores), nothing a provider may
    have quoted of the input. `scrub` removes quotes from what is kept (an `error`, a model or
    category name). Without it (a callback arriving after the erasure: the erased words are
    gone) nothing a provider named is kept: an `error` and the `model` become ERASED, and a
    category not in `known` (the platform's own names) becomes "[erased] N". A body that is
    not a JSON object keeps nothing.

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
    if scrub is None and "model" in kept:
        kept["model"] = ERASED
    if isinstance(data.get("results"), list):
        kept["results"] = [
            {k: item[k] for k in ("flagged", "categories", "category_scores") if k in item}
            for item in data["results"]
            if isinstance(item, dict)
        ]
        if scrub is None:
            kept["results"] = [_known_names(item, known) for item in kept["results"]]
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


def _known_names(item: dict, known: frozenset[str]) -> dict:
    """A result item keeping only flags and scores, its category names outside `known` replaced
    by "[erased] N" (the same N for one name in `categories` and `category_scores`)."""
    aliases: dict[str, str] = {}

    def name(category: str) -> str:
        if category in known:
            return category
        return aliases.setdefault(category, f"{ERASED} {len(aliases) + 1}")

    kept: dict = {"flagged": item["flagged"]} if isinstance(item.get("flagged"), bool) else {}
    for key in ("categories", "category_scores"):
        if isinstance(item.get(key), dict):
            kept[key] = {name(str(c)): v for c, v in item[key].items() if isinstance(v, bool | int | float)}
    return kept


def _unstorable(value, path: str = "body") -> str:
    """Where the first string (or key) holding a NUL or a lone surrogate is, or "".

    Both are valid JSON escapes (`\\u0000`, `\\ud800`) and parse into Python strings, but
    neither can be stored: PostgreSQL text refuses NUL, and a lone surrogate has no UTF-8
    encoding. Such a callback is refused whole (stored as invalid, answered 400) instead of
    failing at the insert or on every later processing, whichever field carries it.
    """
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path} contains a NUL character"
        if any("\ud800" <= char <= "\udfff" for char in value):
            return f"{path} contains a lone surrogate"
        return ""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_printable(key)}"
            if found := _unstorable(key, f"a key of {path}") or _unstorable(item, where):
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if found := _unstorable(item, f"{path}[{index}]"):
                return found
    return ""


def _printable(key: str) -> str:
    """A key as it can be quoted in an error message (and stored): escapes, at most 100 chars."""
    return key.encode("ascii", "backslashreplace").decode()[:100]


def storable_body(text: str) -> str:
    """The body as the inbox keeps it (`payload_json`).

    PostgreSQL text cannot hold NUL. A body with a raw NUL character is never JSON (JSON allows
    no raw control characters), so it is always stored as invalid: it is kept as
    `base64:<the exact bytes>`, its reason saying so. Escaping NUL in place (as `\\u0000`) would
    make it indistinguishable from a body that contained those six characters; base64 keeps
    what the provider sent recoverable byte for byte. Every other body is stored verbatim.
    """
    if "\x00" not in text:
        return text
    return "base64:" + base64.b64encode(text.encode("utf-8")).decode("ascii")
