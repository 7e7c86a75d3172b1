"""Fetching a client's `media_url`, through the outbound guard (moderation/netguard.py), as
webhooks are delivered: only vetted addresses are connected to (a name resolving to loopback, a
private range or cloud metadata is refused at connect time, DNS rebinding included), every
redirect is followed by hand and checked again, no cookie is kept or sent, and the whole fetch is
bounded in bytes (MEDIA_MAX_BYTES, counted as they arrive) and in time (MEDIA_FETCH_TIMEOUT_S,
one deadline for every hop). `WEBHOOK_ALLOW_PRIVATE` (tests, local trials) lets loopback through.

Why a fetch failed (a name refused and what it resolved to, an HTTP status, a timeout) is for
the logs and for staff (the operation's `media["error_detail"]`): the client is told only
FETCH_FAILED, so a media_url cannot be used to learn how the platform's resolver and network
see internal names (docs/images.md).
"""

from __future__ import annotations

import time
from urllib.parse import urljoin, urlsplit

import httpx
from django.conf import settings

from moderation.media.images import MediaRefused
from moderation.netguard import guarded_transport

_REDIRECTS = (301, 302, 303, 307, 308)

# What the client is told of any failed fetch (the decision's explanation, its notification).
FETCH_FAILED = "it could not be fetched from media_url"


class MediaFetchFailed(MediaRefused):
    """The media_url gave no bytes; the message says why, for the logs and staff only."""


def media_fetch(url: str) -> tuple[bytes, str]:
    """(the bytes, the Content-Type the server gave) of `url`; MediaFetchFailed saying why otherwise."""
    deadline = time.monotonic() + settings.MEDIA_FETCH_TIMEOUT_S
    for _ in range(settings.MEDIA_FETCH_MAX_REDIRECTS + 1):
        _check_url(url)
        # A client per hop: nothing one server sets (a cookie) goes to the next.
        with httpx.Client(transport=guarded_transport(deadline=deadline), follow_redirects=False,
                          timeout=settings.MEDIA_FETCH_TIMEOUT_S, trust_env=False) as client:
            try:
                with client.stream("GET", url, headers={"Accept": "image/*, audio/*"}) as response:
                    if response.status_code in _REDIRECTS:
                        location = response.headers.get("location", "")
                        if not location:
                            raise MediaFetchFailed(f"the media URL redirected (HTTP {response.status_code}) nowhere")
                        url = urljoin(url, location)
                        continue
                    if response.status_code != 200:
                        raise MediaFetchFailed(f"the media URL answered HTTP {response.status_code}")
                    return _read_capped(response), response.headers.get("content-type", "")
            except httpx.TimeoutException as exc:
                raise MediaFetchFailed(f"fetching the media URL took longer than {settings.MEDIA_FETCH_TIMEOUT_S:g} s") from exc
            except httpx.HTTPError as exc:
                raise MediaFetchFailed(f"the media URL could not be fetched: {exc}") from exc
    raise MediaFetchFailed(f"the media URL redirected more than {settings.MEDIA_FETCH_MAX_REDIRECTS} times")


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MediaFetchFailed("the media URL (or a redirect) is not an http(s) URL with a host")
    if parts.username or parts.password:
        raise MediaFetchFailed("the media URL may not carry credentials")


def _read_capped(response: httpx.Response) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > settings.MEDIA_MAX_BYTES:
        raise MediaFetchFailed(f"the media is {declared} bytes; at most {settings.MEDIA_MAX_BYTES} are accepted")
    chunks, size = [], 0
    for chunk in response.iter_bytes():  # decoded: a gzip bomb is counted as it expands
        size += len(chunk)
        if size > settings.MEDIA_MAX_BYTES:
            raise MediaFetchFailed(f"the media is larger than {settings.MEDIA_MAX_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
