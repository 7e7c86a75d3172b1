"""What the web server serves (`run_platform`, deploy/systemd): the project's WSGI application
behind an asynchronous buffer, so a slow client never holds a worker (docs/operations.md, "Slow
clients").

The server reads each request's head on its event loop, within `REQUEST_HEADER_TIMEOUT_S`;
`BufferedRequest` then reads the whole body there, within `REQUEST_BODY_TIMEOUT_S` (408) and the
path's bound (413, `body_limit`: docs/operations.md, "Request bodies"), before the application
sees the request. A refused body is read to its end and dropped (up to twice
`REQUEST_MAX_BODY_BYTES`) before the 413 is sent: a client that writes its whole body before it
reads would otherwise meet a closed connection, not the answer. Only a complete request reaches
Django, which runs as WSGI in one thread per process (`WsgiThread`), as a sync worker runs it: a
database connection stays open across requests (CONN_MAX_AGE), which Django's own ASGI handler,
with a new thread for every request, cannot do. `WsgiThread` hands each request to that thread
and takes its answer back in one hop each way (asgiref's WsgiToAsgi took four, each copying the
context, and spooled a body over 64 KiB to a temporary file: about a millisecond of a worker's
CPU a request, a third of a refused image's cost, docs/benchmarks.md "Image bombs"). `Watched`
closes each response (Django sends request_finished from there) and, as gunicorn's
`--timeout` did, ends a worker whose request has run longer than `WEB_WORKER_TIMEOUT_S`: with
one thread, a hung request would otherwise hold its process for good; granian starts another.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import json
import logging
import multiprocessing
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_parent() -> None:
    """Have Linux send this process SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG), and
    stop now if it already has. granian 2.8 has no such option: a worker whose master was killed
    (SIGKILL, the OOM killer) served on, holding the port, with nobody left to stop it or to
    start another. SIGTERM stops it as any stop does: the requests it is serving are finished."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before the prctl
        os.kill(os.getpid(), signal.SIGTERM)


if multiprocessing.current_process().name == "granian-worker":
    # granian forks its workers with the master's signal handlers, under which a worker ignores
    # SIGTERM until its event loop takes the signals over, after this module is loaded: a stop
    # that came while Django was loading was lost and the master waited for the worker until it
    # killed it (seen in tests/e2e/test_run_platform.py). Until then a worker serves nothing, so
    # the default action, to exit at once, is the right one.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    exit_with_parent()


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.conf import settings  # noqa: E402  (after the settings module is named)
from django.http import parse_cookie  # noqa: E402

from audit.middleware import request_id_for  # noqa: E402
from config.fair_queue import FairThread  # noqa: E402
from config.wsgi import application as wsgi_application  # noqa: E402
from moderation.api.middleware import API_PREFIX, CALLBACKS_PREFIX, api_body_limit  # noqa: E402
from moderation.web.error_body import error_body  # noqa: E402
from moderation.web.throttles import refusals, throttled_response  # noqa: E402


logger = logging.getLogger(__name__)


class WsgiThread:
    """ASGI to WSGI, the application run in one thread of its own (every request on the same
    thread: Django's connections are per thread), the callers in turn (config/fair_queue.py: a
    caller is its Authorization header, else its address). The request's body is taken whole
    (BufferedRequest has read it); the answer comes back whole when it is at most `whole_bytes`,
    sent from the event loop (one hop each way), else streamed to the loop a chunk at a time from
    the thread."""

    def __init__(self, app, *, whole_bytes: int = 1 << 20):
        self.app, self.whole_bytes = app, whole_bytes
        self.thread = FairThread(name="wsgi")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError("WsgiThread serves http only")
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        loop = asyncio.get_running_loop()
        caller = _header(scope, b"authorization") or (scope.get("client") or ("",))[0]
        answer = self.thread.submit(caller, self._run, scope, b"".join(chunks), loop, send)
        for message in await asyncio.wrap_future(answer):
            await send(message)
        return None

    def _run(self, scope, body: bytes, loop, send) -> list[dict]:
        """In the thread: the application's answer, as the messages left to send."""
        environ, started = wsgi_environ(scope, body), {}

        def start_response(status, headers, exc_info=None):
            if exc_info and started.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            started["message"] = {"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
                                  "headers": [(k.lower().encode("ascii"), v.encode("ascii")) for k, v in headers]}
            started["length"] = next((int(v) for k, v in headers if k.lower() == "content-length"), None)

        def to_loop(message):  # blocks the thread until the loop has sent it
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        result = self.app(environ, start_response)
        try:
            return self._answer(result, started, to_loop)
        finally:
            if hasattr(result, "close"):
                result.close()

    def _answer(self, result, started: dict, to_loop) -> list[dict]:
        pending, size, streaming = [], 0, False
        for chunk in result:
            length = started["length"]
            if length is not None:  # never more than the Content-Length announced
                chunk = chunk[:max(0, length - size)]
            size += len(chunk)
            if not streaming and size > self.whole_bytes:  # a large answer: sent as it comes
                streaming, started["sent"] = True, True
                to_loop(started["message"])
                for earlier in pending:
                    to_loop({"type": "http.response.body", "body": earlier, "more_body": True})
            if streaming:
                to_loop({"type": "http.response.body", "body": chunk, "more_body": True})
            else:
                pending.append(chunk)
            if length is not None and size >= length:
                break
        if streaming:
            to_loop({"type": "http.response.body", "body": b""})
            return []
        return [started["message"], {"type": "http.response.body", "body": b"".join(pending)}]


