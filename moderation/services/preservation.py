"""Preservation snapshots: the evidence a decision in a reportable category freezes, in the
decision's transaction (docs/legal-holds.md; docs/design.md, invariant 22).

The policy names its reportable categories (`reportable_categories`) and how long a snapshot is
kept (`snapshot_retention_days`). A decision rejecting content, or sending it to a human, in one
of them writes one snapshot: the content as the platform received it (text, media URL, metadata,
an image's bytes in base64), the author's identifiers, the decision and its reasons, the
timeline, and a SHA-256 of the whole (`snapshot_digest`, over canonical JSON: anyone holding the
body can check it). A decision in any other category costs nothing here: the test is on the
policy and decision already in memory, no query (tests/moderation/test_round_trips.py).

A snapshot is never changed (a trigger refuses UPDATE, and DELETE before its expiry: migration
0038) and erasure does not touch it: the law that asks for it (the US REPORT Act's one year,
GDPR Art. 17(3)(b) and (e)) outranks the erasure request for its period. Opening one is logged
(`snapshot_view`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta

from audit.models import ReviewTransition
from moderation.transparency.reasons import reasons
from moderation.models import (
    ContentReview,
    Decision,
    ModerationPolicy,
    PreservationSnapshot,
    ReviewMedia,
    ReviewStatus,
    SnapshotView,
)

SNAPSHOT_WHY_MAX = 2000


def category_among(decision: Decision, among) -> str:
    """The first of `decision`'s reasons' categories (its rules', its moderator's, its scores':
    moderation.transparency.reasons, the one account of them) that is in `among`, or "" for none
    (and for an approval). No query when `among` is empty."""
    if not among or decision.label == ReviewStatus.APPROVED:
        return ""
    return next((r["category"] for r in reasons(decision) if r["category"] in among), "")


def reportable_category(policy: ModerationPolicy | None, decision: Decision) -> str:
    """The category that makes `decision` freeze a snapshot: reportable, or urgent (a threat to
    life is reported to the authorities from its snapshot), or "". No query: it reads only the
    decision and its policy, in memory."""
    if policy is None:
        return ""
    return category_among(decision, [*policy.reportable_categories, *policy.urgent_categories])


def canonical(body: dict) -> bytes:
    """The body's one byte form: sorted keys, no spaces, UTF-8."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def snapshot_digest(body: dict) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def snapshot_after_decision_locked(review: ContentReview, decision: Decision) -> PreservationSnapshot | None:
    """Freeze the evidence of `decision` when its category is reportable under its policy. Call
    holding the review's row lock, in the decision's transaction, after its transition."""
    category = reportable_category(decision.policy, decision)
    if not category:
        return None
    body = json.loads(canonical(_evidence(review, decision)))  # what is stored is what was hashed
    return PreservationSnapshot.objects.create(
        review=review, decision=decision, category=category, body=body, sha256=snapshot_digest(body),
        created_at=decision.created_at,
        expires_at=decision.created_at + timedelta(days=decision.policy.snapshot_retention_days),
    )


def _evidence(review: ContentReview, decision: Decision) -> dict:
    content = review.content
    media = ReviewMedia.objects.filter(pk=content.pk).first()
    author = review.author
    transitions = ReviewTransition.objects.filter(review=review).order_by("id").values(
        "created_at", "from_status", "to_status", "cause", "actor", "actor_id", "reason")
    return {
        "review_id": review.pk,
        "received_at": content.created_at,
        "content": {
            "id": content.pk, "external_id": content.external_id, "kind": content.kind, "text": content.text,
            "media_url": content.media_url, "metadata": content.metadata, "language": content.language,
            "media": None if media is None or media.data is None else {
                "mime": media.mime, "byte_size": media.byte_size, "sha256": media.sha256, "pdq": media.pdq,
                "data_base64": base64.b64encode(bytes(media.data)).decode(),
            },
        },
        "author": None if author is None else {"client": review.client.name, "author_id": author.author_id,
                                               "pk": author.pk},
        "client": review.client.name,
        "decision": {
            "id": decision.pk, "label": decision.label, "source": decision.source, "category": decision.category,
            "categories": decision.categories, "category_scores": decision.category_scores,
            "reason": decision.reason, "reason_codes": decision.reason_codes, "explanation": decision.explanation,
            "rule_matches": decision.rule_matches, "moderator": decision.moderator_id,
            "policy_version": decision.policy.version, "created_at": decision.created_at,
        },
        "timeline": list(transitions),
    }


def snapshot_view(*, snapshot_id: int, viewer: str, why: str) -> PreservationSnapshot:
    """Open a snapshot: who, when and why are logged first (an append-only row), then it is read."""
    why = (why or "").strip()
    if not why or len(why) > SNAPSHOT_WHY_MAX:
        raise ValueError(f"say why the snapshot is opened (at most {SNAPSHOT_WHY_MAX} characters)")
    snapshot = PreservationSnapshot.objects.get(pk=snapshot_id)
    SnapshotView.objects.create(snapshot=snapshot, viewer=viewer, why=why)
    return snapshot
