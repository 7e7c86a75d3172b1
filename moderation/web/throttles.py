"""Rate limits: per API client, and per provider and address on the callback endpoint, shared by
every web worker on every machine (docs/design.md, "Limits").

Each limit ("N/min") is counted in PostgreSQL, which every web worker already shares, by one
statement a request (`rate_hit`): a sliding window, estimated from the counts of the current
window of the period and of the one before, the one before weighted by how much of it the
sliding window still covers. A client held to 1200 a minute gets about 1200 a minute, however
many workers and machines serve it (a per-process count let through that many per worker).
Requests refused are not counted, and concurrent requests of one caller queue on its row, so N
concurrent requests against a limit of M < N let exactly M through. The estimate takes the window
before as spread evenly: a caller that spent a small limit at once may wait up to two periods
(3 a minute, spent at the end of a minute: most of the next one), never less than the limit
allows.

A refusal says how long to wait, and the process remembers it (`RefusalMemo`): until then the
caller's requests to this process are refused without asking the database, and an API client's
without reaching Django at all: the web server answers them as soon as their body is read
(config/asgi.py, `RefusedFromMemory`), so they never queue before the worker's one thread. Nothing can make
that wait shorter (only counted requests move the estimate, and they only raise it), so the memo
never refuses what the shared count would let through; it keeps a flood of refused requests
from costing a round trip each (docs/benchmarks.md, "Image bombs").
"""

from __future__ import annotations

import json
import math
import threading
import time

from django.conf import settings
from django.db import connection
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle

from moderation.models import ApiClient, RateCount
from moderation.web.error_body import error_body

# The window's start and the counts as they are at this request (the row's, moved on by as many
# windows as have passed since), and whether one more fits under the limit, computed from the
# row as it was: an update's SET reads the old row, whatever order it writes in.
_PREVIOUS = ("CASE r.window_no WHEN EXCLUDED.window_no THEN r.previous "
             "WHEN EXCLUDED.window_no - 1 THEN r.current ELSE 0 END")
_CURRENT = "CASE r.window_no WHEN EXCLUDED.window_no THEN r.current ELSE 0 END"
_FITS = (f"({_PREVIOUS}) * (1 - (extract(epoch FROM EXCLUDED.touched_at)::float8 / %(period)s - EXCLUDED.window_no))"
         f" + ({_CURRENT}) + 1 <= %(limit)s")
HIT_SQL = f"""
WITH clock AS (SELECT clock_timestamp() AS now)
INSERT INTO moderation_ratecount AS r (key, window_no, previous, current, allowed, touched_at)
SELECT %(key)s, floor(extract(epoch FROM now)::float8 / %(period)s)::bigint, 0, least(%(limit)s, 1),
       %(limit)s >= 1, now FROM clock
ON CONFLICT (key) DO UPDATE SET
    previous = {_PREVIOUS}, current = {_CURRENT} + ({_FITS})::int, allowed = {_FITS},
    window_no = EXCLUDED.window_no, touched_at = EXCLUDED.touched_at
RETURNING previous, current, allowed, extract(epoch FROM touched_at)::float8
"""


def rate_hit(*, key: str, limit: int, period: float) -> float:
    """Count one request of `key` against `limit` requests a `period` (seconds), shared by every
    process: 0.0 if it is let through, else the seconds until one more would be."""
    with connection.cursor() as cursor:
        cursor.execute(HIT_SQL, {"key": key, "limit": limit, "period": float(period)})
        previous, current, allowed, at = cursor.fetchone()
    if allowed:
        return 0.0
    # (At least a millisecond: the database's arithmetic and this may round apart.)
    return max(0.001, refusal_wait(previous=previous, current=current, limit=limit, period=period, at=at))


def refusal_wait(*, previous: int, current: int, limit: int, period: float, at: float) -> float:
    """Seconds from `at` (seconds since the epoch) until the estimate
    `previous * (1 - elapsed share of the window) + current` leaves room for one more request,
    if nothing else is counted meanwhile."""
    if limit < 1:
        return period  # nothing is ever let through: a period at a time
    position = at / period
    elapsed = position - math.floor(position)  # how much of the current window has passed
    if current + 1 > limit:  # not before the next window, and then `current` is its previous
        after = 1 - (limit - 1) / current
        return (1 - elapsed + max(0.0, after)) * period
    # previous > 0 here: previous * (1 - x) must fall to limit - 1 - current.
    return max(0.0, (1 - (limit - 1 - current) / previous) - elapsed) * period


