"""The callback inbox: every provider callback stored raw before anything acts on it."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from moderation.models import ResultOutcome


class ProviderCallback(models.Model):
    """One callback event, unique per (provider, provider_event_id) (docs/design.md, invariant 5).

    `payload_json` is the body exactly as received; a re-delivery of the same event increments
    `duplicate_count` and changes nothing else. Rows are kept well past the provider's
    re-delivery horizon: a shorter de-duplication window would let a late duplicate through.
    """

    provider = models.CharField(max_length=32)
    provider_event_id = models.CharField(max_length=255)
    event_type = models.CharField(max_length=64, blank=True)
    idempotency_key = models.UUIDField(null=True, blank=True, db_index=True)
    provider_request_id = models.CharField(max_length=255, blank=True)
    payload_json = models.TextField(help_text="The raw body, verbatim.")
    headers = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=ResultOutcome.choices, blank=True)
    outcome_detail = models.TextField(blank=True)
    duplicate_count = models.PositiveIntegerField(default=0)
    # Processing that failed (an exception, not an outcome): counted, so the sweeper parks a
    # callback that keeps failing instead of retrying it for ever ahead of the others.
    process_failures = models.PositiveSmallIntegerField(default=0)
    process_error = models.TextField(blank=True)
    last_duplicate_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "provider_event_id"], name="callback_provider_event_uniq"),
        ]
        indexes = [
            models.Index(fields=["provider_event_id"], name="callback_event_id_idx"),  # admin search
            # The sweeper's scan: stored but not yet processed.
            models.Index(fields=["received_at"], name="callback_unprocessed_idx", condition=Q(processed_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.provider_event_id} ({self.outcome or 'unprocessed'})"
