"""What the web server serves (`run_platform`, deploy/systemd): the project's WSGI application
behind an asynchronous buffer, so a slow client never holds a worker (docs/operations.md, "Slow
clients").

The server reads each request's head on its event loop, within `REQUEST_HEADER_TIMEOUT_S`;
`BufferedRequest` then reads the whole body there, within `REQUEST_BODY_TIMEOUT_S` (408) and
`REQUEST_MAX_BODY_BYTES` (413), before the application sees the request. Only a complete request
reaches Django, which runs as WSGI in one thread per process (asgiref's WsgiToAsgi), as a sync
worker runs it: a database connection stays open across requests (CONN_MAX_AGE), which Django's
own ASGI handler, with a new thread for every request, cannot do. `Watched` closes each response
(WsgiToAsgi never does, and Django sends request_finished from there) and, as gunicorn's
`--timeout` did, ends a worker whose request has run longer than `WEB_WORKER_TIMEOUT_S`: with
one thread, a hung request would otherwise hold its process for good; granian starts another.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import signal
import time

if multiprocessing.current_process().name == "granian-worker":
    # granian forks its workers with the master's signal handlers, under which a worker ignores
    # SIGTERM until its event loop takes the signals over, after this module is loaded: a stop
    # that came while Django was loading was lost and the master waited for the worker until it
    # killed it (seen in tests/e2e/test_run_platform.py). Until then a worker serves nothing, so
    # the default action, to exit at once, is the right one.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)

from asgiref.wsgi import WsgiToAsgi  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings  # noqa: E402  (after the settings module is named)

from config.wsgi import application as wsgi_application  # noqa: E402
from moderation.error_body import error_body  # noqa: E402


logger = logging.getLogger(__name__)


class Watched:
    """The WSGI application as the worker's thread runs it: the response closed once sent, and
    the process ended (`on_timeout`) when one request has run longer than `timeout_s`."""

    def __init__(self, app, *, timeout_s: float, on_timeout=None):
        self.app, self.timeout_s = app, timeout_s
        self.on_timeout = on_timeout or _end_worker
        self.busy_since: float | None = None  # when the running request started
        self._watching = False

    def __call__(self, environ, start_response):
        # A generator: WsgiToAsgi iterates it in the thread and drops it when done, and CPython
        # then runs the `finally` at once, also when it stopped early at Content-Length.
        self.busy_since, result = time.monotonic(), None
        try:
            result = self.app(environ, start_response)
            yield from result
        finally:
            if hasattr(result, "close"):
                result.close()
            self.busy_since = None

    def watch(self) -> None:
        """Check once a second, on the running event loop, from the first call on."""
        if not self._watching:
            self._watching = True
            asyncio.get_running_loop().call_later(1, self._check)

    def _check(self) -> None:
        started = self.busy_since
        if started is not None and time.monotonic() - started > self.timeout_s:
            self.on_timeout(time.monotonic() - started)
        asyncio.get_running_loop().call_later(1, self._check)


def _end_worker(running_s: float) -> None:
    logger.error("a request has run for %.0f s (WEB_WORKER_TIMEOUT_S): ending this web worker", running_s)
    logging.shutdown()
    os._exit(1)  # granian (--respawn-failed-workers) starts another


class BufferedRequest:
    """ASGI middleware: the whole body read, within a deadline and a size limit, before `app`
    is called with it in one message."""

    def __init__(self, app, *, max_bytes: int, timeout_s: float, watch=lambda: None):
        self.app, self.max_bytes, self.timeout_s, self.watch = app, max_bytes, timeout_s, watch

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        if scope["type"] != "http":
            return None  # no websockets here: the server closes the connection
        self.watch()
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            return await _refuse(send, 413, "too_large", f"bodies are limited to {self.max_bytes} bytes")
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._read(receive)
        except TimeoutError:
            return await _refuse(send, 408, "request_timeout",
                                 f"the request body did not arrive within {self.timeout_s:g} s")
        except _TooLarge:
            return await _refuse(send, 413, "too_large", f"bodies are limited to {self.max_bytes} bytes")
        if body is None:
            return None  # the client went away

        async def forward(message):  # (asgiref wants a coroutine function; the server's may not be)
            await send(message)

        return await self.app(scope, _replay(body), forward)

    async def _read(self, receive) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


class _TooLarge(Exception):
    pass


def _replay(body: bytes):
    """`receive` for the application: the body in one message, then a disconnect."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    return receive


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length itself
    return None


async def _refuse(send, status: int, code: str, detail: str) -> None:
    # The API's error body; the connection closes, whatever the client sent meanwhile.
    body = json.dumps(error_body(code, detail)).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


watched = Watched(wsgi_application, timeout_s=settings.WEB_WORKER_TIMEOUT_S)
application = BufferedRequest(
    WsgiToAsgi(watched), watch=watched.watch,
    max_bytes=settings.REQUEST_MAX_BODY_BYTES, timeout_s=settings.REQUEST_BODY_TIMEOUT_S,
)
