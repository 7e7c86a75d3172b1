"""Slow clients cannot take the web tier (docs/operations.md, "Slow clients"): while connections
trickle a header block or a callback body a byte a second, the API and the probes of a platform
started as `make run` starts it answer at once, and each slow connection is let go at its
deadline, a trickled body with 408."""

from __future__ import annotations

import time

import httpx
import pytest

from lab.slowloris import Slowloris
from moderation import services
from tests.e2e.conftest import run_platform

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DEADLINE_S = 3  # REQUEST_HEADER_TIMEOUT_S and REQUEST_BODY_TIMEOUT_S for this platform
SLOW = {"headers": 3, "body": 3}  # more than the platform's 2 web workers, of each kind


def test_slow_clients_do_not_stall_the_api_and_are_let_go_at_their_deadline():
    _, token = services.api_client_create(name="slow-clients")
    timeouts = {"REQUEST_HEADER_TIMEOUT_S": str(DEADLINE_S), "REQUEST_BODY_TIMEOUT_S": str(DEADLINE_S),
                "WEB_CONCURRENCY": "2"}
    with run_platform(**timeouts) as (_, port), Slowloris(port, **SLOW, interval_s=1.0) as slow:
        time.sleep(1.5)  # every slow connection has sent its first bytes
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        # (10 s is far beyond an answer's few milliseconds, and far below the ~30 s that sync
        # workers held by slow clients took to be killed and to answer again.)
        answers = [api.get("/healthz").status_code,
                   api.get("/api/v1/reviews/", headers={"Authorization": f"Bearer {token}"}).status_code]
        opened_at = time.monotonic()
        while len(slow.released()) < len(slow.connections) and time.monotonic() - opened_at < 20:
            time.sleep(0.2)

    assert answers == [200, 200]
    held = {c.kind: round(c.held_s or -1, 1) for c in slow.connections if c.held_s is None or c.held_s > 2 * DEADLINE_S + 2}
    assert held == {}, f"slow connections still held past their deadline: {held}"
    assert [c.status for c in slow.connections if c.kind == "body"] == [408] * SLOW["body"]
