"""Correlation ids for logs, set once per request or job and read by every log line.

Services and tasks `bind()` the ids they learn (review_id, idempotency_key, attempt_no, ...);
the logging filter copies whatever is bound onto each record, so no call site rebuilds them.
contextvars keep concurrent threads (and async code) from seeing each other's ids.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

FIELDS = (
    "request_id",
    "review_id",
    "author_pk",
    "content_id",
    "job_id",
    "worker_id",
    "attempt_no",
    "idempotency_key",
    "provider_request_id",
    "provider_event_id",
)

# No mutable default: every bind() sets a new dict, and an unset context reads as empty.
_ids: ContextVar[dict[str, str] | None] = ContextVar("correlation_ids", default=None)


@contextmanager
def bind(**ids: Any) -> Iterator[dict[str, str]]:
    """Add ids to the current context for the duration of the block (None values are ignored)."""
    unknown = set(ids) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown correlation ids: {sorted(unknown)}")
    merged = {**(_ids.get() or {}), **{k: str(v) for k, v in ids.items() if v is not None}}
    token = _ids.set(merged)
    try:
        yield merged
    finally:
        _ids.reset(token)


def current() -> dict[str, str]:
    return dict(_ids.get() or {})


def annotate(record: logging.LogRecord) -> logging.LogRecord:
    """Copy the bound ids onto a record (attributes, and a printable `correlation` suffix).

    Django logs a request's 4xx/5xx after the middleware chain has returned (outside the bind):
    the request id is then read from the request the record carries.
    """
    ids = dict(_ids.get() or {})
    request = getattr(record, "request", None)
    if "request_id" not in ids and getattr(request, "request_id", None):
        ids["request_id"] = request.request_id
    for key, value in ids.items():
        if not hasattr(record, key):
            setattr(record, key, value)
    record.correlation = (" [" + " ".join(f"{k}={v}" for k, v in ids.items()) + "]") if ids else ""
    return record


def install_record_factory() -> None:
    """Every log record gets the ids when it is created, whichever handler then sees it."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_correlated", False):
        return

    def factory(*args, **kwargs):
        return annotate(previous(*args, **kwargs))

    factory._correlated = True
    logging.setLogRecordFactory(factory)


class CorrelationFilter(logging.Filter):
    """For handlers: makes sure a record has the ids (and the request id of Django's own
    request log lines, which carry the request only once they reach a handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        annotate(record)
        return True
