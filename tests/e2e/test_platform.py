"""End to end with real processes: gunicorn, a django-q2 cluster (ORM or Redis broker), the
local model, and HTTP in between."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from django.conf import settings

from moderation import services
from lab.race_lab import database_url, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def redis_reachable() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()[0]


@pytest.fixture(params=["orm", "redis"])
def platform(request):
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_NAME": f"e2e-{uuid.uuid4().hex[:8]}",
        "Q_WORKERS": "2",
    }
    if request.param == "redis":
        if not redis_reachable():
            pytest.skip(f"no Redis at {REDIS_URL}: the Redis broker variant needs one")
        env["REDIS_URL"] = REDIS_URL
    port = free_port()
    spawn = lambda *args: subprocess.Popen(  # noqa: E731
        [sys.executable, *args], cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    processes = {
        "web": spawn("-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2"),
        "cluster": spawn("manage.py", "qcluster"),
    }
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base_url}/api/v1/reviews/", timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline or processes["web"].poll() is not None:
                pytest.fail("the web server did not start:\n" + stop(processes["web"]))
            time.sleep(0.2)
    yield base_url, processes
    for name, process in processes.items():
        output = stop(process)
        print(f"--- {name} ---\n{output}")  # shown when the test fails


def wait_for_final(http: httpx.Client, review_id: str, processes: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [name for name, p in processes.items() if p.poll() is not None]
        assert not dead, f"{dead} exited"
        data = http.get(f"/api/v1/reviews/{review_id}/").json()
        if data["status"] in ("approved", "rejected", "manual_review"):
            return data
        time.sleep(0.2)
    raise AssertionError(f"review {review_id} still {data['status']} after {timeout}s")


def test_submissions_over_http_are_moderated_by_the_cluster_with_the_local_model(platform):
    base_url, processes = platform
    _, token = services.api_client_create(name="e2e")
    http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    texts = {
        "friendly": "Thank you so much for the help yesterday, it was great.",
        "abusive": "shut up you worthless fucking idiot",
    }

    created = {
        name: http.post("/api/v1/reviews/", json={"external_id": name, "content_type": "text", "text": text})
        for name, text in texts.items()
    }
    assert {r.status_code for r in created.values()} == {201}

    final = {name: wait_for_final(http, r.json()["id"], processes) for name, r in created.items()}
    assert final["friendly"]["status"] == "approved"
    assert final["abusive"]["status"] == "rejected"
    decision = final["abusive"]["decision"]
    assert decision["model"] == "local-multilingual-2"
    assert decision["policy_version"] == 1 and decision["source"] == "provider"
