"""The audit trail: the append-only transition log and the pipeline's recorded events."""

from __future__ import annotations

from django.db import models


class Actor(models.TextChoices):
    WORKER = "worker", "Worker"
    SYSTEM = "system", "System"
    ADMIN = "admin", "Moderator"
    COMMAND = "command", "Management command"
    API = "api", "API client"
    WEBHOOK = "webhook", "Provider callback"


class ReviewTransition(models.Model):
    """One row per status change of a review, written in the same transaction as the change.

    Append-only: a database trigger (migration 0002) rejects UPDATE and DELETE.
    """

    review = models.ForeignKey(  # indexed by transition_review_idx (review, id)
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="transitions", db_index=False
    )
    from_status = models.CharField(max_length=20)
    to_status = models.CharField(max_length=20)
    cause = models.CharField(max_length=32)
    actor = models.CharField(max_length=16, choices=Actor.choices)
    actor_id = models.CharField(max_length=150, blank=True)
    idempotency_key = models.UUIDField(null=True, blank=True, db_index=True)
    job_id = models.CharField(max_length=64, blank=True)
    attempt_no = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["review", "id"], name="transition_review_idx"),
            # Time in the review queues: the transitions that take a review out of manual_review.
            models.Index(fields=["created_at"], name="transition_left_queue_idx",
                         condition=models.Q(from_status="manual_review")),
        ]

    def __str__(self) -> str:
        return f"{self.review_id}: {self.from_status} -> {self.to_status} ({self.cause})"


class EventKind(models.TextChoices):
    """What the pipeline records when it refuses to change anything (docs/design.md, invariants 2, 4, 5, 10)."""

    CLAIM_LOST = "claim_lost", "Claim lost"
    STALE_RESULT = "stale_result", "Stale result"
    DUPLICATE_RESULT = "duplicate_result", "Duplicate result"
    ALREADY_FINAL = "already_final", "Result for a final review"
    ORPHAN_RESULT = "orphan_result", "Result with an unknown key"
    ILLEGAL_TRANSITION = "illegal_transition", "Illegal transition attempted"
    # Never written (docs/design.md, "Data model"): a ConcurrentTransition is recorded as what it
    # lost. Kept so the column's choices, and /metrics' label, stay as they were.
    CONCURRENT_TRANSITION = "concurrent_transition", "Lost a concurrent transition"
    DISPATCH_SKIPPED = "dispatch_skipped", "Dispatch skipped"
    CIRCUIT_CHANGED = "circuit_changed", "Provider circuit changed state"
    JOB_ENQUEUED = "job_enqueued", "Job enqueued"
    # Authors (docs/design.md, "Authors"): a strike crossed a ladder rung while the author's
    # standing was already at or above it (nothing taken), and a moderator's account action that
    # was refused (a stale page, a standing that does not allow it).
    LADDER_RUNG_SKIPPED = "ladder_rung_skipped", "Ladder rung already taken"
    AUTHOR_ACTION_REFUSED = "author_action_refused", "Account action refused"
    # An operator sent a statement of reasons the Transparency Database refused again, built with
    # the active policy's mapping (docs/transparency.md).
    STATEMENT_REQUEUED = "statement_requeued", "Statement of reasons re-queued"


class PipelineEvent(models.Model):
    """What the pipeline did besides changing a status: jobs it enqueued, and the non-events
    (it looked, found the work not its to do, and changed nothing).

    Kept in the database (not only in logs or process-local counters) so that counts are right
    across every web and worker process and each one can be explained later.
    """

    kind = models.CharField(max_length=32, choices=EventKind.choices)
    review = models.ForeignKey(
        "moderation.ContentReview",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="events",
        db_index=False,  # indexed by event_review_idx (review, id)
    )
    idempotency_key = models.UUIDField(null=True, blank=True)
    worker_id = models.CharField(max_length=150, blank=True)
    job_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["kind", "created_at"], name="event_kind_created_idx"),
            models.Index(fields=["review", "id"], name="event_review_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} review={self.review_id}"


class PrunedTally(models.Model):
    """How many rows behind a counter `prune` has deleted, per counter and labels.

    /metrics counts pipeline events and inbox rows; deleting old ones would make those counters
    fall, which Prometheus reads as a restart (and `increase()` as a burst). The metrics add
    these tallies back, so a counter only ever grows. Written in the transaction that deletes.
    """

    key = models.CharField(max_length=200, unique=True, help_text='e.g. "event:claim_lost", "callback:webhook:stale".')
    count = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.key}: {self.count}"