_CGI_NAMES = {b"content-length": "CONTENT_LENGTH", b"content-type": "CONTENT_TYPE"}  # (not content_type)


class RefusedFromMemory:
    """ASGI middleware: an API client this process has refused for its rate, and whose wait is not
    over, gets its 429 from the event loop, without reaching Django (moderation/web/throttles.py,
    `RefusalMemo`). Its body has been read (BufferedRequest): the connection stays open. A flood of
    refused requests then never queues before the worker's one thread, where another client's
    requests wait their turn (docs/benchmarks.md, "Image bombs"). The token is not checked
    again: one revoked meanwhile gets 429s until the wait is over, then its 401."""

    VERSIONED = API_PREFIX + "v1/"  # every path there but the callbacks' counts per client

    def __init__(self, app, *, hold_s: float = 0.0):
        self.app, self.hold_s = app, hold_s

    async def __call__(self, scope, receive, send):
        wait = self.remembered_wait(scope)
        if not wait:
            return await self.app(scope, receive, send)
        # Held until the client could have retried, at most `hold_s` (THROTTLE_REFUSAL_HOLD_S), and
        # then served if its wait is over: it could get no other answer sooner, and a client that
        # sends again the moment it is answered (a flood) then sends at most one request a
        # connection every `hold_s`, not hundreds a second that cost the other clients' CPU. A
        # sleep on the event loop: it holds no thread.
        if self.hold_s > 0:
            await asyncio.sleep(min(wait, self.hold_s))
            wait = self.remembered_wait(scope)
            if not wait:  # it may be let through now: counted as any request is
                return await self.app(scope, receive, send)
        secure = scope.get("scheme") == "https" or _forwarded_https(scope)
        request_id = request_id_for((_header(scope, b"x-request-id") or b"").decode("latin-1"))
        headers, body = throttled_response(wait, request_id=request_id, secure=secure)
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]})
        await send({"type": "http.response.body", "body": body})
        return None

    @classmethod
    def remembered_wait(cls, scope) -> float:
        path = scope.get("path", "")
        if not path.startswith(cls.VERSIONED) or path.startswith(CALLBACKS_PREFIX):
            return 0.0
        scheme, _, token = (_header(scope, b"authorization") or b"").decode("latin-1").partition(" ")
        return refusals.token_wait(token.strip()) if scheme.lower() == "bearer" else 0.0


