"""Invariant 20 (docs/design.md): an image is judged under one policy version, and its decision's
bank matches are exactly that version's. Checked against the database, as the other invariants
(moderation/invariants.py, which calls this); returns violations, never raises.

For each provider decision of an image:

- it names the version its operation pinned when the banks were matched (`ModerationRequest.policy`),
  and stores the matches the operation recorded;
- each match is of a bank that version lists, of an entry within the bank's `through`, at the
  distance the two hashes really are, within the version's `pdq_distance`, for a hash of quality
  50 or more;
- no entry of that version within the distance is missing, unless it was removed, or its bank
  disabled, when the decision was made (the controls act at once: moderation/models/media.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from moderation.media.images import MIN_QUALITY, hamming
from moderation.models import (
    BankChangeKind,
    ContentKind,
    Decision,
    DecisionSource,
    HashBankChange,
    HashBankEntry,
    ReviewMedia,
)


def media_violations(review_ids: Iterable) -> list[str]:
    review_ids = [uuid.UUID(str(pk)) for pk in review_ids]
    if not review_ids:
        return []
    decisions = list(
        Decision.objects.filter(review_id__in=review_ids, source=DecisionSource.PROVIDER,
                                review__content__kind=ContentKind.IMAGE)
        .select_related("policy", "request", "review").order_by("id")
    )
    if not decisions:
        return []
    media = {m.content_id: m for m in ReviewMedia.objects.filter(content_id__in={d.review.content_id for d in decisions})}
    problems = []
    for decision in decisions:
        problems += [f"{decision.review_id}: decision {decision.pk}: {why}"
                     for why in _decision_problems(decision, media.get(decision.review.content_id))]
    return problems


def _decision_problems(decision: Decision, media: ReviewMedia | None) -> list[str]:
    request, policy = decision.request, decision.policy
    if request is None or policy is None:
        return ["an image's decision without its operation or policy version"]
    if request.policy_id != decision.policy_id:
        return [f"names policy v{policy.version}, but its banks were matched under another version "
                f"(operation pinned {request.policy_id})"]
    stored = [m for m in decision.rule_matches or [] if "distance" in m]
    if stored != list((request.media or {}).get("matches") or []):
        return ["its bank matches are not those its operation recorded"]
    if media is None or not media.pdq:
        return ["bank matches without a hash"] if stored else []
    banks = {bank["name"]: bank for bank in policy.hash_banks or []}
    problems = []
    for match in stored:
        problems += _match_problems(match, banks, policy, media)
    if media.pdq_quality is not None and media.pdq_quality >= MIN_QUALITY:
        missing = _missing(decision, banks, policy, media, {m["rule"] for m in stored})
        problems += [f"bank {name}'s entry {entry} is within {distance} bits but did not match"
                     for name, entry, distance in missing]
    return problems


def _match_problems(match: dict, banks: dict, policy, media: ReviewMedia) -> list[str]:
    name = match["rule"].removeprefix("bank:")
    bank = banks.get(name)
    if bank is None:
        return [f"matched bank {name}, which policy v{policy.version} does not list"]
    entry = HashBankEntry.objects.filter(pk=match["entry"], bank__name=name).first()
    if entry is None or entry.pk > bank["through"]:
        return [f"matched entry {match['entry']}, which v{policy.version}'s bank {name} does not take"]
    problems = []
    if media.pdq_quality is None or media.pdq_quality < MIN_QUALITY:
        problems.append(f"matched with a hash of quality {media.pdq_quality} (under {MIN_QUALITY})")
    distance = hamming(entry.pdq, media.pdq)
    if distance != match["distance"] or distance > policy.pdq_distance:
        problems.append(f"bank {name}: distance {match['distance']} stated, {distance} real, "
                        f"at most {policy.pdq_distance} allowed")
    if (match["category"], match["action"]) != (bank["category"], bank["action"]):
        problems.append(f"bank {name}: category or action is not the version's")
    return problems


def _missing(decision: Decision, banks: dict, policy, media: ReviewMedia, matched: set) -> list[tuple]:
    """(bank, entry, distance) of entries of the version near enough that were live at the decision
    and yet not matched. A linear pass over the version's entries: the checker runs on a lab's or a
    test's data, never on a production bank of millions."""
    missing = []
    for name, bank in banks.items():
        if f"bank:{name}" in matched or not _enabled_at(name, decision.created_at):
            continue
        entries = HashBankEntry.objects.filter(bank__name=name, id__lte=bank["through"]).exclude(
            removed_at__lte=decision.created_at).values_list("id", "pdq")
        for entry_id, pdq in entries:
            distance = hamming(pdq, media.pdq)
            if distance <= policy.pdq_distance:
                missing.append((name, entry_id, distance))
                break
    return missing


def _enabled_at(name: str, moment) -> bool:
    """Was bank `name` enabled at `moment`? Its last disable or enable before then says (none: it was)."""
    last = (HashBankChange.objects.filter(bank__name=name, created_at__lte=moment,
                                          kind__in=(BankChangeKind.DISABLED, BankChangeKind.ENABLED))
            .order_by("-id").values_list("kind", flat=True).first())
    return last != BankChangeKind.DISABLED
