"""One client's misbehaving webhook receivers cannot slow another client's moderation.

Real processes (gunicorn, the moderation cluster, the notification cluster, the local model),
real receivers on loopback: client A has one receiver that trickles its answer a byte every
4 s and one that never answers. Client B's 20 reviews, submitted at once, must be decided with
a p95 no worse than twice its baseline (measured the same way just before, with A quiet). The
figures are printed (`pytest -s`).
"""

from __future__ import annotations

import math
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from lab.race_lab import database_url, free_port, start_platform, stop
from lab.simulator import WebhookReceiver
from moderation.models import FINAL_STATUSES, ContentReview
from moderation.services import api_client_create

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Below this a p95 is noise on a shared two-core machine: "twice the baseline" is measured
# against at least this much.
BASELINE_FLOOR_S = 1.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)]


def submit_and_wait(base: str, token: str, count: int, label: str, timeout_s: float = 240) -> list[float]:
    """Submit `count` reviews at once; seconds from each submission to its decision."""
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def one(i: int) -> str:
        body = {"external_id": f"{label}-{i}-{uuid.uuid4().hex[:6]}", "content_type": "text",
                "text": "thanks, see you at the meeting tomorrow"}
        return http.post("/api/v1/reviews/", json=body).json()["id"]

    with ThreadPoolExecutor(max_workers=count) as pool:
        ids = list(pool.map(one, range(count)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not ContentReview.objects.filter(pk__in=ids).exclude(status__in=FINAL_STATUSES).exists():
            break
        time.sleep(0.2)
    rows = ContentReview.objects.filter(pk__in=ids).values_list("created_at", "completed_at")
    return [(done - created).total_seconds() if done else timeout_s for created, done in rows]


def test_a_trickling_and_a_hanging_receiver_of_one_client_do_not_delay_another_clients_decisions():
    trickle, hang, healthy = WebhookReceiver(mode="trickle", trickle_s=4.0), WebhookReceiver(mode="hang"), WebhookReceiver()
    port = free_port()
    env = {
        **os.environ, "DATABASE_URL": database_url(), "Q_NAME": f"e2e-{uuid.uuid4().hex[:8]}", "Q_WORKERS": "2",
        "MODERATION_PROVIDER": "local", "WEBHOOK_ALLOW_PRIVATE": "1", "LOG_LEVEL": "WARNING",
        "THROTTLE_CLIENT_RATE": "100000/min", "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
    }
    processes = start_platform(env, port, web_workers=2, clusters=1)
    base = f"http://127.0.0.1:{port}"
    try:
        _, token_b = api_client_create(name=f"b-{uuid.uuid4().hex[:6]}", webhook_url=healthy.url)
        _, token_trickle = api_client_create(name=f"a-trickle-{uuid.uuid4().hex[:6]}", webhook_url=trickle.url)
        _, token_hang = api_client_create(name=f"a-hang-{uuid.uuid4().hex[:6]}", webhook_url=hang.url)
        submit_and_wait(base, token_b, 2, "warm-up")  # the model loads in each worker
        baseline = submit_and_wait(base, token_b, 20, "baseline")
        submit_and_wait(base, token_trickle, 4, "a-trickle")
        submit_and_wait(base, token_hang, 20, "a-hang")
        time.sleep(1)  # A's notifications are now being delivered (or held)
        noisy = submit_and_wait(base, token_b, 20, "noisy")
    finally:
        stop(processes.values())
        for receiver in (trickle, hang, healthy):
            receiver.stop()

    figures = {"baseline p50": sorted(baseline)[9], "baseline p95": p95(baseline),
               "with A's receivers p50": sorted(noisy)[9], "with A's receivers p95": p95(noisy),
               "A's deliveries started (trickle, hang)": (len(trickle.received), len(hang.received))}
    print("\nnoisy neighbour, client B's seconds to decision:",
          ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()))
    assert trickle.received and hang.received  # A's receivers were really being called
    assert p95(noisy) <= 2 * max(p95(baseline), BASELINE_FLOOR_S), figures
