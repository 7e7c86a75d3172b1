"""User reports, report-threshold crossings and appeals (docs/design.md, "Reports, appeals and
statements of reasons").

Each "at most one" of the contract is a unique constraint, so it holds however concurrent the
requests: one report per reporter and review, one threshold crossing per decision, one appeal
per decision. The services add the row lock that turns a would-be duplicate into a clean answer
(200 or 409) instead of an IntegrityError.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from moderation.models.core import ReviewStatus, history_user

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


class ReportOutcome(models.TextChoices):
    """What became of a report, told to the client once (`report.resolved`)."""

    ACTIONED = "actioned", "Actioned (the review was rejected)"
    NO_ACTION = "no_action", "No action (the review was approved)"
    EXPIRED = "expired", "Expired (no decision within the policy's report_expiry_days)"


class PileOn(models.TextChoices):
    """Why a review's reports look like a pile-on rather than independent judgements."""

    BURST = "burst", "Reports arrived faster than the policy's burst rate"
    LOW_ACCURACY = "low_accuracy", "Most reporters are rarely right"


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
    # The reporter's weight when the report arrived (`Reporter.weight`; 0 while muted): the
    # threshold sums the weights of the decision's reporters, fixed as they were when each came.
    weight = models.DecimalField(max_digits=3, decimal_places=2, default=1, db_default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    # Its resolution, once (`report.resolved`): the outcome, when, and the decision it cites (a
    # decision made after the report; none for `expired`). `agreed`: a moderator's decision
    # judged it (True: rejected, the reporter was right; False: approved), NULL when no human
    # did, so it counts toward the reporter's accuracy only then.
    outcome = models.CharField(max_length=16, choices=ReportOutcome.choices, blank=True, default="", db_default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        "moderation.Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    agreed = models.BooleanField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["review", "reporter_id"], name="report_one_per_reporter"),
            models.CheckConstraint(
                condition=Q(outcome="", resolved_at__isnull=True, resolved_by__isnull=True, agreed__isnull=True)
                | Q(outcome=ReportOutcome.EXPIRED, resolved_at__isnull=False, resolved_by__isnull=True,
                    agreed__isnull=True)
                | Q(outcome__in=(ReportOutcome.ACTIONED, ReportOutcome.NO_ACTION), resolved_at__isnull=False,
                    resolved_by__isnull=False),
                name="report_resolution_whole",
            ),
            models.CheckConstraint(condition=Q(weight__gte=0, weight__lte=2), name="report_weight_in_range"),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="report_created_idx"),  # metrics, lab
            # A decision resolves its review's open reports; the expiry job walks open user
            # reports oldest first.
            models.Index(fields=["review"], name="report_open_review_idx", condition=Q(outcome="")),
            models.Index(fields=["created_at"], name="report_open_user_idx", condition=Q(outcome="", kind="user")),
            # The reporter's page and their accuracy, from a client's reports.
            models.Index(fields=["reporter_id", "-created_at"], name="report_reporter_idx"),
            # The "reported as" filter of the list and the queues: the reviews with a report of
            # a kind, read from the index alone (docs/benchmarks.md, "Content search at 1M").
            models.Index(fields=["kind", "review"], name="report_kind_review_idx"),
        ]

    def __str__(self) -> str:
        return f"report by {self.reporter_id} on {self.review_id} ({self.reason})"


class ReporterMute(models.TextChoices):
    """A moderator's say over a reporter's muting; AUTO follows the accuracy rule."""

    AUTO = "", "By accuracy"
    MUTED = "muted", "Muted by a moderator"
    UNMUTED = "unmuted", "Unmuted by a moderator"


class Reporter(models.Model):
    """One client's reporter, as accurate as moderators found them (docs/design.md, "Reporters").

    `resolved` and `actioned` count the reports a moderator's decision judged (Report.agreed),
    kept in the transaction that resolves them; the weight and the muting follow from them
    (moderation/services/reporters.py), unless a moderator muted or unmuted the reporter.
    """

    client = models.ForeignKey("moderation.ApiClient", on_delete=models.PROTECT, related_name="reporters",
                               db_index=False)  # indexed by the unique (client, reporter_id)
    reporter_id = models.CharField(max_length=REPORTER_ID_MAX)
    resolved = models.PositiveIntegerField(default=0, db_default=0, help_text="Reports a moderator judged.")
    actioned = models.PositiveIntegerField(default=0, db_default=0, help_text="Of them, reports the moderator agreed with.")
    mute = models.CharField(max_length=8, choices=ReporterMute.choices, blank=True, default="", db_default="")
    mute_reason = models.TextField(blank=True)
    mute_changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                        related_name="+")
    mute_changed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    history = HistoricalRecords(get_user=history_user, excluded_fields=["resolved", "actioned"])

    class Meta:
        ordering = ["client", "reporter_id"]
        permissions = [("mute_reporter", "Can mute and unmute reporters")]
        constraints = [
            models.UniqueConstraint(fields=["client", "reporter_id"], name="reporter_one_per_client"),
            models.CheckConstraint(condition=Q(actioned__lte=models.F("resolved")), name="reporter_actioned_le_resolved"),
        ]

    def __str__(self) -> str:
        return f"reporter {self.reporter_id} of {self.client_id}"


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
        indexes = [
            models.Index(fields=["review", "-created_at"], name="appeal_review_idx"),
            # The transparency report: the appeals received, and those decided, in a period.
            models.Index(fields=["created_at"], name="appeal_created_idx"),
            models.Index(fields=["resolved_at"], name="appeal_resolved_idx", condition=Q(resolved_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"appeal {self.id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == AppealStatus.OPEN
