"""Bulk jobs: one action (override, escalate, reprocess) over every review a search of the review
list matched, run in the background (docs/workplace.md, "Bulk actions by query").

The job freezes its targets when the moderator asks for it: each review and the version the
confirm page counted. Each review is then decided in its own transaction, under its row lock and
against that version, and its item's outcome is written in the same transaction: a crash leaves
an item either pending with nothing decided, or done with its decision, never in between.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

BULK_REASON_MAX = 2000


class BulkAction(models.TextChoices):
    OVERRIDE = "override", "Override"
    ESCALATE = "escalate", "Escalate to manual review"
    REPROCESS = "reprocess", "Reprocess"


class BulkJobStatus(models.TextChoices):
    DRAFT = "draft", "Waiting for confirmation"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"
    DISCARDED = "discarded", "Discarded (never started)"


# A job in one of these still has work a worker will take (or a sweep will hand on: bulk_jobs_resume).
BULK_LIVE_STATUSES = (BulkJobStatus.QUEUED, BulkJobStatus.RUNNING)


class BulkItemOutcome(models.TextChoices):
    PENDING = "pending", "Not done yet"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped"


class BulkJob(models.Model):
    """Who asked for what over which search; the targets are its items. Written by the services
    in moderation/services/bulk.py only."""

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    action = models.CharField(max_length=16, choices=BulkAction.choices)
    label = models.CharField(max_length=16, blank=True)  # an override's: approved or rejected
    category = models.CharField(max_length=64, blank=True)  # a rejection's violation category
    reason = models.TextField(max_length=BULK_REASON_MAX, blank=True)
    # The decision's canned reasons and whether the free text goes to the user, exactly as a
    # single decision takes them (review_override's `reason_codes` and `share_reason`).
    reason_codes = models.JSONField(default=list, blank=True, db_default=[])
    share_reason = models.BooleanField(default=False, db_default=False)
    # The policy version in force when the job was drafted, which the moderator confirmed it under
    # (its categories and canned reasons): a review reached after another version is published is
    # skipped, never decided under rules the moderator did not see. NULL: a job from before.
    policy = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="+")
    # The review list's query string the targets were read with (filters and search), as shown.
    query = models.TextField(blank=True)
    # The same in the moderator's words, [[filter title, chosen value], ...] ("search" for the term).
    query_words = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=BulkJobStatus.choices, default=BulkJobStatus.DRAFT)
    total = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # Last sign of a worker on it (enqueued, or an item done): a live job silent for longer than a
    # task's lease has lost its worker, and the sweep enqueues it again (bulk_jobs_resume).
    beat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "beat_at"], name="bulkjob_live_idx")]

    def __str__(self) -> str:
        return f"bulk job {self.pk}: {self.get_action_display().lower()} of {self.total} reviews"


class BulkJobItem(models.Model):
    """One target of a job: the review, the version it had when the job was confirmed, and what
    the job did with it (set in the transaction of the decision itself)."""

    job = models.ForeignKey(BulkJob, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    # No foreign-key constraint: retention may delete an old review; its item then says so.
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.DO_NOTHING, db_constraint=False,
                               related_name="+")
    version = models.PositiveIntegerField()
    status_seen = models.CharField(max_length=16)  # the review's status when the job was confirmed
    outcome = models.CharField(max_length=16, choices=BulkItemOutcome.choices, default=BulkItemOutcome.PENDING)
    reason = models.TextField(blank=True)  # why it was skipped
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "review"], name="bulkitem_once_per_job"),
            models.UniqueConstraint(fields=["job", "position"], name="bulkitem_position"),
        ]
        indexes = [models.Index(fields=["job", "outcome", "position"], name="bulkitem_next_idx")]

    def __str__(self) -> str:
        return f"item {self.position} of bulk job {self.job_id}"
