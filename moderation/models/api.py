"""What the API keeps for its clients beyond reviews: idempotent request records."""

from __future__ import annotations

from django.db import models


class IdempotencyRecord(models.Model):
    """The first response to a request sent with an `Idempotency-Key` (per client), replayed to
    every retry with the same key and body. Kept for IDEMPOTENCY_TTL_H hours."""

    client = models.ForeignKey(  # indexed by the unique constraint that leads with it (Meta)
        "moderation.ApiClient", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the canonical request body.")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["client", "key"], name="idempotency_client_key_uniq")]

    def __str__(self) -> str:
        return f"{self.client_id}:{self.key}"
