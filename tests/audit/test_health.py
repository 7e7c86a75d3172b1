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

from moderation.observability.health import beat_fresh_within

from lab.race_lab import free_port


def test_healthz_answers_without_the_database(client):
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_503_until_a_cluster_has_swept_within_three_intervals_then_200(client, settings):
    from moderation.models import Heartbeat
    from moderation import tasks

    tasks.notifier_heartbeat()  # the notification cluster is up (its own test is below)
    waiting = client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.json()["checks"]["database"] == "ok" and waiting.json()["checks"]["cluster"].startswith("failing")

    tasks.sweep()
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"

    # A sweep one period ago: the cluster is alive (it sweeps twice a period).
    window = beat_fresh_within(settings.MODERATION_SWEEP_EVERY_MIN)
    Heartbeat.objects.filter(name="sweeper").update(beat_at=timezone.now() - window + timedelta(seconds=5))
    assert client.get("/readyz").status_code == 200
    # No sweep for a period and a half-minute: no cluster is doing its work, and /readyz says so
    # within that, not minutes later.
    Heartbeat.objects.filter(name="sweeper").update(beat_at=timezone.now() - window - timedelta(seconds=1))
    assert client.get("/readyz").status_code == 503
    tasks.sweep()
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_is_503_while_the_notification_cluster_is_not_running(client, admin_user):
    from moderation.models import Heartbeat
    from moderation import tasks
    from moderation.services.heartbeat import NOTIFIER_EVERY_MIN, notifier

    tasks.sweep()  # the moderation cluster is up
    client.force_login(admin_user)  # an operator sees the detail
    never = client.get("/readyz")
    assert never.status_code == 503 and never.json()["checks"]["cluster"].startswith("ok")
    assert never.json()["checks"]["notifications"] == (
        f"failing: RuntimeError: the notification cluster ({settings.NOTIFY_CLUSTER}) has not run since ever: "
        "decisions are not delivered to clients")

    tasks.notifier_heartbeat()
    assert client.get("/readyz").status_code == 200

    stopped = timezone.now() - beat_fresh_within(NOTIFIER_EVERY_MIN) - timedelta(seconds=1)
    Heartbeat.objects.filter(name=notifier()).update(beat_at=stopped)
    assert client.get("/readyz").status_code == 503


@pytest.mark.django_db
def test_another_deployments_notification_cluster_does_not_make_this_one_ready(client, settings):
    from moderation import tasks

    tasks.sweep()
    settings.NOTIFY_CLUSTER = "other-notify"  # another Q_NAME on the same database
    tasks.notifier_heartbeat()
    settings.NOTIFY_CLUSTER = "moderation-notify"
    assert client.get("/readyz").status_code == 503


@pytest.mark.django_db
def test_only_the_notification_cluster_runs_its_heartbeat_schedule(monkeypatch):
    """django-q2's own scheduler: the moderation cluster runs the unbound schedules (the
    sweeper), the notification cluster only those bound to its name (its heartbeat)."""
    from django_q import scheduler as q_scheduler
    from django_q.conf import Conf
    from django_q.models import OrmQ, Schedule
    from django_q.scheduler import scheduler

    from moderation.defaults import SWEEP
    from moderation.services.heartbeat import notifier

    monkeypatch.setattr(q_scheduler, "close_old_django_connections", lambda: None)  # the test's transaction
    Schedule.objects.update(next_run=timezone.now() - timedelta(seconds=1))
    Schedule.objects.exclude(name__in=[notifier(), SWEEP]).update(next_run=timezone.now() + timedelta(days=1))

    def queued() -> list[tuple[str, str]]:
        return sorted((q.key, q.task["func"]) for q in OrmQ.objects.all())

    scheduler()  # as the moderation cluster
    assert queued() == [(settings.Q_CLUSTER["name"], "moderation.tasks.sweep")]
    monkeypatch.setattr(Conf, "CLUSTER_NAME", settings.NOTIFY_CLUSTER)
    scheduler()  # as the notification cluster
    assert queued() == [(settings.Q_CLUSTER["name"], "moderation.tasks.sweep"),
                        (settings.NOTIFY_CLUSTER, "moderation.tasks.notifier_heartbeat")]


@pytest.mark.django_db
def test_a_sweep_binds_the_heartbeat_schedule_of_a_renamed_deployment_without_a_migrate(settings):
    from django_q.models import Schedule

    from moderation import tasks
    from moderation.services.heartbeat import notifier

    settings.NOTIFY_CLUSTER = "renamed-notify"  # Q_NAME changed; no migrate since
    assert not Schedule.objects.filter(cluster="renamed-notify").exists()
    tasks.sweep()
    schedule = Schedule.objects.get(cluster="renamed-notify", func="moderation.tasks.notifier_heartbeat")
    # The statements' schedule is the notification cluster's too (docs/transparency.md).
    assert Schedule.objects.filter(cluster="renamed-notify", func="moderation.tasks.statements_submit").count() == 1
    assert (schedule.name, schedule.func, schedule.minutes) == (notifier(), "moderation.tasks.notifier_heartbeat", 1)
    tasks.sweep()  # once bound, a sweep only reads it
    assert Schedule.objects.filter(func="moderation.tasks.notifier_heartbeat", cluster="renamed-notify").count() == 1


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
        assert checks == {"database": "failing", "broker": "not checked", "cluster": "not checked",
                          "notifications": "not checked"}  # no detail
        detailed = httpx.get(f"http://127.0.0.1:{web_port}/readyz", headers={"Authorization": "Bearer probe-token"})
        assert detailed.json()["checks"]["database"].startswith("failing: OperationalError")
        assert httpx.get(f"http://127.0.0.1:{web_port}/healthz").status_code == 200
    finally:
        server.terminate()
        server.wait(10)
