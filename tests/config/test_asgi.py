"""config/asgi.py's BufferedRequest: Django sees a request only once its whole body has arrived,
within the deadline and the size limit; otherwise the client gets 408 or 413 and Django nothing
(docs/operations.md, "Slow clients")."""

from __future__ import annotations

import asyncio
import json

from config.asgi import BufferedRequest

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
