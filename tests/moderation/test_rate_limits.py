"""moderation/web/throttles.py: a rate limit is counted in PostgreSQL, so it holds across web
workers (processes with connections of their own), concurrent requests included; a refused
caller is refused from this process's memory until its wait is over, and never longer."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from moderation.models import RateCount
from moderation.privacy import retention
from lab.race_lab import database_url
from tests.helpers import collide
from moderation.web.throttles import RefusalMemo, rate_hit, refusal_wait, refusals

URL = "/api/v1/reviews/"


class TestTheWait:
    def test_a_full_current_window_waits_for_the_next_and_for_its_weight_to_fall(self):
        # 10 of 10 counted, a quarter of the window gone: three quarters to the next window,
        # then until 10 * (1 - x) + 1 <= 10, x = 0.1.
        assert refusal_wait(previous=0, current=10, limit=10, period=60, at=60 * 1000.25) == pytest.approx(0.85 * 60)

    def test_a_previous_window_weighs_less_as_the_current_one_goes_by(self):
        # 8 before, 2 now, limit 9: 8 * (1 - x) + 2 + 1 <= 9 from x = 0.25; at x = 0.1, 0.15 of a period.
        assert refusal_wait(previous=8, current=2, limit=9, period=100, at=100 * 7.1) == pytest.approx(15)

    def test_a_limit_of_nothing_waits_a_period_at_a_time(self):
        assert refusal_wait(previous=0, current=0, limit=0, period=60, at=1.0) == 60


@pytest.mark.django_db
class TestTheSharedCount:
    def test_a_limit_lets_that_many_through_then_says_how_long_to_wait(self, fresh_throttles):
        waits = [rate_hit(key="t", limit=5, period=60) for _ in range(7)]

        assert waits[:5] == [0.0] * 5
        # (Within two periods: the count just before a window's end weighs on the next one.)
        assert all(0 < wait <= 2 * 60 for wait in waits[5:])
        assert RateCount.objects.get(key="t").current == 5  # refusals are not counted

    def test_each_key_counts_alone(self, fresh_throttles):
        [rate_hit(key="a", limit=2, period=60) for _ in range(3)]

        assert rate_hit(key="b", limit=2, period=60) == 0.0

    def test_a_count_moves_on_when_its_period_has_passed(self, fresh_throttles):
        assert [rate_hit(key="s", limit=2, period=0.5) for _ in range(3)].count(0.0) == 2
        time.sleep(1.05)  # two windows later: nothing counted is left

        assert rate_hit(key="s", limit=2, period=0.5) == 0.0


def hits_from_another_process(key: str, n: int, limit: int) -> list[float]:
    """`n` counts of `key` from a Python process of its own (another web worker), on the test
    database."""
    url = database_url()  # (a TCP address, or the embedded server's socket directory)
    program = ("import json, django; django.setup()\n"
               "from moderation.web.throttles import rate_hit\n"
               f"print(json.dumps([rate_hit(key={key!r}, limit={limit}, period=60) for _ in range({n})]))")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DATABASE_URL": url}, cwd=os.getcwd())
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_two_web_workers_share_one_limit(fresh_throttles):
    """(Counted per process, as it was, each worker let the whole limit through: twice it for two.)"""
    first = hits_from_another_process("w", 6, limit=10)
    second = hits_from_another_process("w", 6, limit=10)

    assert first == [0.0] * 6
    assert second[:4] == [0.0] * 4 and all(wait > 0 for wait in second[4:])


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_of_one_caller_let_exactly_the_limit_through(fresh_throttles):
    waits = [wait for mine in collide(8, lambda _: [rate_hit(key="c", limit=20, period=60) for _ in range(5)])
             for wait in mine]

    assert len(waits) == 40 and waits.count(0.0) == 20


@pytest.mark.django_db
class TestTheApi:
    def test_a_refused_client_is_refused_by_every_worker_not_only_the_one_that_counted(
            self, http, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "3/min"
        assert [http.get(URL).status_code for _ in range(4)] == [200, 200, 200, 429]
        refusals.forget()  # another worker: it remembers nothing

        refused = http.get(URL)
        assert refused.status_code == 429 and int(refused["Retry-After"]) > 0

    def test_a_refused_client_costs_no_count_until_its_wait_is_over(self, http, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "2/min"
        [http.get(URL) for _ in range(3)]

        with CaptureQueriesContext(connection) as queries:
            assert http.get(URL).status_code == 429
        assert not [q for q in queries.captured_queries if "moderation_ratecount" in q["sql"]]

    def test_a_remembered_refusal_ends_with_its_wait(self, http, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "1/s"
        assert [http.get(URL).status_code for _ in range(2)] == [200, 429]
        time.sleep(2.05)

        assert http.get(URL).status_code == 200

    def test_a_changed_rate_counts_afresh(self, http, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "1/min"
        assert [http.get(URL).status_code for _ in range(2)] == [200, 429]
        settings.THROTTLE_CLIENT_RATE = "5/min"

        assert http.get(URL).status_code == 200

    def test_the_callback_limit_is_shared_too(self, settings, fresh_throttles):
        settings.THROTTLE_CALLBACK_RATE = "2/min"
        client = APIClient()
        answers = [client.post("/api/v1/callbacks/webhook/", {}, format="json").status_code for _ in range(2)]
        refusals.forget()

        assert 429 not in answers
        assert client.post("/api/v1/callbacks/webhook/", {}, format="json").status_code == 429


def test_the_memo_stays_small():
    memo = RefusalMemo(size=3)
    for key in "abc":
        memo.refuse(key, 0.0)  # waits already over: dropped first
    memo.refuse("d", 60)
    memo.refuse("e", 60)

    assert memo.wait("a") == 0.0 and memo.wait("d") > 59 and memo.wait("e") > 59


@pytest.mark.django_db
def test_counts_untouched_for_two_days_are_pruned(fresh_throttles):
    from datetime import timedelta

    from django.utils import timezone

    rate_hit(key="old", limit=5, period=60)
    rate_hit(key="new", limit=5, period=60)
    RateCount.objects.filter(key="old").update(touched_at=timezone.now() - timedelta(hours=49))

    assert retention.prune(for_real=True)["rate-limit counts"] == 1
    assert list(RateCount.objects.values_list("key", flat=True)) == ["new"]


def serve_asgi(scope_headers: list, path: str = URL, method: str = "POST", body: bytes = b"{}") -> tuple[int, dict, bytes]:
    """One request through config/asgi.py's application, as the web server hands it over."""
    import asyncio

    from config.asgi import application

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "http_version": "1.1", "scheme": "http", "server": ("testserver", 80),
             "client": ("127.0.0.1", 5000),
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode()), *scope_headers]}
    messages, sent = [{"type": "http.request", "body": body, "more_body": False}], []

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.django_db(transaction=True)
class TestRefusedBeforeDjango:
    def test_a_remembered_refusal_is_answered_by_the_web_server_as_django_answers_it(
            self, api_client, settings, fresh_throttles, monkeypatch):
        settings.THROTTLE_CLIENT_RATE = "2/min"
        bearer = (b"authorization", f"Bearer {api_client.token}".encode())
        statuses = [serve_asgi([bearer])[0] for _ in range(2)]  # (400: an empty submission)
        django_status, django_headers, django_body = serve_asgi([bearer])  # the count refuses: Django answers
        from config import asgi

        monkeypatch.setattr(asgi.application.app.app, "app", None)  # Django is out of reach from here on
        status, headers, body = serve_asgi([bearer, (b"x-request-id", b"req-1")])

        assert statuses == [400, 400] and django_status == status == 429
        assert json.loads(body)["error"] == json.loads(django_body)["error"] == "throttled"
        assert 0 < int(headers["retry-after"]) <= int(django_headers["retry-after"])
        assert headers["x-request-id"] == "req-1"
        assert {k: v for k, v in headers.items() if k not in ("retry-after", "x-request-id", "content-length")} == \
            {k: v for k, v in django_headers.items() if k not in ("retry-after", "x-request-id", "content-length", "allow")}

    def test_only_the_refused_clients_requests_are_answered_from_memory(
            self, api_client, other_client, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "1/min"
        mine = (b"authorization", f"Bearer {api_client.token}".encode())
        theirs = (b"authorization", f"bearer  {other_client.token}".encode())
        serve_asgi([mine], method="GET")
        assert serve_asgi([mine], method="GET")[0] == 429

        assert serve_asgi([theirs], method="GET")[0] == 200
        assert serve_asgi([mine], path="/api/v1/callbacks/webhook/")[0] != 429  # a callback is counted apart
        assert serve_asgi([mine], path="/api/schema/", method="GET")[0] == 200  # public: no client counted


@pytest.mark.parametrize("wait, hold, answer", [(10.0, 0.3, 429), (0.2, 5.0, 200), (10.0, 0.0, 429)])
def test_a_remembered_refusal_is_held_until_the_client_could_retry_at_most_the_hold(wait, hold, answer):
    """(A client sending again the moment it is answered then sends one request a connection per
    hold, not hundreds a second; one whose wait ends within the hold is then served.)"""
    import asyncio

    from config.asgi import RefusedFromMemory

    refusals.refuse("throttle_client_client-held:5/60", wait, token="tok-held")
    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": URL, "headers": [(b"authorization", b"Bearer tok-held")]}
    began = time.monotonic()
    try:
        asyncio.run(RefusedFromMemory(app, hold_s=hold)(scope, None, send))
    finally:
        refusals.forget()
    took = time.monotonic() - began

    held = min(wait, hold)
    assert sent[0]["status"] == answer and held <= took < held + 0.5
    if answer == 429:
        assert int(dict(sent[0]["headers"])[b"retry-after"]) == math.ceil(wait - took)
