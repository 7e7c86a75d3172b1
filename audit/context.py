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


class CorrelationFilter(logging.Filter):
    """Copies the bound correlation ids onto every record (attributes + a printable suffix)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _ids.get() or {}
        for key, value in ids.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        record.correlation = (" [" + " ".join(f"{k}={v}" for k, v in ids.items()) + "]") if ids else ""
        return True
