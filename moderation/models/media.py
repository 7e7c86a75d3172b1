"""Images and hash banks (docs/design.md, "Images and hash banks").

- `ReviewMedia`: one content's image (or audio): its bytes and its thumbnail, kept in the
  database until the review is final plus MEDIA_RETENTION_DAYS (then `prune` removes them;
  erasure at once), and its PDQ hash and quality, which stay.
- `HashBank` and `HashBankEntry`: lists of PDQ hashes of known harmful images. Entries are
  append-only: a policy version takes a bank's entries up to the id it was published with
  (`ModerationPolicy.hash_banks[].through`), so publishing never copies a bank and a version
  keeps the entries it was published with. Removing an entry and disabling a bank are controls
  that act at once, on every version (false positives must stop matching now); both are logged
  in `HashBankChange`.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

BANK_NAME_MAX = 64
BANK_NAME = RegexValidator(r"^[a-z0-9][a-z0-9_.-]*$", "A bank name is lower-case letters, digits, '_', '.' and '-'.")
ENTRY_LABEL_MAX = 255


class MediaSource(models.TextChoices):
    UPLOAD = "upload", "Sent as image_base64"
    URL = "url", "Fetched from media_url"


class MediaRemoval(models.TextChoices):
    RETENTION = "retention", "Retention (MEDIA_RETENTION_DAYS after the review was final)"
    ERASURE = "erasure", "Erasure"


class ReviewMedia(models.Model):
    """The image (or audio) of one content, and what was read of it."""

    content = models.OneToOneField("moderation.Content", on_delete=models.CASCADE, primary_key=True,
                                   related_name="media")
    source = models.CharField(max_length=8, choices=MediaSource.choices)
    # The bytes as received (NULL: not fetched yet, refused, or removed: `removed_at` says when).
    data = models.BinaryField(null=True, blank=True, editable=False)
    mime = models.CharField(max_length=64, blank=True)
    byte_size = models.PositiveIntegerField(default=0)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    # PDQ (moderation.media.images): ThreatExchange's hex form, and its quality 0-100 (under 50 never matches).
    pdq = models.CharField(max_length=64, blank=True)
    pdq_quality = models.PositiveSmallIntegerField(null=True, blank=True)
    hashed_at = models.DateTimeField(null=True, blank=True)
    # What the viewer's lists show (a JPEG of at most 96 pixels either way), made by the one
    # decode that hashed the image, so nothing decodes it again; it goes with the bytes.
    thumbnail = models.BinaryField(null=True, blank=True, editable=False)
    # Why there are no bytes to judge (a media_url that could not be fetched, bytes that are not
    # an image): the decision's reason says it too.
    error = models.TextField(blank=True)
    # A match in a `never_display` bank: no screen ever shows this image again.
    never_display = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    fetched_at = models.DateTimeField(null=True, blank=True)
    removed_at = models.DateTimeField(null=True, blank=True)
    removed_why = models.CharField(max_length=16, choices=MediaRemoval.choices, blank=True)

    class Meta:
        verbose_name_plural = "review media"
        permissions = [("view_media_bytes", "Can see images and hear audio of reviews")]
        indexes = [
            # The dry run of a new bank reads the most recent hashed images.
            models.Index(fields=["hashed_at"], name="media_hashed_idx", condition=Q(pdq_quality__gte=0)),
        ]

    def __str__(self) -> str:
        return f"{self.mime or 'media'} of {self.content_id}"


class HashBank(models.Model):
    """A named list of PDQ hashes (its category, action and `never_display` are the policy
    version's: `ModerationPolicy.hash_banks`)."""

    name = models.CharField(max_length=BANK_NAME_MAX, unique=True, validators=[BANK_NAME])
    description = models.TextField(blank=True)
    # A control that acts at once: a disabled bank matches nothing, under any version.
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [("control_hash_bank", "Can disable hash banks and remove their entries")]

    def __str__(self) -> str:
        return self.name


class HashBankEntry(models.Model):
    id = models.BigAutoField(primary_key=True)
    bank = models.ForeignKey(HashBank, on_delete=models.PROTECT, related_name="entries", db_index=False)
    pdq = models.CharField(max_length=64)
    label = models.CharField(max_length=ENTRY_LABEL_MAX, blank=True)
    added_at = models.DateTimeField(auto_now_add=True)
    # A false positive taken out (logged in HashBankChange): it matches nothing from then on.
    removed_at = models.DateTimeField(null=True, blank=True)
    removed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    removed_reason = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "hash bank entries"
        constraints = [
            models.UniqueConstraint(fields=["bank", "pdq"], name="bank_entry_uniq"),
            models.CheckConstraint(condition=Q(pdq__regex=r"^[0-9a-f]{64}$"), name="bank_entry_pdq_hex"),
        ]
        indexes = [models.Index(fields=["bank", "id"], name="bank_entry_bank_id_idx")]

    def __str__(self) -> str:
        return f"{self.bank_id}:{self.pdq[:12]}…"


class BankChangeKind(models.TextChoices):
    IMPORTED = "imported", "Entries imported"
    PUBLISHED = "published", "Published in a policy version"
    DISABLED = "disabled", "Bank disabled"
    ENABLED = "enabled", "Bank enabled"
    ENTRY_REMOVED = "entry_removed", "Entry removed"


class HashBankChange(models.Model):
    """The log of a bank: who imported, published, disabled or removed what, and why. Append-only."""

    bank = models.ForeignKey(HashBank, on_delete=models.PROTECT, related_name="changes")
    entry = models.ForeignKey(HashBankEntry, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=16, choices=BankChangeKind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                              related_name="+")
    actor_name = models.CharField(max_length=150, blank=True)  # a command's operator, when no user
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.bank_id}"


class MediaPreference(models.Model):
    """How one moderator wants images shown by default: blurred and grey unless they chose
    otherwise (each image can still be revealed, or its colour shown, on its own)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="media_preference")
    reveal = models.BooleanField(default=False, help_text="Show images unblurred by default.")
    colour = models.BooleanField(default=False, help_text="Show images in colour by default.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"media preference of {self.user_id}"
