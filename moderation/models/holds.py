"""Legal holds, the erasures they defer, and the evidence the platform must keep
(docs/legal-holds.md; docs/design.md, invariant 22).

A hold names reviews, an author, or a query (an author's content in a date range). While it is
active (not lifted, not past its expiry) erasure, pruning and retention skip what it names
(moderation/privacy/holds.py). Its log (`LegalHoldEvent`) and the snapshots' viewing log
(`SnapshotView`) are append-only, as the transition log is; a snapshot (`PreservationSnapshot`)
refuses every UPDATE, and a DELETE before its expiry (migration 0038).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

HOLD_TEXT_MAX = 2000
HOLD_REFERENCE_MAX = 200


class HoldScope(models.TextChoices):
    REVIEWS = "reviews", "Named reviews"
    AUTHOR = "author", "Every content of an author"
    QUERY = "query", "An author's content in a date range"


class LegalHold(models.Model):
    """Keeps what it names intact until it is lifted or expires (`expires_at` NULL: until lifted)."""

    scope = models.CharField(max_length=8, choices=HoldScope.choices)
    reviews = models.ManyToManyField("moderation.ContentReview", blank=True, related_name="legal_holds")
    author = models.ForeignKey("moderation.Author", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="legal_holds")
    # A query's date range over the content's creation: [created_from, created_before).
    created_from = models.DateTimeField(null=True, blank=True)
    created_before = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(max_length=HOLD_TEXT_MAX)
    reference = models.CharField(max_length=HOLD_REFERENCE_MAX, help_text="A case or request number.")
    placed_by = models.CharField(max_length=150)
    placed_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until lifted.")
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-placed_at"]
        permissions = [("place_legal_hold", "Can place, extend and lift legal holds")]
        constraints = [
            models.CheckConstraint(
                condition=Q(scope="reviews", author__isnull=True, created_from__isnull=True, created_before__isnull=True)
                | Q(scope="author", author__isnull=False, created_from__isnull=True, created_before__isnull=True)
                | (Q(scope="query", author__isnull=False)
                   & (Q(created_from__isnull=False) | Q(created_before__isnull=False))),
                name="legal_hold_scope_fields",
            ),
        ]

    def __str__(self) -> str:
        return f"legal hold {self.pk} ({self.reference})"

    def active_at(self, now) -> bool:
        return self.lifted_at is None and (self.expires_at is None or self.expires_at > now)


class HoldAction(models.TextChoices):
    PLACED = "placed"
    EXTENDED = "extended"
    LIFTED = "lifted"


class LegalHoldEvent(models.Model):
    """Who placed, extended or lifted a hold, when, and why. Append-only (a database trigger)."""

    hold = models.ForeignKey(LegalHold, on_delete=models.PROTECT, related_name="events")
    action = models.CharField(max_length=8, choices=HoldAction.choices)
    actor_id = models.CharField(max_length=150)
    at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="The hold's expiry after this event.")
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"hold {self.hold_id} {self.action} by {self.actor_id}"


class DeferredErasure(models.Model):
    """An erasure asked for while its content was held: run when no hold keeps it any more
    (moderation.privacy.erasure.erasures_deferred_run), and marked done by the erasure itself, in
    its transaction. `reason` becomes the tombstone's (without quotes of what was erased) once done."""

    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, related_name="deferred_erasures")
    actor = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=150, blank=True)
    reason = models.TextField()
    requested_at = models.DateTimeField(default=timezone.now)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["requested_at", "id"]
        constraints = [models.UniqueConstraint(fields=["review"], condition=Q(done_at__isnull=True),
                                               name="deferred_erasure_one_pending")]

    def __str__(self) -> str:
        return f"erasure of review {self.review_id} deferred at {self.requested_at:%Y-%m-%d %H:%M}"


class PreservationSnapshot(models.Model):
    """Evidence frozen with a decision in a reportable category, in its transaction: the content as
    received (text, image bytes in base64), the author's identifiers, the decision and its reasons,
    the timeline, and `sha256` over `body` (moderation.services.preservation.snapshot_digest)."""

    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, related_name="snapshots")
    decision = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, related_name="snapshot")
    category = models.CharField(max_length=64)
    body = models.JSONField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        permissions = [("view_snapshot_content", "Can open a preservation snapshot's content (logged)")]

    def __str__(self) -> str:
        return f"snapshot of review {self.review_id} ({self.category})"


class SnapshotView(models.Model):
    """Who opened a snapshot's content, when and why. Append-only."""

    # The log outlives the snapshot once retention removes it: no constraint ties them.
    snapshot = models.ForeignKey(PreservationSnapshot, on_delete=models.DO_NOTHING, db_constraint=False,
                                 related_name="views")
    viewer = models.CharField(max_length=150)
    why = models.TextField()
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id} viewed by {self.viewer}"


class AuthorityReport(models.Model):
    """A report to the authorities of a threat to someone's life or safety (DSA Art. 18): what it
    said (`body`, and its SHA-256), who made it, when and to whom. The platform sends nothing: the
    operator hands the exported report over. Append-only (a database trigger)."""

    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, related_name="authority_reports")
    snapshot = models.ForeignKey(PreservationSnapshot, on_delete=models.DO_NOTHING, db_constraint=False,
                                 related_name="+")
    hold = models.ForeignKey(LegalHold, on_delete=models.PROTECT, related_name="+")
    recipient = models.CharField(max_length=HOLD_REFERENCE_MAX, help_text="The authority informed.")
    sent_by = models.CharField(max_length=150)
    sent_at = models.DateTimeField(default=timezone.now)
    body = models.JSONField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-sent_at"]

    def __str__(self) -> str:
        return f"report of review {self.review_id} to {self.recipient}"


class LawEnforcementRequest(models.Model):
    """A request from an authority: who asked, its reference, what it asked for, the hold it
    created, and (`handovers`) what was handed over and when."""

    agency = models.CharField(max_length=HOLD_REFERENCE_MAX)
    reference = models.CharField(max_length=HOLD_REFERENCE_MAX)
    asked = models.TextField(max_length=HOLD_TEXT_MAX)
    received_at = models.DateTimeField()
    registered_by = models.CharField(max_length=150)
    registered_at = models.DateTimeField(default=timezone.now)
    hold = models.OneToOneField(LegalHold, on_delete=models.PROTECT, related_name="request")

    class Meta:
        ordering = ["-received_at"]
        permissions = [("register_request", "Can register law-enforcement requests and hand items over")]

    def __str__(self) -> str:
        return f"{self.agency} {self.reference}"


class Handover(models.Model):
    """What was handed over for a request: the manifest (each item and its hashes) and its SHA-256.
    Append-only (a database trigger)."""

    request = models.ForeignKey(LawEnforcementRequest, on_delete=models.PROTECT, related_name="handovers")
    handed_by = models.CharField(max_length=150)
    handed_at = models.DateTimeField(default=timezone.now)
    manifest = models.JSONField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-handed_at"]

    def __str__(self) -> str:
        return f"handover {self.pk} for {self.request}"
