"""The register of law-enforcement requests (docs/legal-holds.md): who asked, their reference, what
they asked for, the legal hold the request created, and what was handed over and when.

Registering a request places its hold in the same transaction (what it names is kept from that
moment). Handing items over writes a manifest (each item, its content's hashes and its snapshot's)
with a SHA-256 over the whole, append-only (migration 0038): what left the platform can be proved
later, and nothing the request did not name leaves. The platform sends nothing: the operator
hands the items over through the authority's own channel.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from moderation.models import (
    HOLD_REFERENCE_MAX,
    HOLD_TEXT_MAX,
    Author,
    ContentReview,
    Handover,
    LawEnforcementRequest,
    PreservationSnapshot,
    ReviewMedia,
)
from moderation.privacy.holds import hold_place, required_text, review_holds
from moderation.services.preservation import snapshot_digest

MANIFEST_FORMAT = "handover-manifest/1"


def request_register(*, agency: str, reference: str, asked: str, received_at: datetime, registered_by: str,
                     reviews: Iterable = (), author: Author | None = None, created_from: datetime | None = None,
                     created_before: datetime | None = None, expires_at: datetime | None = None
                     ) -> LawEnforcementRequest:
    """Register a request and place the hold on what it names, in one transaction."""
    agency = required_text(agency, "agency", HOLD_REFERENCE_MAX)
    reference = required_text(reference, "reference", HOLD_REFERENCE_MAX)
    asked = required_text(asked, "asked", HOLD_TEXT_MAX)
    if received_at > timezone.now():
        raise ValidationError({"received_at": "a request is received before it is registered"})
    with transaction.atomic():
        hold = hold_place(reviews=reviews, author=author, created_from=created_from, created_before=created_before,
                          expires_at=expires_at, reference=f"{agency} {reference}"[:HOLD_REFERENCE_MAX],
                          reason=f"law-enforcement request: {asked}"[:HOLD_TEXT_MAX], placed_by=registered_by)
        return LawEnforcementRequest.objects.create(agency=agency, reference=reference, asked=asked,
                                                    received_at=received_at, registered_by=registered_by, hold=hold)


def request_handover(*, request_id: int, review_ids: Iterable, handed_by: str) -> Handover:
    """Record the hand-over of `review_ids` for request `request_id`: a manifest of each item's
    hashes (its content's text, its image's bytes, its newest snapshot's) and the SHA-256 of the
    manifest. Each item must be kept by the request's hold (ValidationError otherwise)."""
    handed_by = required_text(handed_by, "handed_by", 150)
    review_ids = sorted(set(review_ids), key=str)
    if not review_ids:
        raise ValidationError({"review_ids": "name what is handed over"})
    with transaction.atomic():
        request = LawEnforcementRequest.objects.select_for_update().select_related("hold").get(pk=request_id)
        outside = [str(pk) for pk in review_ids if request.hold_id not in review_holds(pk)]
        if outside:
            raise ValidationError({"review_ids": f"not named by request {request.reference}: {', '.join(outside)}"})
        now = timezone.now()
        manifest = {
            "format": MANIFEST_FORMAT, "agency": request.agency, "reference": request.reference,
            "handed_by": handed_by, "handed_at": now.isoformat(), "hold": request.hold_id,
            "items": [_item(pk) for pk in review_ids],
        }
        return Handover.objects.create(request=request, handed_by=handed_by, handed_at=now, manifest=manifest,
                                       sha256=snapshot_digest(manifest))


def _item(review_id) -> dict:
    review = ContentReview.objects.select_related("content").get(pk=review_id)
    content = review.content
    media = ReviewMedia.objects.filter(pk=content.pk).only("data", "pdq").first()
    snapshot = PreservationSnapshot.objects.filter(review_id=review_id).order_by("-created_at", "-pk").first()
    return {
        "review_id": str(review.pk), "content_id": str(content.pk), "external_id": content.external_id,
        "erased": content.erased_at is not None,
        "text_sha256": hashlib.sha256(content.text.encode()).hexdigest() if content.text else None,
        "media_sha256": hashlib.sha256(bytes(media.data)).hexdigest() if media and media.data is not None else None,
        "snapshot": None if snapshot is None else {
            "id": snapshot.pk, "sha256": snapshot.sha256,
            "media_sha256": (hashlib.sha256(base64.b64decode(snapshot.body["content"]["media"]["data_base64"]))
                             .hexdigest() if (snapshot.body.get("content") or {}).get("media") else None)},
    }