def _forwarded_https(scope) -> bool:
    """Django's request.is_secure() behind a proxy (SECURE_PROXY_SSL_HEADER)."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not proxy:
        return False
    name, value = proxy
    given = _header(scope, name.removeprefix("HTTP_").lower().replace("_", "-").encode("latin-1"))
    return given is not None and given.decode("latin-1").split(",", 1)[0].strip() == value


def wsgi_environ(scope, body: bytes) -> dict:
    """The WSGI environ of an ASGI http `scope` and its whole `body` (PEP 3333, read as asgiref's
    WsgiToAsgi reads it: a header sent twice is joined with commas)."""
    script_name = scope.get("root_path", "").encode("utf8").decode("latin1")
    path_info = scope["path"].encode("utf8").decode("latin1")
    if path_info.startswith(script_name):
        path_info = path_info[len(script_name):]
    server = scope.get("server") or ("localhost", 80)
    environ = {
        "REQUEST_METHOD": scope["method"], "SCRIPT_NAME": script_name, "PATH_INFO": path_info,
        "QUERY_STRING": scope.get("query_string", b"").decode("ascii"),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "SERVER_NAME": server[0], "SERVER_PORT": str(server[1] if server[1] is not None else 0),
        "wsgi.version": (1, 0), "wsgi.url_scheme": scope.get("scheme", "http"), "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr, "wsgi.multithread": False, "wsgi.multiprocess": True, "wsgi.run_once": False,
    }
    if scope.get("client"):
        environ["REMOTE_ADDR"] = scope["client"][0]
    for name, value in scope.get("headers", ()):
        key = _CGI_NAMES.get(name) or "HTTP_" + name.decode("latin1").upper().replace("-", "_")
        value = value.decode("latin1")
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


class Watched:
    """The WSGI application as the worker's thread runs it: the response closed once sent, and
    the process ended (`on_timeout`) when one request has run longer than `timeout_s`."""

    def __init__(self, app, *, timeout_s: float, on_timeout=None):
        self.app, self.timeout_s = app, timeout_s
        self.on_timeout = on_timeout or _end_worker
        self.busy_since: float | None = None  # when the running request started
        self._watching = False

    def __call__(self, environ, start_response):
        # A generator: WsgiThread iterates it in the thread and closes it when done, which runs
        # the `finally` at once, also when it stopped early at Content-Length.
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


# Probes, metrics, the admin's login, static files and any path no view serves: a few form fields.
OTHER_MAX_BODY_BYTES = 64 * 1024
ADMIN_PREFIX, LOGIN_PATH = "/admin/", "/admin/login/"


def body_limit(scope) -> int:
    """The largest body this request may send (docs/operations.md, "Request bodies"): the API's
    own bounds (a submission's image in base64), a callback's, an admin form's for a browser that
    has a session (who has none can only be sent to the login), and a few fields elsewhere."""
    path = scope["path"]
    if path.startswith(API_PREFIX):
        return api_body_limit(scope["method"], path)
    if path.startswith(ADMIN_PREFIX) and path != LOGIN_PATH and settings.SESSION_COOKIE_NAME in _cookies(scope):
        return settings.ADMIN_MAX_BODY_BYTES
    return OTHER_MAX_BODY_BYTES


class BufferedRequest:
    """ASGI middleware: the whole body read, within a deadline and the path's size limit
    (`body_limit(scope)`), before `app` is called with it in one message."""

    def __init__(self, app, *, body_limit, timeout_s: float, drain_bytes: int, watch=lambda: None):
        self.app, self.body_limit, self.timeout_s, self.watch = app, body_limit, timeout_s, watch
        self.drain_bytes = drain_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await _lifespan(receive, send)
        if scope["type"] != "http":
            return None  # no websockets here: the server closes the connection
        self.watch()
        limit, declared = self.body_limit(scope), _content_length(scope)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                if declared is not None and declared > limit:
                    raise _TooLarge(0)
                body = await self._read(receive, limit)
        except TimeoutError:
            return await _refuse(send, 408, "request_timeout",
                                 f"the request body did not arrive within {self.timeout_s:g} s")
        except _TooLarge as too_large:
            await self._drain(scope, receive, declared, too_large.read, deadline)
            return await _refuse(send, 413, "too_large", f"bodies are limited to {limit} bytes")
        if body is None:
            return None  # the client went away

        async def forward(message):  # (a coroutine function, whatever the server's `send` is)
            await send(message)

        return await self.app(scope, _replay(body), forward)

    @staticmethod
    async def _read(receive, limit: int) -> bytes | None:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _TooLarge(size)
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    async def _drain(self, scope, receive, declared: int | None, read: int, deadline: float) -> None:
        """Read and drop the rest of a refused body, by the request's deadline and up to
        `drain_bytes` in all: Python's http.client, for one, writes the whole body before it reads
        a byte, and a connection closed under it is a broken pipe, not the 413. Not when the
        client waits for a go-ahead (Expect: 100-continue) it will never get, nor past the bound:
        such a client sees the connection close."""
        if _header(scope, b"expect") == b"100-continue" or (declared or 0) > self.drain_bytes:
            return
        try:
            async with asyncio.timeout_at(deadline):
                while read <= self.drain_bytes:
                    message = await receive()
                    read += len(message.get("body", b""))
                    if message["type"] == "http.disconnect" or not message.get("more_body"):
                        return
        except TimeoutError:
            return


class _TooLarge(Exception):
    def __init__(self, read: int):
        super().__init__(read)
        self.read = read  # the body's bytes read before it was refused


def _replay(body: bytes):
    """`receive` for the application: the body in one message, then a disconnect."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    return receive


def _header(scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


def _content_length(scope) -> int | None:
    try:
        return int(_header(scope, b"content-length") or b"")
    except ValueError:
        return None  # none, or malformed: the server refuses a malformed length itself


def _cookies(scope) -> dict[str, str]:
    return parse_cookie((_header(scope, b"cookie") or b"").decode("latin-1"))


async def _refuse(send, status: int, code: str, detail: str) -> None:
    # The API's error body; the connection closes after it.
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


def build(wsgi_app) -> tuple[BufferedRequest, Watched]:
    """The ASGI stack around a WSGI application, as the web server serves it: the project's
    below, the benchmarks' framework ceiling (bench/ceiling_asgi.py) under the same stack."""
    watched = Watched(wsgi_app, timeout_s=settings.WEB_WORKER_TIMEOUT_S)
    stack = BufferedRequest(
        RefusedFromMemory(WsgiThread(watched), hold_s=settings.THROTTLE_REFUSAL_HOLD_S), watch=watched.watch,
        body_limit=body_limit, timeout_s=settings.REQUEST_BODY_TIMEOUT_S,
        # A body refused for being a little too large (an image just over the limit) is drained:
        # dropped as it arrives, it costs no memory, and the deadline still bounds the time.
        drain_bytes=2 * settings.REQUEST_MAX_BODY_BYTES,
    )
    return stack, watched


application, watched = build(wsgi_application)
