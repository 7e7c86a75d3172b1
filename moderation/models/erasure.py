"""The tombstone an erasure leaves (docs/design.md, invariant 16)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

# What stands where erasure removed words (and where words about erased content are not kept).
ERASED = "[erased]"


class ContentErasure(models.Model):
    """Who erased a content, when and why, and what was redacted.

    One per content (the unique one-to-one makes a second erasure a no-op). The review, its
    transitions, decisions and every id stay; this row explains the blanks.
    """

    content = models.OneToOneField("moderation.Content", on_delete=models.PROTECT, related_name="erasure")
    review = models.OneToOneField("moderation.ContentReview", on_delete=models.PROTECT, related_name="erasure")
    actor = models.CharField(max_length=16, help_text="api (the owning client), command or admin.")
    actor_id = models.CharField(max_length=150, blank=True, help_text="The client's name, or the operator.")
    reason = models.TextField()
    erased_at = models.DateTimeField(default=timezone.now)
    stopped_moderation = models.BooleanField(
        default=False, help_text="The review was still being moderated: erasure ended it in manual_review."
    )
    redacted = models.JSONField(default=dict, blank=True, help_text='Rows changed, per "model.field".')

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"content {self.content_id} erased at {self.erased_at:%Y-%m-%d %H:%M}"
