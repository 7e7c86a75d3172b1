"""What the HTTP adapters share: one configured client, and errors classified the same way."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from django.conf import settings

from moderation.providers.base import (
    MalformedAnswer,
    ProviderClientError,
    ProviderConnectionError,
    ProviderError,
    ProviderServerError,
    ProviderTimeout,
)


def timeouts() -> httpx.Timeout:
    """The providers' timeouts (PROVIDER_CONNECT_TIMEOUT_S, PROVIDER_TIMEOUT_S)."""
    return httpx.Timeout(
        connect=settings.PROVIDER_CONNECT_TIMEOUT_S,
        read=settings.PROVIDER_TIMEOUT_S,
        write=settings.PROVIDER_TIMEOUT_S,
        pool=settings.PROVIDER_CONNECT_TIMEOUT_S,
    )


def client() -> httpx.Client:
    """A client with explicit timeouts. `retries` re-tries only failed *connections* (the request
    never left, so a retry cannot execute anything twice); everything else is our attempt records'."""
    transport = httpx.HTTPTransport(retries=settings.PROVIDER_HTTP_RETRIES)
    return httpx.Client(timeout=timeouts(), transport=transport, follow_redirects=False)


def get_json(http: httpx.Client, url: str, headers: dict[str, str]) -> tuple[int, Any]:
    """GET and return (status, parsed JSON body or None); raises a classified ProviderError for
    no answer or a 5xx, and leaves 4xx answers to the caller."""
    try:
        response = http.get(url, headers=headers)
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"{type(exc).__name__}: {exc}") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code >= 500:
        raise ProviderServerError(f"HTTP {response.status_code}", http_status=response.status_code)
    try:
        return response.status_code, response.json()
    except (ValueError, RecursionError):
        return response.status_code, None


def post_json(http: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """POST and return (status, parsed JSON body); raises a classified ProviderError."""
    try:
        response = http.post(url, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"{type(exc).__name__}: {exc}") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if status >= 500:
        raise ProviderServerError(f"HTTP {status}: {response.text[:200]}", http_status=status,
                                  retry_after_s=retry_after(response))
    if status == 429:
        # Too many requests: the same request later can succeed.
        raise ProviderError(f"HTTP 429: {response.text[:200]}", http_status=status, retry_after_s=retry_after(response))
    if status >= 400:
        raise ProviderClientError(f"HTTP {status}: {response.text[:200]}", http_status=status)
    try:
        return status, response.json()
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or pathological JSON
        raise MalformedAnswer(f"HTTP {status} with a body that is not acceptable JSON", http_status=status) from exc


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a `Retry-After` header asks us to wait (a number of seconds or an HTTP date,
    RFC 9110 10.2.3); None without one, or with one that is neither."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
