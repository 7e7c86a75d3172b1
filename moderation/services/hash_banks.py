"""Hash banks: importing entries, publishing a bank in a policy version, the controls that act at
once (disable a bank, remove an entry) and the dry run (docs/images.md, "Hash banks").

Versioning: entries are append-only and a version takes a bank's entries up to `through`, the
bank's last entry id when it was published (moderation/models/media.py). Imports into a bank and
its publishing take the bank's row lock, so a publish reads `through` only once every import
before it has committed, and every import after it gets higher ids: a version never takes an
entry that was not there when it was published.

The controls are not versioned: matching drops removed entries and disabled banks per match
(moderation.services.media.bank_matches), whatever version is in force. Each is a conditional
UPDATE, so two moderators doing the same thing at once change (and log) it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from moderation.errors import ReasonRequired
from moderation.media.images import MIN_QUALITY, BankIndex
from moderation.models import BankChangeKind, ContentReview, HashBank, HashBankChange, HashBankEntry, ReviewMedia
from moderation.selectors import visible_to
from moderation.services.policy import policy_active, policy_publish_change

DRY_RUN_IMAGES = 1000  # the most recent hashed images a dry run matches


class DryRunScope(StrEnum):
    DRAFT = "draft"  # the entries no version takes yet
    BANK = "bank"  # every entry not removed


@dataclass(frozen=True)
class BankImport:
    bank: HashBank
    created: bool
    added: int  # new entries
    already: int  # hashes of the file already in the bank (bank_entry_uniq): nothing added for them
    first_id: int | None
    last_id: int | None


def bank_import(*, name: str, entries: Sequence[tuple[str, str]], source: str = "", actor=None,
                actor_name: str = "") -> BankImport:
    """Add `entries` ((normalized hash, label), each hash once: moderation.media.images.bank_file_parse)
    to bank `name`, created if new. No version takes them until the bank is published."""
    with transaction.atomic():
        bank, created = _bank_locked(name)
        added, first_id, last_id = _entries_insert(bank, entries)
        HashBankChange.objects.create(bank=bank, kind=BankChangeKind.IMPORTED, actor=actor, actor_name=actor_name,
                                      detail={"source": source, "added": added, "already": len(entries) - added,
                                              "first_id": first_id, "last_id": last_id})
    return BankImport(bank=bank, created=created, added=added, already=len(entries) - added,
                      first_id=first_id, last_id=last_id)


def _bank_locked(name: str) -> tuple[HashBank, bool]:
    """The bank (created if new), its row locked to the end of the transaction."""
    candidate = HashBank(name=name)
    try:
        candidate.full_clean(validate_unique=False)
    except ValidationError as exc:
        raise ValidationError(f"bank {name!r}: " + "; ".join(exc.messages)) from exc
    bank, created = HashBank.objects.get_or_create(name=name)  # a concurrent creator: get_or_create retries the get
    return HashBank.objects.select_for_update().get(pk=bank.pk), created


def _entries_insert(bank: HashBank, entries: Sequence[tuple[str, str]]) -> tuple[int, int | None, int | None]:
    """Insert the entries not in the bank yet: COPY into a temporary table, then one INSERT ...
    ON CONFLICT DO NOTHING (a million entries in seconds; bulk_create builds a model instance and
    a parameter list per row). Returns (added, first id, last id)."""
    if not entries:
        return 0, None, None
    table = HashBankEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS pg_temp.bank_import")
        cursor.execute("CREATE TEMPORARY TABLE bank_import (seq integer, pdq text, label text) ON COMMIT DROP")
        with cursor.cursor.copy("COPY bank_import (seq, pdq, label) FROM STDIN") as copy:
            for seq, (pdq, label) in enumerate(entries):
                copy.write_row((seq, pdq, label))
        cursor.execute(
            f"WITH added AS (INSERT INTO {table} (bank_id, pdq, label, added_at, removed_reason) "
            "SELECT %s, pdq, label, %s, '' FROM bank_import ORDER BY seq "
            "ON CONFLICT (bank_id, pdq) DO NOTHING RETURNING id) SELECT count(*), min(id), max(id) FROM added",
            [bank.pk, timezone.now()],
        )
        added, first_id, last_id = cursor.fetchone()
        cursor.execute("DROP TABLE pg_temp.bank_import")
    return added, first_id, last_id


# --- publishing -----------------------------------------------------------------------------------


def bank_policy_entry(*, bank: HashBank, category: str, action: str, never_display: bool) -> dict:
    """The bank as a version lists it (ModerationPolicy.hash_banks), taking every entry it has now."""
    through = bank.entries.aggregate(last=Max("id"))["last"] or 0
    return {"name": bank.name, "category": category, "action": action, "never_display": never_display,
            "through": through}


def banks_with(banks: list[dict], entry: dict) -> list[dict]:
    """A version's bank list with `entry` set (replacing the bank's entry, or added last)."""
    names = [bank["name"] for bank in banks]
    if entry["name"] in names:
        return [entry if bank["name"] == entry["name"] else bank for bank in banks]
    return [*banks, entry]


def bank_publish(*, name: str, category: str, action: str, never_display: bool, notes: str = "", actor=None,
                 actor_name: str = ""):
    """Publish the next policy version with bank `name` taking every entry it has now, with this
    category, action and never_display. Raises ValidationError if that version would be invalid."""
    with transaction.atomic():
        # The bank's lock first: an import in progress commits before `through` is read (module docstring).
        bank = HashBank.objects.select_for_update().get(name=name)
        entry = bank_policy_entry(bank=bank, category=category, action=action, never_display=never_display)
        # Under the publishing lock, on whatever version is newest by then: concurrent publishes queue up.
        policy = policy_publish_change(lambda latest: {"hash_banks": banks_with(latest.hash_banks, entry)},
                                       notes=notes or f"hash bank {name} through entry {entry['through']}",
                                       created_by=actor)
        HashBankChange.objects.create(bank=bank, kind=BankChangeKind.PUBLISHED, actor=actor, actor_name=actor_name,
                                      detail={"version": policy.version, **entry})
    return policy


# --- controls -------------------------------------------------------------------------------------


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("a reason is required")
    return reason


def bank_set_enabled(*, name: str, enabled: bool, reason: str, actor=None, actor_name: str = "") -> bool:
    """Disable or enable bank `name`, at once, under every version. False (and nothing logged) if it
    already was: the UPDATE is conditional, so of two moderators at once one changes it."""
    reason = _reason(reason)
    with transaction.atomic():
        bank = HashBank.objects.get(name=name)
        changed = HashBank.objects.filter(pk=bank.pk, enabled=not enabled).update(enabled=enabled)
        if changed:
            HashBankChange.objects.create(bank=bank, kind=BankChangeKind.ENABLED if enabled else BankChangeKind.DISABLED,
                                          actor=actor, actor_name=actor_name, reason=reason)
    return bool(changed)


def bank_entry_find(*, name: str, pdq: str) -> HashBankEntry:
    """Bank `name`'s entry for a normalized hash (HashBankEntry.DoesNotExist if none)."""
    return HashBankEntry.objects.select_related("bank").get(bank__name=name, pdq=pdq)


