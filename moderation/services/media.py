"""Images in the moderation job: read the bytes (fetched from `media_url` the first time), decode
them once into their hash and thumbnail, match the hash banks of the policy version in force, and pin that version on the operation
(docs/design.md, "Images and hash banks").

Everything here runs in the job, with no transaction open (a fetch takes seconds, decoding and
hashing tens of milliseconds), never in the request. What it read is written on the operation
(`ModerationRequest.policy` and `.media`) before any provider is called; finalize decides from it
under the review's lock (moderation.verdicts.media_decide), with that same version, whatever was
published meanwhile: a decision always names the version whose banks it was matched against.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit import context

from moderation.media.images import (
    MIN_QUALITY,
    BankIndex,
    DecodeBounds,
    ImageRead,
    MediaRefused,
    image_read,
    nearest_per_bank,
)
from moderation.media.fetch import FETCH_FAILED, MediaFetchFailed, media_fetch
from moderation.models import (
    Content,
    ContentKind,
    ContentReview,
    HashBankEntry,
    MediaPreference,
    MediaSource,
    ModerationPolicy,
    ModerationRequest,
    ReviewMedia,
)
from moderation.services.policy import policy_active
from moderation.verdicts import BANK_RULE_PREFIX, bank_match_record

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MediaRead:
    """What the job read of a content's media, as pinned on its operation."""

    policy: ModerationPolicy
    media: dict  # ModerationRequest.media: {"matches", "quality", "min_quality", "error", "error_detail", "never_display"}
    data: bytes | None
    mime: str

    @property
    def image_base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii") if self.data else ""


def media_read(*, request: ModerationRequest, content: Content) -> MediaRead:
    """Read, hash and match `content`'s media for `request`'s attempt, and pin the version used.
    Call with no transaction open. Bytes that cannot be had (a URL refused, unreachable or not
    an image) are no error here: `media["error"]` says why, and finalize sends the review to a
    human with that reason. A failed fetch gives the client only FETCH_FAILED: its detail goes to
    the log and to `media["error_detail"]`, which only staff read (moderation/media/fetch.py)."""
    policy = policy_active()
    error, detail, row = "", "", None
    try:
        row = _media_row(content)
        if content.kind == ContentKind.IMAGE and row.pdq_quality is None:
            _hash(row)
    except MediaFetchFailed as exc:
        error, detail = FETCH_FAILED, str(exc)
        with context.bind(review_id=request.review_id):  # (a batch's job binds only its own review)
            logger.warning("the media_url could not be fetched: %s", detail)
    except MediaRefused as exc:
        error = str(exc)
    matches = [] if error or row is None else bank_matches(policy, row.pdq, row.pdq_quality)
    never_display = any(_bank(policy, m["rule"])["never_display"] for m in matches)
    if never_display and not row.never_display:
        # Sticky: an image once matched in a never_display bank is never shown again.
        ReviewMedia.objects.filter(pk=row.pk).update(never_display=True)
    media = {"matches": matches, "quality": row.pdq_quality if row else None, "min_quality": MIN_QUALITY,
             "error": error, "error_detail": detail, "never_display": never_display}
    ModerationRequest.objects.filter(pk=request.pk).update(policy=policy, media=media)
    request.policy, request.media = policy, media
    return MediaRead(policy=policy, media=media, data=row.data if row is not None and not error else None,
                     mime=row.mime if row is not None else "")


def _media_row(content: Content) -> ReviewMedia:
    """The content's stored media, fetched from its URL the first time (MediaRefused: why not)."""
    row = ReviewMedia.objects.filter(pk=content.pk).first()
    if row is not None:
        # Bytes removed by retention leave the hash: the banks can still judge it (a reprocess).
        if row.data is None and not row.pdq:
            raise MediaRefused("its bytes were removed" if row.removed_at else "its bytes are missing")
        return row
    if not content.media_url:
        raise MediaRefused("the content has neither bytes nor a media_url")
    data, declared_type = media_fetch(content.media_url)
    row = ReviewMedia(content=content, source=MediaSource.URL, data=data, byte_size=len(data),
                      sha256=hashlib.sha256(data).hexdigest(), fetched_at=timezone.now())
    if content.kind == ContentKind.IMAGE:
        read = image_read(data, bounds=DecodeBounds.from_settings())
        row.mime, row.width, row.height = read.header.mime, read.header.width, read.header.height
        _read_keep(row, read)
    else:
        row.mime = _audio_type(declared_type)
    try:
        with transaction.atomic():
            _unerased_locked(content)
            row.save(force_insert=True)
    except IntegrityError:  # another attempt fetched it meanwhile: the same URL, its bytes stand
        return ReviewMedia.objects.get(pk=content.pk)
    return row


