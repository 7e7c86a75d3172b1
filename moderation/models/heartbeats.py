"""When each periodic job last completed: the proof a cluster is doing its work."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """When a periodic job last completed, one row per job, overwritten each time.

    django-q2 keeps no successful results here (settings: `save_limit` -1, docs/design.md, "Known
    pitfalls"), so /readyz reads the sweeper's heartbeat to know a cluster is doing its work.
    Written by moderation/services/heartbeat.py. The table keeps the name it had in the audit app
    (migration 0014 moved the model, not the rows).
    """

    name = models.CharField(max_length=64, unique=True)
    beat_at = models.DateTimeField()
    detail = models.CharField(max_length=300, blank=True)

    class Meta:
        db_table = "audit_heartbeat"

    def __str__(self) -> str:
        return f"{self.name} at {self.beat_at.isoformat()}"
