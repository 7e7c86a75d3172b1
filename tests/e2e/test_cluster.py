"""End to end with real processes: the API over HTTP, a django-q2 cluster, the local model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from moderation import services

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def subprocess_database_url() -> str:
    db = connection.settings_dict
    host = db["HOST"] or ""
    if host.startswith("/"):  # a unix socket (the embedded server)
        return f"postgresql://{db['USER']}:{db['PASSWORD'] or ''}@/{db['NAME']}?host={host}"
    return f"postgresql://{db['USER']}:{db['PASSWORD'] or ''}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def cluster():
    """`manage.py qcluster` against the test database, stopped with SIGTERM afterwards."""
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "Q_WORKERS": "2"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield process
    process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    print(output)  # shown by pytest when the test fails


def wait_for_final(http: httpx.Client, review_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = http.get(f"/api/v1/reviews/{review_id}/").json()
        if data["status"] in ("approved", "rejected", "manual_review"):
            return data
        time.sleep(0.2)
    raise AssertionError(f"review {review_id} still {data['status']} after {timeout}s")


def test_submissions_over_http_are_moderated_by_the_cluster_with_the_local_model(live_server, cluster):
    _, token = services.api_client_create(name="e2e")
    http = httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    texts = {
        "friendly": "Thank you so much for the help yesterday, it was great.",
        "abusive": "shut up you worthless fucking idiot",
    }

    created = {
        name: http.post("/api/v1/reviews/", json={"external_id": name, "content_type": "text", "text": text})
        for name, text in texts.items()
    }
    assert {r.status_code for r in created.values()} == {201}

    final = {name: wait_for_final(http, r.json()["id"]) for name, r in created.items()}
    assert final["friendly"]["status"] == "approved"
    assert final["abusive"]["status"] == "rejected"
    decision = final["abusive"]["decision"]
    assert decision["model"].startswith("alt-profanity-check")
    assert decision["policy_version"] == 1 and decision["source"] == "provider"
    assert cluster.poll() is None, "the cluster died"
