"""Review queues beyond the built-in ones, and who may work each (docs/workplace.md, "Routing
rules and queue access").

A review's `queue` is a slug: one of the built-in `ReviewQueue` values or a `ModerationQueue`'s.
A row may also carry a built-in slug, to name the groups allowed to work that built-in queue;
without a row a built-in queue is open to every moderator.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from moderation.models.core import history_user

QUEUE_SLUG_MAX = 24  # ContentReview.queue's column
QUEUE_SLUG = r"^[a-z0-9][a-z0-9_-]*$"


class ModerationQueue(models.Model):
    slug = models.CharField(
        max_length=QUEUE_SLUG_MAX, unique=True,
        validators=[RegexValidator(QUEUE_SLUG, "A queue slug is lower-case letters, digits, '_' and '-'.")],
        help_text="What routing rules name and reviews store; a built-in queue's slug sets its access.",
    )
    name = models.CharField(max_length=100, blank=True, help_text="Shown to moderators (a built-in keeps its own if empty).")
    description = models.TextField(blank=True)
    # Empty: every moderator may take it. Else only members of one of these (and superusers).
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="+",
                                    help_text="Only members of these groups may see and take its reviews; none: everyone.")
    created_at = models.DateTimeField(auto_now_add=True)

    # Who changed it and when, groups included (moderation.services.routing.review_queue_save).
    history = HistoricalRecords(get_user=history_user, m2m_fields=[groups])

    class Meta:
        ordering = ["slug"]
        verbose_name = "review queue"

    def __str__(self) -> str:
        return self.name or self.slug


class QueueVisit(models.Model):
    """One stay of a review in a review queue, from its anchor to the decision that ended it:
    what the deadline figures count (docs/design.md, "Deadlines";
    moderation.observability.deadlines). Written by the transition that sends the review to
    manual_review and closed by the one that takes it out, in the same transaction
    (moderation.services.transitions). An undone decision reopens its visit: it was no decision.
    """

    review = models.ForeignKey("moderation.ContentReview", on_delete=models.CASCADE, related_name="+")
    queue = models.CharField(max_length=QUEUE_SLUG_MAX)
    cause = models.CharField(max_length=32)  # the cause that sent it to manual_review
    notice_kind = models.CharField(max_length=16, blank=True, default="")  # the review's, at entry
    anchor_at = models.DateTimeField()  # when it entered the queue: the deadline counts from here
    due_at = models.DateTimeField()
    left_at = models.DateTimeField(null=True, blank=True)
    # Left by a decision (approved or rejected); False while open, or when it left otherwise (erased).
    decided = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # A review waits in one queue at a time: one open visit.
            models.UniqueConstraint(fields=["review"], condition=models.Q(left_at__isnull=True),
                                    name="queue_visit_one_open"),
        ]
        indexes = [
            # The figures of the decisions in a range of time, from the index alone.
            models.Index(fields=["left_at"], name="queue_visit_decided_idx", condition=models.Q(decided=True),
                         include=["queue", "anchor_at", "due_at", "cause", "notice_kind"]),
        ]

    def __str__(self) -> str:
        return f"{self.queue} visit of review {self.review_id}"
