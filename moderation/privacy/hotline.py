"""Hotline reports (a CyberTipline-style package) and the report to the authorities an urgent
escalation makes, both built from a review's preservation snapshot (docs/legal-holds.md).

The platform sends nothing: it writes a package the operator hands over through the hotline's or
the authority's own channel. Building one places a one-year legal hold on the review (US REPORT
Act, 2024) and logs the opening of the snapshot, in one transaction with the hold, so a package
never exists without its hold: a failure writing it leaves neither.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from moderation.models import HOLD_REFERENCE_MAX, AuthorityReport, PreservationSnapshot, SnapshotView
from moderation.privacy.holds import hold_for_a_year
from moderation.services.preservation import snapshot_digest

PACKAGE_FORMAT = "hotline-report/1"
# What the platform cannot fill in: the operator adds it in the hotline's form (docs/legal-holds.md).
BY_HAND = (
    "the reporting person's name, role and contact at the platform",
    "the uploader's IP addresses, account e-mail or phone: the platform never receives them from its clients",
    "where the content was shown (URL on the client's service) when the client's media URL is not it",
    "the hotline's own classification of the content (the platform's category is its policy's)",
    "whether the content was viewed by a person at the platform before the report, beyond the logged views",
)


class NoSnapshot(LookupError):
    """The review has no preservation snapshot: only a decision in a reportable category makes one."""


@dataclass(frozen=True)
class Package:
    body: dict
    hold_id: int
    snapshot: PreservationSnapshot


def file_hashes(data: bytes, *, pdq: str) -> dict:
    """The hashes a hotline matches files by: MD5 and SHA-1 (their legacy lists), SHA-256, and
    the PDQ perceptual hash (kept by the image pipeline, moderation/media/images.py)."""
    return {"md5": hashlib.md5(data, usedforsecurity=False).hexdigest(),
            "sha1": hashlib.sha1(data, usedforsecurity=False).hexdigest(),
            "sha256": hashlib.sha256(data).hexdigest(), "pdq": pdq or None}


def snapshot_of(review_id) -> PreservationSnapshot:
    snapshot = PreservationSnapshot.objects.filter(review_id=review_id).order_by("-created_at", "-pk").first()
    if snapshot is None:
        raise NoSnapshot(f"review {review_id} has no preservation snapshot (no decision in a reportable category)")
    return snapshot


def hotline_package(*, review_id, operator: str, reference: str, write=None) -> Package:
    """The package of review `review_id`'s newest snapshot, with the one-year hold it places and
    the logged opening of the snapshot; `write(body)` (the command's file) runs in the same
    transaction, so that a failure to write leaves no hold and no log behind."""
    with transaction.atomic():
        snapshot = snapshot_of(review_id)
        hold = hold_for_a_year(review_id=review_id, reference=reference, placed_by=operator,
                               reason=f"hotline report {reference}: its contents are preserved for one year")
        SnapshotView.objects.create(snapshot=snapshot, viewer=operator, why=f"hotline report {reference}")
        body = _package(snapshot, reference=reference, hold_id=hold.pk, hold_expires_at=hold.expires_at)
        if write is not None:
            write(body)
    return Package(body, hold.pk, snapshot)


AUTHORITY_FORMAT = "authority-report/1"


def authorities_inform(*, review_id, operator: str, recipient: str) -> AuthorityReport:
    """The one-step "inform the authorities" of an urgent review (DSA Art. 18): the report (the
    content, the author's identifiers, the reason, the platform's contact, when it learned of it,
    the snapshot's hash) recorded with who made it, when and for whom, and a one-year hold on the
    review, in one transaction. Nothing is sent: the operator hands the exported report over."""
    recipient = (recipient or "").strip()
    if not recipient or len(recipient) > HOLD_REFERENCE_MAX:
        raise ValueError(f"say which authority is informed (at most {HOLD_REFERENCE_MAX} characters)")
    with transaction.atomic():
        snapshot = snapshot_of(review_id)
        now = timezone.now()
        hold = hold_for_a_year(review_id=review_id, reference=f"authorities {now:%Y-%m-%d %H:%M} {recipient}"[:200],
                               placed_by=operator, reason=f"reported to {recipient} as a threat to life or safety")
        SnapshotView.objects.create(snapshot=snapshot, viewer=operator, why=f"report to {recipient}")
        evidence = snapshot.body
        body = {
            "format": AUTHORITY_FORMAT,
            "to": recipient, "made_by": operator, "made_at": now.isoformat(),
            "platform": {"name": settings.PLATFORM_CONTACT_NAME, "contact": settings.PLATFORM_CONTACT_EMAIL},
            "learned_at": evidence["decision"]["created_at"], "received_at": evidence["received_at"],
            "category": snapshot.category,
            "reason": evidence["decision"]["reason"] or evidence["decision"]["explanation"],
            "content": {key: evidence["content"][key] for key in ("kind", "external_id", "text", "media_url")},
            "author": evidence["author"],
            "snapshot": {"id": snapshot.pk, "sha256": snapshot.sha256},
            "legal_hold": {"id": hold.pk, "expires_at": hold.expires_at.isoformat()},
        }
        return AuthorityReport.objects.create(review_id=review_id, snapshot=snapshot, hold=hold, recipient=recipient,
                                              sent_by=operator, sent_at=now, body=body, sha256=snapshot_digest(body))


def _package(snapshot: PreservationSnapshot, *, reference: str, hold_id: int, hold_expires_at: datetime) -> dict:
    evidence = snapshot.body
    content, decision = evidence["content"], evidence["decision"]
    media = content.get("media")
    files = [] if not media else [{
        "mime": media["mime"], "byte_size": media["byte_size"],
        **file_hashes(base64.b64decode(media["data_base64"]), pdq=media.get("pdq", "")),
    }]
    return {
        "format": PACKAGE_FORMAT,
        "reference": reference,
        "generated_at": timezone.now().isoformat(),
        "reporter": {"platform": settings.PLATFORM_CONTACT_NAME, "contact": settings.PLATFORM_CONTACT_EMAIL},
        "incident": {
            "received_at": evidence["received_at"],  # when the platform received the content
            "decided_at": decision["created_at"],  # when it learned what it was
            "category": snapshot.category,
            "content_url": content.get("media_url") or None,
        },
        "content": {"kind": content["kind"], "external_id": content["external_id"], "text": content["text"] or None,
                    "files": files},
        "uploader": evidence["author"] and {"client": evidence["author"]["client"],
                                            "author_id": evidence["author"]["author_id"]},
        "platform_notes": {
            "decision": decision["label"], "source": decision["source"], "reason": decision["reason"],
            "explanation": decision["explanation"], "policy_version": decision["policy_version"],
            "timeline": evidence["timeline"],
        },
        "evidence": {"snapshot_id": snapshot.pk, "snapshot_sha256": snapshot.sha256,
                     "snapshot_created_at": snapshot.created_at.isoformat(),
                     "snapshot_expires_at": snapshot.expires_at.isoformat()},
        "legal_hold": {"id": hold_id, "expires_at": hold_expires_at.isoformat()},
        "to_add_by_hand": list(BY_HAND),
    }
