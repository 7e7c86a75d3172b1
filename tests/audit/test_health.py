from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from lab.race_lab import free_port


def test_healthz_answers_without_the_database(client):
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_503_until_a_cluster_has_swept_within_three_intervals_then_200(client, settings):
    from audit.models import Heartbeat
    from moderation import tasks

    waiting = client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.json()["checks"]["database"] == "ok" and waiting.json()["checks"]["cluster"].startswith("failing")

    tasks.sweep()
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"

    # The last sweep three intervals (and a minute) ago: no cluster is doing its work.
    long_ago = timezone.now() - timedelta(minutes=3 * settings.MODERATION_SWEEP_EVERY_MIN + 2)
    Heartbeat.objects.filter(name="sweeper").update(beat_at=long_ago)
    assert client.get("/readyz").status_code == 503
    tasks.sweep()
    assert client.get("/readyz").status_code == 200


def test_readyz_names_the_database_when_it_is_unreachable():
    closed_port, web_port = free_port(), free_port()  # nothing listens on the first
    env = {**os.environ, "DATABASE_URL": f"postgres://nobody@127.0.0.1:{closed_port}/nothing", "METRICS_TOKEN": "probe-token"}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{web_port}"],
                              cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{web_port}/readyz", timeout=10)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert response.status_code == 503
        checks = response.json()["checks"]
        assert checks == {"database": "failing", "broker": "not checked", "cluster": "not checked"}  # no detail
        detailed = httpx.get(f"http://127.0.0.1:{web_port}/readyz", headers={"Authorization": "Bearer probe-token"})
        assert detailed.json()["checks"]["database"].startswith("failing: OperationalError")
        assert httpx.get(f"http://127.0.0.1:{web_port}/healthz").status_code == 200
    finally:
        server.terminate()
        server.wait(10)