def bank_entry_remove(*, entry_id: int, reason: str, actor=None, actor_name: str = "") -> bool:
    """Take a false positive out: the entry matches nothing from now on, under every version.
    False (and nothing logged) if it was removed already."""
    reason = _reason(reason)
    with transaction.atomic():
        entry = HashBankEntry.objects.get(pk=entry_id)
        # WHERE removed_at IS NULL: a second removal at once waits for the first's row lock, then
        # finds the row removed and changes nothing (test_two_removals_at_once_log_once).
        changed = HashBankEntry.objects.filter(pk=entry.pk, removed_at__isnull=True).update(
            removed_at=timezone.now(), removed_by=actor, removed_reason=reason)
        if changed:
            HashBankChange.objects.create(bank_id=entry.bank_id, entry=entry, kind=BankChangeKind.ENTRY_REMOVED,
                                          actor=actor, actor_name=actor_name, reason=reason,
                                          detail={"pdq": entry.pdq})
    return bool(changed)


# --- reading --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BankRow:
    """A bank as `hash_banks list` and the admin show it."""

    bank: HashBank
    listed: dict | None  # its entry in the active version (None: a draft, in no version)
    entries: int  # every entry
    taken: int  # entries the active version takes (id <= through)
    live: int  # of those, not removed

    @property
    def draft(self) -> int:
        return self.entries - self.taken


