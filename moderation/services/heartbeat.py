"""Heartbeats of the periodic jobs: the proof a cluster ran them, read by /readyz."""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from moderation.models import Heartbeat

SWEEPER = "sweeper"
# The notification cluster's own proof of life. django-q2 runs a schedule bound to a cluster's
# name only on that cluster, so a schedule bound to this deployment's NOTIFY_CLUSTER beats only
# while a notification cluster of this deployment runs.
NOTIFIER_EVERY_MIN = 1


_SCHEDULES_LOCK = 0x6D6F6473  # advisory lock id: one binder of the notification cluster's schedules at a time


def notifier() -> str:
    """The heartbeat (and schedule) name of this deployment's notification cluster: deployments
    that share a database (by Q_NAME) each have their own."""
    return f"notify:{settings.NOTIFY_CLUSTER}"[:64]


def notifier_schedule_ensure() -> None:
    """Bind the notification cluster's schedules (its heartbeat, the statements) to this deployment's cluster. Called
    after every migrate and by every sweep (one read when it exists), so a deployment whose
    Q_NAME changed is bound without a migrate."""
    from django_q.models import Schedule

    names = (notifier(), statements_schedule(), quality_schedule())
    if Schedule.objects.filter(name__in=names, cluster=settings.NOTIFY_CLUSTER).count() == len(names):
        return
    with transaction.atomic():
        # Every cluster's sweep may get here at once the first time (a new Q_NAME): the names are
        # not unique in django-q2's table, so without the lock two sweeps would each create one,
        # and every later update_or_create would fail on the pair. A pair made before is merged.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SCHEDULES_LOCK])
        for name in names:
            extra = list(Schedule.objects.filter(name=name).order_by("pk").values_list("pk", flat=True)[1:])
            Schedule.objects.filter(pk__in=extra).delete()
        _schedules_bind(names)


def _schedules_bind(names) -> None:
    from django_q.models import Schedule

    # The heartbeat, and the statements of reasons to the DSA Transparency Database
    # (moderation.tasks.statements_submit): outbound work, the notification cluster's. And the quality
    # minute (moderation.tasks.quality_minute: the anomaly alarms' counts, the shadow runs): it never
    # takes a worker from the moderation cluster, which makes the live decisions.
    funcs = ("moderation.tasks.notifier_heartbeat", "moderation.tasks.statements_submit", "moderation.tasks.quality_minute")
    for name, func in zip(names, funcs, strict=True):
        every = 1 if func.endswith("quality_minute") else NOTIFIER_EVERY_MIN
        beat = {"func": func, "schedule_type": Schedule.MINUTES, "minutes": every, "repeats": -1,
                "cluster": settings.NOTIFY_CLUSTER}
        Schedule.objects.update_or_create(name=name, defaults=beat, create_defaults={**beat, "next_run": timezone.now()})


def quality_schedule() -> str:
    """The name of this deployment's schedule of the quality minute (moderation/quality/)."""
    return f"quality:{settings.NOTIFY_CLUSTER}"[:64]


def statements_schedule() -> str:
    """The name of this deployment's schedule that sends statements of reasons."""
    return f"statements:{settings.NOTIFY_CLUSTER}"[:64]


def heartbeat_beat(*, name: str, detail: str = "") -> None:
    """Record that the job `name` just completed: one upsert (INSERT ... ON CONFLICT DO UPDATE),
    so sweeps on several clusters at once each simply overwrite the time."""
    Heartbeat.objects.bulk_create(
        [Heartbeat(name=name, beat_at=timezone.now(), detail=detail[:300])],
        update_conflicts=True, unique_fields=["name"], update_fields=["beat_at", "detail"],
    )
