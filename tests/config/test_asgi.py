"""config/asgi.py: Django sees a request only once its whole body has arrived, within the
deadline and its path's size limit (otherwise the client gets 408 or 413 and Django nothing; a
refused body is read to its end first, so that the client sees the 413); each
response is closed once sent (Django's request_finished), in one message when small and a chunk
at a time when large; a request that runs too long ends its worker (docs/operations.md, "Slow
clients")."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.conf import global_settings
from django.core.signals import request_finished

from config.asgi import OTHER_MAX_BODY_BYTES, BufferedRequest, Watched, WsgiThread, application, body_limit
from moderation.admin.term_lists import MAX_UPLOAD_BYTES

SCOPE = {"type": "http", "method": "POST", "path": "/api/v1/callbacks/webhook/", "headers": []}


class App:
    def __init__(self):
        self.calls = []

    async def __call__(self, scope, receive, send):
        self.calls.append([await receive(), await receive()])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def serve(messages, *, scope=SCOPE, max_bytes=10, timeout_s=1.0, pause_s=0.0, drain_bytes=0, unread=None):
    """Run the middleware on `messages` (each after `pause_s`); returns (app, what it sent).
    `unread`, a list, gets how many messages were still unread at each send."""
    app, sent, queue = App(), [], list(messages)

    async def receive():
        await asyncio.sleep(pause_s)
        return queue.pop(0) if queue else await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)
        if unread is not None:
            unread.append(len(queue))

    middleware = BufferedRequest(app, body_limit=lambda scope: max_bytes, timeout_s=timeout_s, drain_bytes=drain_bytes)
    asyncio.run(middleware(scope, receive, send))
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


def test_a_refused_body_is_read_to_its_end_before_the_413_is_sent():
    """(Python's http.client writes its whole body before it reads: a connection closed under it
    is a broken pipe, never the 413. tests/e2e/test_web_server.py sends one to the real server.)"""
    unread = []
    app, sent = serve([chunk(b"123456", True), chunk(b"78901", True), chunk(b"2" * 30, False)],
                      drain_bytes=100, unread=unread)

    assert app.calls == [] and sent[0]["status"] == 413 and unread == [0, 0]


def test_a_declared_length_over_the_limit_is_read_and_dropped_before_the_413():
    unread = []
    app, sent = serve([chunk(b"x" * 20, True), chunk(b"x" * 20, False)], drain_bytes=100, unread=unread,
                      scope={**SCOPE, "headers": [(b"content-length", b"40")]})

    assert app.calls == [] and sent[0]["status"] == 413 and unread == [0, 0]


@pytest.mark.parametrize("headers", [
    [(b"content-length", b"101")],  # more than is ever drained: refused unread, the connection closes
    [(b"content-length", b"40"), (b"expect", b"100-continue")],  # waits for a go-ahead it never gets
])
def test_a_body_past_the_drain_bound_or_not_yet_sent_is_not_waited_for(headers):
    unread = []
    app, sent = serve([chunk(b"x" * 20, True), chunk(b"x" * 20, False)], drain_bytes=100, unread=unread,
                      scope={**SCOPE, "headers": headers})

    assert sent[0]["status"] == 413 and unread == [2, 2]


def test_a_refused_body_that_stops_arriving_is_answered_at_the_request_deadline():
    app, sent = serve([chunk(b"x" * 20, True)], drain_bytes=100, timeout_s=0.3)

    assert sent[0]["status"] == 413


def http_scope(method: str, path: str, cookie: str = "") -> dict:
    return {"type": "http", "method": method, "path": path, "headers": [(b"cookie", cookie.encode())] if cookie else []}


@pytest.mark.parametrize("method, path, limit", [
    ("POST", "/api/v1/reviews/", "SUBMISSION_MAX_BODY_BYTES"),
    ("POST", "/api/v1/callbacks/webhook/", "CALLBACK_MAX_BYTES"),
    ("POST", "/api/v1/appeals/", "API_MAX_BODY_BYTES"),
    ("GET", "/api/v1/reviews/", "API_MAX_BODY_BYTES"),
])
def test_each_api_path_takes_its_own_bound(settings, method, path, limit):
    assert body_limit(http_scope(method, path)) == getattr(settings, limit)


@pytest.mark.parametrize("method, path, cookie", [
    ("POST", "/healthz", "sessionid=abc"),
    ("POST", "/readyz", ""),
    ("POST", "/metrics", ""),
    ("POST", "/admin/login/", "sessionid=abc"),
    ("POST", "/admin/moderation/moderationpolicy/term-lists/", ""),  # no session: only the login is open
    ("POST", "/admin/moderation/moderationpolicy/term-lists/", "xsessionid=abc"),
    ("POST", "/static/admin/css/base.css", ""),
])
def test_every_other_path_takes_a_few_form_fields(method, path, cookie):
    assert body_limit(http_scope(method, path, cookie)) == OTHER_MAX_BODY_BYTES


def test_a_signed_in_admin_form_takes_djangos_form_fields_and_a_term_list_file(settings):
    scope = http_scope("POST", "/admin/moderation/moderationpolicy/term-lists/", "csrftoken=x; sessionid=abc")

    assert body_limit(scope) == settings.ADMIN_MAX_BODY_BYTES
    assert body_limit(scope) > global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + MAX_UPLOAD_BYTES + OTHER_MAX_BODY_BYTES


def test_a_body_refused_for_being_a_little_over_the_largest_bound_is_still_drained(settings):
    assert settings.REQUEST_MAX_BODY_BYTES == settings.SUBMISSION_MAX_BODY_BYTES
    assert application.drain_bytes == 2 * settings.REQUEST_MAX_BODY_BYTES


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


GET = {"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": [], "http_version": "1.1",
       "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5)}


def run_wsgi(wsgi_app, *, watch=None, scope=None, body=b"", whole_bytes=1 << 20):
    """Serve one request through BufferedRequest(WsgiThread(...)) as config/asgi.py does; returns
    what was sent."""
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    app = BufferedRequest(WsgiThread(wsgi_app, whole_bytes=whole_bytes), body_limit=lambda scope: 1 << 20,
                          timeout_s=1, drain_bytes=0, watch=watch or (lambda: None))
    asyncio.run(app(scope or GET, receive, send))
    return sent


def test_a_response_is_closed_once_sent_also_when_cut_at_its_content_length():
    """(Django sends request_finished from close().)"""
    responses = []

    def wsgi_app(environ, start_response):
        start_response("200 OK", [("Content-Length", "2")])
        responses.append(Response([b"ok", b"and more than announced"]))
        return responses[-1]

    sent = run_wsgi(Watched(wsgi_app, timeout_s=60))

    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"ok" and not sent[-1].get("more_body")
    assert responses[0].closed


def test_a_small_response_is_sent_whole_from_the_event_loop_with_what_the_application_said():
    seen = []

    def wsgi_app(environ, start_response):
        seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], environ["QUERY_STRING"],
                     environ["CONTENT_TYPE"], environ["HTTP_X_TWICE"], environ["wsgi.input"].read()))
        start_response("201 Created", [("Content-Type", "application/json"), ("X-Request-ID", "abc")])
        return [b'{"a"', b": 1}"]

    scope = {**GET, "method": "POST", "path": "/api/v1/reviews/", "query_string": b"x=1",
             "headers": [(b"content-type", b"application/json"), (b"x-twice", b"1"), (b"x-twice", b"2"),
                         (b"content_type", b"text/html")]}  # an underscore is no content-type
    sent = run_wsgi(wsgi_app, scope=scope, body=b'{"text": "hi"}')

    assert seen == [("POST", "/api/v1/reviews/", "x=1", "application/json", "1,2", b'{"text": "hi"}')]
    assert sent == [
        {"type": "http.response.start", "status": 201,
         "headers": [(b"content-type", b"application/json"), (b"x-request-id", b"abc")]},
        {"type": "http.response.body", "body": b'{"a": 1}'},
    ]


def test_a_large_response_is_streamed_a_chunk_at_a_time_and_closed():
    produced, responses = [], []

    def chunks():
        for n in range(5):
            produced.append(n)
            yield bytes([65 + n]) * 4

    def wsgi_app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        responses.append(Response(chunks()))
        return responses[-1]

    sent = run_wsgi(wsgi_app, whole_bytes=6)

    assert sent[0]["status"] == 200
    assert [m["body"] for m in sent[1:]] == [b"AAAA", b"BBBB", b"CCCC", b"DDDD", b"EEEE", b""]
    assert [m.get("more_body", False) for m in sent[1:]] == [True] * 5 + [False]
    assert responses[0].closed


def test_every_request_runs_on_the_one_thread_of_the_worker():
    import threading

    threads = []

    def wsgi_app(environ, start_response):
        threads.append(threading.get_ident())
        start_response("200 OK", [])
        return [b""]

    app = WsgiThread(wsgi_app)

    async def both():
        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            pass

        await asyncio.gather(*(app(GET, receive, send) for _ in range(4)))

    asyncio.run(both())
    assert len(threads) == 4 and len(set(threads)) == 1 and threading.get_ident() not in threads


def test_django_finishes_each_request_it_serves():
    finished = []

    def receiver(sender, **kwargs):
        finished.append(sender)

    request_finished.connect(receiver)
    try:
        sent = run_wsgi(application.app.app.app, scope={
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