def _unerased_locked(content: Content) -> None:
    """Take the review's row lock, and refuse (MediaRefused) if the content was erased meanwhile:
    the fetch took seconds, and bytes stored after the erasure committed would never be erased
    (it redacts, under this same lock, what exists when it runs: moderation/privacy/erasure.py)."""
    list(ContentReview.objects.select_for_update(of=("self",)).filter(content_id=content.pk).values_list("pk"))
    if Content.objects.filter(pk=content.pk, erased_at__isnull=False).exists():
        raise MediaRefused("the content was erased")


def _audio_type(declared: str) -> str:
    mime = declared.split(";", 1)[0].strip().lower()
    if not mime.startswith("audio/"):
        raise MediaRefused(f"the media URL did not serve audio (Content-Type {declared or 'missing'!r})")
    return mime


def _hash(row: ReviewMedia) -> None:
    """Decode an uploaded image (its header was checked when it was sent), once: its PDQ hash,
    quality and thumbnail, stored together, so no later attempt, reprocess or page decodes it
    again."""
    _read_keep(row, image_read(bytes(row.data), bounds=DecodeBounds.from_settings()))
    ReviewMedia.objects.filter(pk=row.pk, pdq_quality__isnull=True).update(
        pdq=row.pdq, pdq_quality=row.pdq_quality, hashed_at=row.hashed_at, thumbnail=row.thumbnail
    )


def _read_keep(row: ReviewMedia, read: ImageRead) -> None:
    row.pdq, row.pdq_quality, row.thumbnail = read.pdq, read.quality, read.thumbnail
    row.hashed_at = timezone.now()


def _bank(policy: ModerationPolicy, rule: str) -> dict:
    name = rule.removeprefix(BANK_RULE_PREFIX)
    return next(bank for bank in policy.hash_banks if bank["name"] == name)


# --- matching -------------------------------------------------------------------------------------

_INDEXES: OrderedDict = OrderedDict()
_INDEXES_LOCK = threading.Lock()


def bank_index(policy: ModerationPolicy) -> BankIndex:
    """The entries of `policy`'s banks (each up to its `through`), packed for matching: built once
    per version and process (a version's entries never change; removals and disabled banks are
    applied per match, `bank_matches`)."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(policy.pk)
        if index is not None:
            _INDEXES.move_to_end(policy.pk)
            return index
    rows = {}
    for bank in policy.hash_banks or []:
        entries = list(HashBankEntry.objects.filter(bank__name=bank["name"], id__lte=bank["through"])
                       .order_by("id").values_list("id", "pdq"))
        rows[bank["name"]] = ([i for i, _ in entries], [h for _, h in entries])
    index = BankIndex.build(rows)
    with _INDEXES_LOCK:
        _INDEXES[policy.pk] = index
        while len(_INDEXES) > 2:  # the version in force and the one before: a bank can be large
            _INDEXES.popitem(last=False)
    return index


def bank_matches(policy: ModerationPolicy, pdq: str, quality: int | None) -> list[dict]:
    """`policy`'s bank matches of a hash, as the decision stores them (nearest entry per bank,
    nearest bank first): within `pdq_distance`, in an enabled bank, of an entry not removed. A
    hash of quality under MIN_QUALITY matches nothing."""
    if not pdq or quality is None or not policy.hash_banks:
        return []
    found = bank_index(policy).match(pdq, max_distance=policy.pdq_distance, quality=quality)
    if not found:
        return []
    live = set(HashBankEntry.objects.filter(id__in=[m.entry_id for m in found], removed_at__isnull=True,
                                            bank__enabled=True).values_list("id", flat=True))
    banks = {bank["name"]: bank for bank in policy.hash_banks}
    return [bank_match_record(bank=banks[m.bank], entry_id=m.entry_id, distance=m.distance)
            for m in nearest_per_bank([m for m in found if m.entry_id in live])]


# --- the moderator's viewer -----------------------------------------------------------------------


def media_preference_set(*, user, reveal: bool, colour: bool) -> MediaPreference:
    """How `user` wants images shown by default (their own preference only: the caller passes
    the logged-in user). Either toggle can still be flipped per image on the page."""
    preference, _ = MediaPreference.objects.update_or_create(user=user, defaults={"reveal": reveal, "colour": colour})
    return preference
