"""Moderators' internal notes on a review: append-only, never shown to clients."""

from __future__ import annotations

from django.conf import settings
from django.db import models

NOTE_MAX_CHARS = 5000


class ModeratorNote(models.Model):
    """What a moderator wants the next one to know. Written by `review_note_add` (or with a
    decision, in its transaction); a database trigger (migration 0004) refuses UPDATE and DELETE,
    like the transition log's, so a note is evidence of what was known when."""

    review = models.ForeignKey(  # indexed by note_review_idx (review, id)
        "moderation.ContentReview", on_delete=models.PROTECT, related_name="notes", db_index=False
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField(max_length=NOTE_MAX_CHARS)
    # The decision it was written with, if any (a note can also stand alone).
    decision = models.ForeignKey(
        "moderation.Decision", on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["review", "id"], name="note_review_idx")]

    def __str__(self) -> str:
        return f"note by {self.author} on {self.review_id}"
