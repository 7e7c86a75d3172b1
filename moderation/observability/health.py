"""Liveness and readiness, for load balancers and orchestrators (no auth; the failure detail
only for staff or the metrics token).

/healthz: the process answers. /readyz: it can do its work: the database answers, the job
broker answers, a django-q2 cluster completed a sweep recently (it runs every
MODERATION_SWEEP_EVERY_MIN minutes, on some cluster, and leaves a heartbeat: moderation.Heartbeat),
and the notification cluster beat recently (a schedule bound to it, every minute).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from moderation.models import Heartbeat
from moderation.observability.access import is_operator
from moderation.services.heartbeat import NOTIFIER_EVERY_MIN, SWEEPER, notifier


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def _database() -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 3000")  # a probe never waits long
        cursor.execute("SELECT 1")
    return "ok"


def _broker() -> str:
    if settings.REDIS_URL:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2).ping()
        return "ok (redis)"
    from django_q.models import OrmQ

    waiting = OrmQ.objects.count()
    return f"ok (database, {waiting} queued)"


def beat_fresh_within(every_min: int) -> timedelta:
    """How old a heartbeat beating every `every_min` minutes may be while its cluster is alive: one
    period, and half a minute more for django-q2's scheduler, which looks every 30 s. So a
    cluster that stops working fails /readyz within about one period (the sweeper runs twice a
    period, so a live one is never near it), not after minutes of silence."""
    return timedelta(minutes=every_min, seconds=30)


def _last_beat(name: str, every_min: int):
    """The heartbeat's time (None if it never beat), and whether it is fresh (`beat_fresh_within`)."""
    last = Heartbeat.objects.filter(name=name).values_list("beat_at", flat=True).first()
    fresh = last is not None and last >= timezone.now() - beat_fresh_within(every_min)
    return last, fresh


def _cluster() -> str:
    last, fresh = _last_beat(SWEEPER, settings.MODERATION_SWEEP_EVERY_MIN)
    if not fresh:
        raise RuntimeError(f"no cluster has completed a sweep since {last.isoformat() if last else 'ever'}")
    return f"ok (sweeper ran at {last.isoformat()})"


def _notifications() -> str:
    last, fresh = _last_beat(notifier(), NOTIFIER_EVERY_MIN)
    if not fresh:
        raise RuntimeError(f"the notification cluster ({settings.NOTIFY_CLUSTER}) has not run since "
                           f"{last.isoformat() if last else 'ever'}: decisions are not delivered to clients")
    return f"ok (beat at {last.isoformat()})"


@require_GET
def readyz(request):
    checks, ready = {}, True
    for name, check in (("database", _database), ("broker", _broker), ("cluster", _cluster),
                        ("notifications", _notifications)):
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - every failure is reported, none is raised
            checks[name] = f"failing: {type(exc).__name__}: {exc}".strip()[:300]
            ready = False
            if name == "database":  # the other checks need it
                checks.update(broker="not checked", cluster="not checked", notifications="not checked")
                break
    if not is_operator(request):  # exception texts name hosts and users
        checks = {name: value.split(":", 1)[0].split(" (", 1)[0] for name, value in checks.items()}
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)
