"""A second look at a decided review (docs/workplace.md, "A second look at a decided review").

A moderator or team lead sends a decided review (approved or rejected) to the escalations queue
with a reason. The review keeps its status and its decision: nothing reaches the client. A senior
moderator (the `settle_second_look` permission) then either confirms the decision, which closes
the second look and changes nothing, or decides the review again through the normal override
path (`review_override`), which closes it with that decision. At most one second look per review
is open (a partial unique constraint; the service turns a duplicate into a clean refusal under
the review's row lock).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

SECOND_LOOK_REASON_MAX = 2000


class SecondLookStatus(models.TextChoices):
    OPEN = "open", "Open: the decision stands until a senior moderator settles it"
    CONFIRMED = "confirmed", "Confirmed: the decision stands"
    CHANGED = "changed", "Decided again by a senior moderator"


class SecondLook(models.Model):
    """One request for a senior moderator's second look at the decision in force on a review."""

    review = models.ForeignKey(  # indexed by second_look_review_idx
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="second_looks", db_index=False
    )
    # The decision looked at: the one in force when the second look was asked for.
    decision = models.ForeignKey("moderation.Decision", on_delete=models.PROTECT, related_name="+")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField(max_length=SECOND_LOOK_REASON_MAX)
    status = models.CharField(max_length=16, choices=SecondLookStatus.choices, default=SecondLookStatus.OPEN)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    # The senior's new decision (CHANGED only), and their words (a confirmation's reason).
    resolution = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="second_look_resolved")
    resolution_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        permissions = [("settle_second_look", "Can confirm or change a decision sent for a second look")]
        constraints = [
            # The "one open second look at most" of a review, however concurrent the requests.
            models.UniqueConstraint(fields=["review"], condition=Q(status="open"), name="second_look_one_open"),
            models.CheckConstraint(
                condition=Q(status="open", resolved_at__isnull=True, resolved_by__isnull=True, resolution__isnull=True)
                | Q(status="confirmed", resolved_at__isnull=False, resolved_by__isnull=False, resolution__isnull=True)
                | Q(status="changed", resolved_at__isnull=False, resolved_by__isnull=False, resolution__isnull=False),
                name="second_look_resolution_whole",
            ),
        ]
        indexes = [
            models.Index(fields=["review", "created_at"], name="second_look_review_idx"),
            # The escalations queue's list of open second looks, oldest first.
            models.Index(fields=["created_at"], name="second_look_open_idx", condition=Q(status="open")),
        ]

    def __str__(self) -> str:
        return f"second look at {self.review_id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == SecondLookStatus.OPEN
