"""config/asgi.py: Django sees a request only once its whole body has arrived, within the
deadline and the size limit (otherwise the client gets 408 or 413 and Django nothing); each
response is closed once sent (Django's request_finished); a request that runs too long ends its
worker (docs/operations.md, "Slow clients")."""

from __future__ import annotations

import asyncio
import json
import time

from asgiref.wsgi import WsgiToAsgi
from django.core.signals import request_finished

from config.asgi import BufferedRequest, Watched, application

SCOPE = {"type": "http", "method": "POST", "path": "/api/v1/callbacks/webhook/", "headers": []}


class App:
    def __init__(self):
        self.calls = []

    async def __call__(self, scope, receive, send):
        self.calls.append([await receive(), await receive()])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def serve(messages, *, scope=SCOPE, max_bytes=10, timeout_s=1.0, pause_s=0.0):
    """Run the middleware on `messages` (each after `pause_s`); returns (app, what it sent)."""
    app, sent, queue = App(), [], list(messages)

    async def receive():
        await asyncio.sleep(pause_s)
        return queue.pop(0) if queue else await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.run(BufferedRequest(app, max_bytes=max_bytes, timeout_s=timeout_s)(scope, receive, send))
    return app, sent


def chunk(body: bytes, more: bool) -> dict:
    return {"type": "http.request", "body": body, "more_body": more}


def test_a_body_in_pieces_reaches_the_application_whole_in_one_message():
    app, sent = serve([chunk(b"abc", True), chunk(b"", True), chunk(b"def", False)])

    assert app.calls == [[chunk(b"abcdef", False), {"type": "http.disconnect"}]]
    assert sent[0]["status"] == 200


def test_a_body_that_does_not_arrive_within_the_deadline_gets_408_and_never_reaches_the_application():
    app, sent = serve([chunk(b"a", True)] * 100, timeout_s=0.2, pause_s=0.05)

    assert app.calls == []
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"] == "request_timeout"


def test_a_declared_length_over_the_limit_gets_413_unread():
    app, sent = serve([], scope={**SCOPE, "headers": [(b"content-length", b"11")]})

    assert app.calls == [] and sent[0]["status"] == 413


def test_a_body_growing_past_the_limit_gets_413():
    app, sent = serve([chunk(b"123456", True), chunk(b"78901", False)])

    assert app.calls == [] and sent[0]["status"] == 413


def test_a_body_of_exactly_the_limit_is_accepted():
    app, sent = serve([chunk(b"123456", True), chunk(b"7890", False)])

    assert app.calls[0][0]["body"] == b"1234567890" and sent[0]["status"] == 200


def test_a_client_gone_before_its_body_is_complete_reaches_nothing():
    app, sent = serve([chunk(b"abc", True), {"type": "http.disconnect"}])

    assert app.calls == [] and sent == []


class Response:
    """A WSGI response that records whether it was closed."""

    def __init__(self, chunks):
        self.chunks, self.closed = chunks, False

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        self.closed = True


def run_wsgi(wsgi_app, *, watch=None, scope=None):
    """Serve one GET through BufferedRequest(WsgiToAsgi(...)) as config/asgi.py does; returns what
    was sent."""
    sent = []
    scope = scope or {"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": [],
                      "http_version": "1.1", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5)}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    app = BufferedRequest(WsgiToAsgi(wsgi_app), max_bytes=10, timeout_s=1, watch=watch or (lambda: None))
    asyncio.run(app(scope, receive, send))
    return sent


def test_a_response_is_closed_once_sent_also_when_cut_at_its_content_length():
    """(asgiref's WsgiToAsgi never calls close(): Django's request_finished would never fire.)"""
    responses = []

    def wsgi_app(environ, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        responses.append(Response([b"ok", b"and more than announced"]))
        return responses[-1]

    sent = run_wsgi(Watched(wsgi_app, timeout_s=60))

    assert [m.get("body") for m in sent[1:]] == [b"ok", None]
    assert responses[0].closed


def test_django_finishes_each_request_it_serves():
    finished = []

    def receiver(sender, **kwargs):
        finished.append(sender)

    request_finished.connect(receiver)
    try:
        sent = run_wsgi(application.app.wsgi_application, scope={
            "type": "http", "method": "GET", "path": "/healthz", "query_string": b"", "headers": [(b"host", b"testserver")],
            "http_version": "1.1", "server": ("testserver", 80), "client": ("127.0.0.1", 5)})
    finally:
        request_finished.disconnect(receiver)

    assert sent[0]["status"] == 200 and finished


def test_a_request_running_longer_than_the_worker_timeout_ends_the_worker_and_a_quick_one_does_not():
    ended = []

    def slow(environ, start_response):
        time.sleep(float(environ["PATH_INFO"].strip("/")))
        start_response("200 OK", [])
        return [b"late"]

    def serve(seconds: float, timeout_s: float) -> None:
        watched = Watched(slow, timeout_s=timeout_s, on_timeout=ended.append)
        run_wsgi(watched, watch=watched.watch, scope={
            "type": "http", "method": "GET", "path": f"/{seconds}", "query_string": b"", "headers": [],
            "http_version": "1.1", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5)})

    serve(1.3, timeout_s=5)  # checked once a second: at 1 s, running but within its time
    assert ended == []
    serve(1.7, timeout_s=0.5)  # at 1 s it has run past 0.5 s
    assert len(ended) == 1 and ended[0] > 0.5
