"""What the API keeps for its clients beyond reviews: idempotent request records, and the counts
of the rate limits (moderation/web/throttles.py)."""

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


class RateCount(models.Model):
    """One rate limit's count for one caller (a client, or a provider and an address), shared by
    every web worker: the requests counted in the current window of the limit's period and in the
    one before (moderation/web/throttles.py). An unlogged table (migration 0033): a crash loses
    the counts, which is what forgetting a minute of rate limiting costs."""

    key = models.TextField(primary_key=True)  # a provider name and an address are any length
    window_no = models.BigIntegerField(help_text="Seconds since the epoch, in the limit's periods, rounded down.")
    previous = models.PositiveIntegerField(help_text="Requests counted in the window before window_no.")
    current = models.PositiveIntegerField(help_text="Requests counted in window_no.")
    allowed = models.BooleanField(help_text="Whether the last request was let through.")
    # Not indexed: every request changes it, and an index on it would cost each update its HOT
    # path; the daily prune reads this small table whole.
    touched_at = models.DateTimeField(help_text="The last request's time (the database's clock).")

    def __str__(self) -> str:
        return f"{self.key}: {self.previous}+{self.current}"
