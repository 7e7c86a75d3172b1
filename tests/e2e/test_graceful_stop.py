"""A cluster stopped the way deploy/systemd's unit stops it (SIGTERM to its master alone,
KillMode=mixed) finishes the tasks it is running, and a new cluster does the rest: a restart
loses no job and cuts no provider call short."""

from __future__ import annotations

import base64
import os
import secrets
import signal
import time
import uuid

import httpx
import pytest

from lab.race_lab import database_url, free_port, spawn, start_platform, stop
from lab.simulator import Faults, ProviderSimulator
from moderation import services
from moderation.invariants import violations
from moderation.models import FINAL_STATUSES, AttemptOutcome, ContentReview, ProviderAttempt

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_cluster_stopped_like_systemd_does_finishes_its_running_tasks_and_loses_no_job():
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    # Every provider answer takes 3 s: tasks are surely running when the stop comes.
    simulator = ProviderSimulator(secret=secret, api_key="k", faults=Faults(timeout_rate=1.0, hold_s=3.0)).start()
    port = free_port()
    env = {
        **os.environ, "DATABASE_URL": database_url(), "MODERATION_PROVIDER": "webhook", "PROVIDER_URL": simulator.url,
        "PROVIDER_API_KEY": "k", "PROVIDER_WEBHOOK_SECRET": secret, "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "Q_NAME": f"stop-{uuid.uuid4().hex[:8]}", "Q_WORKERS": "2", "PROVIDER_TIMEOUT_S": "10",
        "LOG_LEVEL": "WARNING",
    }
    processes = {}
    try:
        processes = start_platform(env, port, web_workers=1, clusters=1)
        _, token = services.api_client_create(name="graceful")
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"})
        ids = [http.post("/api/v1/reviews/", json={"external_id": f"g-{i}", "content_type": "text",
                                                   "text": "see you tomorrow"}).json()["id"] for i in range(6)]
        in_flight = ProviderAttempt.objects.filter(request__review_id__in=ids, outcome=AttemptOutcome.IN_FLIGHT)
        wait_for(lambda: in_flight.exists(), 60, "a provider call under way")
        running = set(in_flight.values_list("pk", flat=True))

        os.kill(processes["cluster-0"].pid, signal.SIGTERM)  # the master alone, as KillMode=mixed does
        processes["cluster-0"].wait(timeout=60)

        # The calls under way when the stop came were finished, not cut short.
        assert set(ProviderAttempt.objects.filter(pk__in=running, outcome=AttemptOutcome.ACCEPTED)
                   .values_list("pk", flat=True)) == running
        processes["cluster-1"] = spawn(env, "manage.py", "qcluster")  # the restart
        reviews = ContentReview.objects.filter(pk__in=ids)
        wait_for(lambda: reviews.filter(status__in=FINAL_STATUSES).count() == len(ids), 120, "every review final")
    finally:
        stop(processes.values())
        simulator.stop()
    assert not ProviderAttempt.objects.filter(request__review_id__in=ids, outcome=AttemptOutcome.ABANDONED).exists()
    assert violations(ids) == []
