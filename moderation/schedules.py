"""The django-q2 schedules the pipeline relies on, created or updated after every migrate."""

from __future__ import annotations

SWEEP = "moderation.sweep"


def ensure_schedules(**kwargs) -> None:
    from django.conf import settings
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SWEEP,
        defaults={
            "func": "moderation.tasks.sweep",
            "schedule_type": Schedule.MINUTES,
            "minutes": settings.MODERATION_SWEEP_EVERY_MIN,
            "repeats": -1,
        },
    )
