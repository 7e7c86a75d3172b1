"""Moderator QA (docs/qa.md): golden items, second reviews, and how long human decisions take.

A golden item is a decided review a team lead vouches for, with the decision it should get. A
`QaItem` is one piece of QA work handed to a moderator, blind: a golden item (answered against
the team lead's expectation) or the second, independent review of a moderator's decision
(answered against that decision). A QA answer is scored here and never applied to the review:
no decision, no transition, no notification, no statement of reasons.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from moderation.models.core import ContentReview, Decision, ReviewStatus

QA_NOTE_MAX = 2000


class QaKind(models.TextChoices):
    GOLDEN = "golden", "Golden item"
    SECOND_REVIEW = "second_review", "Second review"


QA_LABELS = [(ReviewStatus.APPROVED.value, "Approved"), (ReviewStatus.REJECTED.value, "Rejected")]


class GoldenItem(models.Model):
    """A decided review a team lead marked golden: the decision (and, for a rejection, the
    category) a moderator should give it."""

    review = models.OneToOneField(ContentReview, on_delete=models.PROTECT, related_name="golden")
    expected_label = models.CharField(max_length=16, choices=QA_LABELS)
    expected_category = models.CharField(max_length=64, blank=True, default="")
    # The queue it waited in (its `last_queue` when marked; "" for one no human saw): who may be
    # handed it (a group-only queue's members) and where it looks to wait.
    queue = models.CharField(max_length=24, blank=True, default="")
    marked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(expected_label=ReviewStatus.REJECTED) & ~Q(expected_category=""))
                | (Q(expected_label=ReviewStatus.APPROVED) & Q(expected_category="")),
                name="golden_rejection_names_a_category",
            ),
        ]

    def __str__(self) -> str:
        return f"golden item {self.pk} ({self.expected_label}{f', {self.expected_category}' if self.expected_category else ''})"


class QaItem(models.Model):
    """QA work for one moderator: a golden item (created when handed out, for that moderator), or
    the second review of a moderator's decision (created with the decision, handed to a moderator
    other than its maker). Leased like a review (`leased_until`); answered once."""

    kind = models.CharField(max_length=16, choices=QaKind.choices)
    review = models.ForeignKey(ContentReview, on_delete=models.PROTECT, related_name="+", db_index=False)  # qa_review_idx
    golden = models.ForeignKey(GoldenItem, on_delete=models.PROTECT, null=True, blank=True, related_name="items")
    # One second review per decision.
    first_decision = models.OneToOneField(Decision, on_delete=models.PROTECT, null=True, blank=True,
                                          related_name="second_review")
    queue = models.CharField(max_length=24, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    moderator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="+")
    taken_at = models.DateTimeField(null=True, blank=True)
    leased_until = models.DateTimeField(null=True, blank=True)
    # A golden item the moderator passed over: never handed to them again, and not scored.
    skipped_at = models.DateTimeField(null=True, blank=True)
    # The answer (the decide panel's fields), and how it scored.
    answered_at = models.DateTimeField(null=True, blank=True)
    label = models.CharField(max_length=16, choices=QA_LABELS, blank=True, default="")
    category = models.CharField(max_length=64, blank=True, default="")
    reason_codes = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True, default="")
    note = models.TextField(blank=True, default="")
    seconds = models.FloatField(null=True, blank=True, help_text="From when it was handed out to the answer.")
    correct = models.BooleanField(null=True, blank=True, help_text="A golden item: the expected label and category.")
    agrees = models.BooleanField(null=True, blank=True, help_text="A second review: the first decision's label and category.")
    # A disagreement waits for a team lead, who settles it.
    settled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    settled_at = models.DateTimeField(null=True, blank=True)
    settlement = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "QA item"
        verbose_name_plural = "moderator QA"
        permissions = [
            ("view_all_qa", "Can see every moderator's QA figures"),
            ("lead_qa", "Can mark golden items and settle QA disagreements"),
        ]
        constraints = [
            # A moderator never gets the same golden item twice (docs/design.md, invariant 21):
            # handing one out is an INSERT this arbitrates, however many requests race.
            models.UniqueConstraint(fields=["golden", "moderator"], condition=Q(golden__isnull=False),
                                    name="qa_golden_once_per_moderator"),
            models.CheckConstraint(
                condition=(Q(kind=QaKind.GOLDEN) & Q(golden__isnull=False) & Q(first_decision__isnull=True)
                           & Q(moderator__isnull=False))
                | (Q(kind=QaKind.SECOND_REVIEW) & Q(golden__isnull=True) & Q(first_decision__isnull=False)),
                name="qa_item_kind_matches",
            ),
            models.CheckConstraint(
                condition=Q(answered_at__isnull=True) | (Q(moderator__isnull=False) & ~Q(label="")),
                name="qa_answer_has_a_moderator_and_label",
            ),
        ]
        indexes = [
            # "Review next": the second reviews still open, oldest first.
            models.Index(fields=["created_at"], name="qa_second_open_idx",
                         condition=Q(kind="second_review", answered_at__isnull=True)),
            models.Index(fields=["moderator", "answered_at"], name="qa_moderator_answered_idx"),
            models.Index(fields=["review"], name="qa_review_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display().lower()} {self.pk}"

    @property
    def is_open(self) -> bool:
        return self.answered_at is None and self.skipped_at is None


class DecisionTime(models.Model):
    """How long a moderator took over a decision: from when "Review next" leased them the review
    to the decision. Written with the decision, for leased reviews only."""

    decision = models.OneToOneField(Decision, on_delete=models.PROTECT, primary_key=True, related_name="+")
    moderator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    seconds = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["created_at"], name="decision_time_created_idx")]

    def __str__(self) -> str:
        return f"{self.moderator} took {self.seconds:.0f} s"
