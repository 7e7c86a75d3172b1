"""The transactional outbox of client notifications (docs/design.md, invariant 7).

A notification row is written in the same transaction as what it announces (a decision, or a
report-threshold crossing, which makes no decision), so nothing goes unannounced and nothing
rolled back is announced. Delivery happens
after commit, at least once, each attempt with the same `event_id` (the `webhook-id`), so
receivers can de-duplicate.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from moderation.models.core import CircuitState


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (attempts exhausted)"
    NO_ENDPOINT = "no_endpoint", "No webhook URL configured"
    # Its decision was undone before any attempt began (review_undo): it never leaves.
    CANCELLED = "cancelled", "Cancelled (its decision was undone)"


class NotificationKind(models.TextChoices):
    """The notification's `type` (docs/design.md, "Notifications")."""

    REVIEW_DECIDED = "review.decided", "Review decided"
    REVIEW_REPORTED = "review.reported", "Review reported (threshold reached)"
    APPEAL_RESOLVED = "appeal.resolved", "Appeal resolved"
    AUTHOR_ACTIONED = "author.actioned", "Author actioned"
    AUTHOR_RESTORED = "author.restored", "Author restored"
    ACCOUNT_APPEAL_RESOLVED = "account_appeal.resolved", "Account appeal resolved"
    REPORT_RESOLVED = "report.resolved", "Report resolved"


class DecisionNotification(models.Model):
    # NULL for what concerns an author, not one review (a standing change, an account appeal).
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="notifications")
    kind = models.CharField(max_length=32, choices=NotificationKind.choices, default=NotificationKind.REVIEW_DECIDED)
    # What it announces, exactly one of: a decision (review.decided, or appeal.resolved for the
    # decision resolving an appeal), a report-threshold crossing (review.reported), a change of
    # an author's standing (author.actioned, author.restored), an account appeal's resolution or
    # a report's resolution (report.resolved).
    # One per thing announced: unique constraints, not checks, make a second impossible.
    decision = models.OneToOneField(
        "moderation.Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="notification"
    )
    escalation = models.OneToOneField(
        "moderation.ReportEscalation", on_delete=models.PROTECT, null=True, blank=True, related_name="notification"
    )
    standing_change = models.OneToOneField(
        "moderation.StandingTransition", on_delete=models.PROTECT, null=True, blank=True, related_name="notification"
    )
    account_appeal = models.OneToOneField(
        "moderation.AccountAppeal", on_delete=models.PROTECT, null=True, blank=True, related_name="notification"
    )
    report = models.OneToOneField(
        "moderation.Report", on_delete=models.PROTECT, null=True, blank=True, related_name="notification"
    )
    client = models.ForeignKey("moderation.ApiClient", on_delete=models.PROTECT, related_name="notifications")
    event_id = models.CharField(max_length=64, unique=True, help_text="The webhook-id: the same on every attempt.")
    url = models.URLField(max_length=2048, blank=True, help_text="The client's webhook URL when the decision was made.")
    payload = models.TextField(help_text="The body, fixed when written: every attempt sends the same bytes.")
    status = models.CharField(max_length=16, choices=NotificationStatus.choices, default=NotificationStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    locked_until = models.DateTimeField(null=True, blank=True, help_text="An attempt is in flight until then.")
    last_enqueued_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="notification_due_idx", condition=Q(status="pending")),
            # A client's attempts in flight, counted for its concurrency cap (webhook_gate).
            models.Index(
                fields=["client", "locked_until"], name="notification_in_flight_idx",
                condition=Q(status="pending", locked_until__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(decision__isnull=False, escalation__isnull=True, standing_change__isnull=True,
                            account_appeal__isnull=True, report__isnull=True, review__isnull=False)
                | Q(decision__isnull=True, escalation__isnull=False, standing_change__isnull=True,
                    account_appeal__isnull=True, report__isnull=True, review__isnull=False)
                | Q(decision__isnull=True, escalation__isnull=True, standing_change__isnull=False,
                    account_appeal__isnull=True, report__isnull=True, review__isnull=True)
                | Q(decision__isnull=True, escalation__isnull=True, standing_change__isnull=True,
                    account_appeal__isnull=False, report__isnull=True, review__isnull=True)
                | Q(decision__isnull=True, escalation__isnull=True, standing_change__isnull=True,
                    account_appeal__isnull=True, report__isnull=False, review__isnull=False),
                name="notification_announces_one_thing_v3",
            ),
        ]

    def __str__(self) -> str:
        return f"notification {self.event_id} ({self.status})"

    @staticmethod
    def new_event_id() -> str:
        return f"dec_{uuid.uuid4().hex}"


class NotificationAttempt(models.Model):
    notification = models.ForeignKey(  # indexed by the unique (notification, attempt_no)
        DecisionNotification, on_delete=models.PROTECT, related_name="attempt_log", db_index=False
    )
    attempt_no = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["notification", "attempt_no"], name="notification_attempt_no_uniq"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt_no} of {self.notification_id}: {self.status_code or self.error[:40]}"


class WebhookCircuit(models.Model):
    """One client's webhook breaker (moderation/services/webhook_gate.py): while it is open,
    that client's notifications wait; no other client is affected."""

    client = models.OneToOneField("moderation.ApiClient", on_delete=models.CASCADE, related_name="webhook_circuit")
    state = models.CharField(max_length=16, choices=CircuitState.choices, default=CircuitState.CLOSED)
    failures = models.PositiveIntegerField(default=0, help_text="Failed attempts in a row.")
    opened_at = models.DateTimeField(null=True, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True)
    fast = models.BooleanField(
        default=False,
        help_text="Its last attempt ended within NOTIFY_SLOW_AFTER_S: it may use every notification worker. "
                  "Otherwise (slow, or no attempt yet) it shares NOTIFY_SLOW_SHARE of them with the other slow clients.",
    )

    def __str__(self) -> str:
        return f"webhook circuit of client {self.client_id}: {self.state}"