class RefusalMemo:
    """Until when each refused caller is still refused, in this process (`until` on the
    monotonic clock), and which count an API client's bearer token was refused by: the web server
    answers such a token's requests from here before Django (config/asgi.py, `RefusedFromMemory`).
    Kept small: past `size` entries, those whose wait is over are dropped, and if none is, the
    whole memo is (it then only costs round trips again)."""

    def __init__(self, size: int = 10_000):
        self.size, self._lock = size, threading.Lock()
        self._until, self._tokens = {}, {}

    def wait(self, key: str) -> float:
        """The seconds `key` is still refused for (0.0: ask the shared count)."""
        until = self._until.get(key)
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    def token_wait(self, token: str) -> float:
        """The seconds the client whose bearer token this is is still refused for (0.0: unknown)."""
        key = self._tokens.get(token)
        return 0.0 if key is None else self.wait(key)

    def refuse(self, key: str, seconds: float, *, token: str | None = None) -> None:
        with self._lock:
            if len(self._until) >= self.size or len(self._tokens) >= self.size:
                now = time.monotonic()
                self._until = {k: u for k, u in self._until.items() if u > now}
                self._tokens = {t: k for t, k in self._tokens.items() if k in self._until}
                if len(self._until) >= self.size or len(self._tokens) >= self.size:
                    self._until, self._tokens = {}, {}
            self._until[key] = time.monotonic() + seconds
            if token is not None:
                self._tokens[token] = key

    def forget(self) -> None:
        with self._lock:
            self._until, self._tokens = {}, {}


refusals = RefusalMemo()


class _SharedRate(SimpleRateThrottle):
    """DRF's throttle interface (its rates "N/s", "N/min", "N/hour", "N/day", its 429 with
    Retry-After), counted by `rate_hit` instead of in a cache."""

    setting = ""

    def __init__(self):  # (SimpleRateThrottle's reads the rate from a class attribute at once)
        self._wait = 0.0

    def allow_request(self, request, view) -> bool:
        rate = getattr(settings, self.setting)  # read at request time, so configuration (and tests) can change it
        ident = self.get_cache_key(request, view)
        if rate is None or ident is None:
            return True
        limit, period = self.parse_rate(rate)
        key = f"{ident}:{limit}/{period}"  # a changed rate starts a count of its own
        self._wait = refusals.wait(key)
        if not self._wait:
            self._wait = rate_hit(key=key, limit=limit, period=period)
            if self._wait:
                refusals.refuse(key, self._wait, token=self.token(request))
        return not self._wait

    def wait(self) -> float | None:
        return self._wait or None

    def token(self, request) -> str | None:
        """The bearer token whose requests the web server may refuse from memory (None: none)."""
        return None


class ClientRateThrottle(_SharedRate):
    scope = "client"
    setting = "THROTTLE_CLIENT_RATE"

    def get_cache_key(self, request, view):
        principal = getattr(request.user, "pk", None)
        if principal is None:
            return None  # not authenticated: refused before it could cost anything
        kind = "user" if hasattr(request.user, "is_staff") else "client"  # staff on the timeline API
        return self.cache_format % {"scope": self.scope, "ident": f"{kind}-{principal}"}

    def token(self, request) -> str | None:
        return request.auth if isinstance(request.user, ApiClient) and isinstance(request.auth, str) else None


class CallbackRateThrottle(_SharedRate):
    scope = "callbacks"
    setting = "THROTTLE_CALLBACK_RATE"

    def get_cache_key(self, request, view):
        ident = f"{view.kwargs.get('provider', '')}:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AddressRateThrottle(_SharedRate):
    """For endpoints anyone may call (schema, docs): per address."""

    scope = "address"
    setting = "THROTTLE_ADDRESS_RATE"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def throttled_response(wait: float, *, request_id: str, secure: bool) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and body of the 429 an API request refused for `wait` seconds gets from DRF
    and the site's middleware (SecurityMiddleware's headers, X-Frame-Options, X-Request-ID), but
    for the view's `Allow`: for the web server to answer a remembered refusal before Django.
    tests/moderation/test_rate_limits.py compares the two."""
    throttled = exceptions.Throttled(wait)
    body = json.dumps(error_body("throttled", str(throttled.detail)), ensure_ascii=False,
                      separators=(",", ":")).encode()
    headers = [("Content-Type", "application/json"), ("Retry-After", str(int(throttled.wait)))]  # DRF: "%d" % wait
    headers.append(("X-Frame-Options", getattr(settings, "X_FRAME_OPTIONS", "DENY").upper()))
    if secure and settings.SECURE_HSTS_SECONDS:
        hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
        hsts += "; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else ""
        headers.append(("Strict-Transport-Security", hsts + ("; preload" if settings.SECURE_HSTS_PRELOAD else "")))
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        policy = settings.SECURE_REFERRER_POLICY
        headers.append(("Referrer-Policy", policy if isinstance(policy, str) else ",".join(policy)))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    headers += [("X-Request-ID", request_id), ("Content-Length", str(len(body)))]
    return headers, body


def rate_limits_forget() -> None:
    """Every count and this process's memo of refusals dropped (tests, and an operator who lifts a
    limit at once: docs/operations.md)."""
    RateCount.objects.all().delete()
    refusals.forget()
