"""Heartbeats of the periodic jobs: the proof a cluster ran them, read by /readyz."""

from __future__ import annotations

from django.utils import timezone

from audit.models import Heartbeat

SWEEPER = "sweeper"


def heartbeat_beat(*, name: str, detail: str = "") -> None:
    """Record that the job `name` just completed: one upsert (INSERT ... ON CONFLICT DO UPDATE),
    so sweeps on several clusters at once each simply overwrite the time."""
    Heartbeat.objects.bulk_create(
        [Heartbeat(name=name, beat_at=timezone.now(), detail=detail[:300])],
        update_conflicts=True, unique_fields=["name"], update_fields=["beat_at", "detail"],
    )