def banks_overview(policy=None) -> list[BankRow]:
    """Every bank, those of `policy` (the active version) first in its order, then the others."""
    policy = policy or policy_active()
    listed = {bank["name"]: bank for bank in policy.hash_banks}
    rows = []
    for bank in HashBank.objects.all():
        through = listed[bank.name]["through"] if bank.name in listed else 0
        counts = bank.entries.aggregate(entries=Count("id"), taken=Count("id", filter=Q(id__lte=through)),
                                        live=Count("id", filter=Q(id__lte=through, removed_at__isnull=True)))
        rows.append(BankRow(bank=bank, listed=listed.get(bank.name), **counts))
    order = list(listed)
    return sorted(rows, key=lambda r: (order.index(r.bank.name) if r.listed else len(order), r.bank.name))


@dataclass(frozen=True)
class DryRunMatch:
    review_id: object  # the review's uuid
    status: str
    distance: int
    entry_id: int


@dataclass(frozen=True)
class DryRun:
    bank: HashBank
    scope: DryRunScope
    entries: int  # entries matched against
    images: int  # recent hashed images read
    max_distance: int
    matches: list[DryRunMatch]  # nearest first


def bank_dry_run(*, name: str, scope: DryRunScope = DryRunScope.DRAFT, images: int = DRY_RUN_IMAGES,
                 viewer=None) -> DryRun:
    """Which of the most recent hashed images bank `name` would match, at the active version's
    pdq_distance: its draft entries (no version takes them yet) or the whole bank, removed entries
    left out. Writes nothing. Names reviews by id, never their content. With `viewer`, only the
    images of reviews they may see are read (moderation.selectors.visible_to)."""
    policy = policy_active()
    bank = HashBank.objects.get(name=name)
    entries = bank.entries.filter(removed_at__isnull=True)
    listed = next((b for b in policy.hash_banks if b["name"] == name), None)
    if scope == DryRunScope.DRAFT and listed is not None:
        entries = entries.filter(id__gt=listed["through"])
    rows = list(entries.order_by("id").values_list("id", "pdq"))
    index = BankIndex.build({name: ([i for i, _ in rows], [h for _, h in rows])})
    # media_hashed_idx: newest first, quality >= MIN_QUALITY implies the index's own condition.
    hashed = visible_to(viewer, ReviewMedia.objects.filter(pdq_quality__gte=MIN_QUALITY), through="content__review")
    recent = (list(hashed.order_by("-hashed_at").values_list("content_id", "pdq", "pdq_quality")[:images])
              if rows else [])
    nearest = {}
    for content_id, pdq, quality in recent:
        found = index.match(pdq, max_distance=policy.pdq_distance, quality=quality, limit=1)
        if found:
            nearest[content_id] = found[0]
    reviews = {content_id: (review_id, status) for content_id, review_id, status
               in ContentReview.objects.filter(content_id__in=nearest).values_list("content_id", "id", "status")}
    matches = [DryRunMatch(review_id=reviews[c][0], status=reviews[c][1], distance=m.distance, entry_id=m.entry_id)
               for c, m in nearest.items() if c in reviews]
    return DryRun(bank=bank, scope=scope, entries=len(rows), images=len(recent), max_distance=policy.pdq_distance,
                  matches=sorted(matches, key=lambda m: (m.distance, str(m.review_id))))
