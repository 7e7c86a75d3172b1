"""User reports, report-threshold crossings and appeals (docs/design.md, "Reports, appeals and
statements of reasons").

Each "at most one" of the contract is a unique constraint, so it holds however concurrent the
requests: one report per reporter and review, one threshold crossing per decision, one appeal
per decision. The services add the row lock that turns a would-be duplicate into a clean answer
(200 or 409) instead of an IntegrityError.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from moderation.models.core import ReviewStatus

REPORTER_ID_MAX = 255
REPORT_DETAIL_MAX = 2000
APPEAL_STATEMENT_MAX = 5000
OTHER_REASON = "other"


class ReportKind(models.TextChoices):
    """Who a report speaks for, as the client vouches (docs/design.md, "Reports")."""

    USER = "user", "User (counts toward the threshold)"
    DSA_NOTICE = "dsa_notice", "DSA notice (Art. 16)"
    TRUSTED_FLAGGER = "trusted_flagger", "Trusted flagger (Art. 22)"


# The kinds that send a review to a human whatever the threshold, weakest first: a review keeps
# the strongest one filed on it (`ContentReview.notice_kind`).
NOTICE_KINDS = (ReportKind.DSA_NOTICE, ReportKind.TRUSTED_FLAGGER)


class Report(models.Model):
    """One reporter's report of one review, on behalf of the client's user `reporter_id`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    review = models.ForeignKey(  # indexed by the unique (review, reporter_id)
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="reports", db_index=False
    )
    # The decision in force when the report arrived (none before the first): the threshold
    # counts the reporters of that decision only, so a moderator's confirmation starts the
    # count again.
    decision = models.ForeignKey(
        "moderation.Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reporter_id = models.CharField(max_length=REPORTER_ID_MAX)
    # As the client says, as it says who the reporter is: the review's client vouches for it.
    kind = models.CharField(max_length=16, choices=ReportKind.choices, default=ReportKind.USER,
                            db_default=ReportKind.USER)
    reason = models.CharField(max_length=64, help_text='A policy category, or "other".')
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["review", "reporter_id"], name="report_one_per_reporter"),
        ]
        indexes = [models.Index(fields=["created_at"], name="report_created_idx")]  # metrics, lab

    def __str__(self) -> str:
        return f"report by {self.reporter_id} on {self.review_id} ({self.reason})"


class ReportEscalation(models.Model):
    """Distinct reporters reached the policy's threshold and moved an approved review to a
    human (cause user_reports): at most one per decision, and one per such transition."""

    review = models.ForeignKey(
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="report_escalations"
    )
    decision = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, related_name="report_escalation")
    transition = models.OneToOneField("audit.ReviewTransition", on_delete=models.PROTECT, related_name="+")
    report_count = models.PositiveIntegerField()
    threshold = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.report_count} reports on {self.review_id} (threshold {self.threshold})"


class AppealStatus(models.TextChoices):
    OPEN = "open", "Open"
    UPHELD = "upheld", "Upheld (rejected again)"
    OVERTURNED = "overturned", "Overturned (approved)"


def appeal_outcome(label: str) -> AppealStatus:
    """An appeal's outcome from the decision that resolves it: a rejection upholds it, an
    approval overturns it."""
    return AppealStatus.UPHELD if label == ReviewStatus.REJECTED else AppealStatus.OVERTURNED


class Appeal(models.Model):
    """The owner's complaint against one rejection; a moderator other than the one who made
    that decision resolves it by deciding the review again."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    review = models.ForeignKey(  # indexed by appeal_review_idx
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="appeals", db_index=False
    )
    # The unique constraint is the contract's "at most one appeal per decision".
    decision = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, related_name="appeal")
    appellant_id = models.CharField(max_length=REPORTER_ID_MAX)
    statement = models.TextField()
    status = models.CharField(max_length=16, choices=AppealStatus.choices, default=AppealStatus.OPEN)
    resolution = models.OneToOneField(
        "moderation.Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="resolved_appeal"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(status=AppealStatus.OPEN) & Q(resolution__isnull=True) & Q(resolved_at__isnull=True))
                | (~Q(status=AppealStatus.OPEN) & Q(resolution__isnull=False) & Q(resolved_at__isnull=False)),
                name="appeal_resolved_with_a_decision",
            ),
            models.UniqueConstraint(fields=["review"], condition=Q(status="open"), name="appeal_one_open_per_review"),
        ]
        indexes = [models.Index(fields=["review", "-created_at"], name="appeal_review_idx")]

    def __str__(self) -> str:
        return f"appeal {self.id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == AppealStatus.OPEN
