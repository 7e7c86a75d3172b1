"""Legal holds: what they keep, and placing, extending and lifting one (docs/legal-holds.md;
docs/design.md, invariant 22).

A hold is active while it is not lifted and not past its expiry; `held_q` is the one definition
of "held" every path reads (erasure, prune, retention, the admin). Erasure asked for held content
is deferred (moderation/privacy/erasure.py) and runs once no hold keeps it: after a lift (a job on
commit) and in the daily prune, which is also when an expired hold's deferred erasures run.

The race with erasure: an erasure locks the review's row, then asks whether it is held. Placing a
hold takes the same row lock on every review it names (in id order, the order every batch of the
pipeline takes them), before its transaction commits. So either the hold commits first and the
erasure, waiting on the lock, then sees it and defers; or the erasure commits first and the hold
arrives after the content is wholly erased. Never half (tests/moderation/test_legal_holds.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from moderation.jobs import enqueue_on_commit
from moderation.models import (
    HOLD_REFERENCE_MAX,
    HOLD_TEXT_MAX,
    Author,
    ContentReview,
    HoldAction,
    HoldScope,
    LegalHold,
    LegalHoldEvent,
)


def holds_active(now: datetime | None = None):
    """The holds in force at `now`."""
    now = now or timezone.now()
    return LegalHold.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), lifted_at__isnull=True)


def held_q(now: datetime | None = None, *, review: str = "") -> Q:
    """Rows whose review (`review`: the path from the row to its review, "" for a review) an
    active hold keeps: it names the review, or the review's author (in the hold's date range)."""
    active = holds_active(now)
    prefix = f"{review}__" if review else ""
    named = Exists(active.filter(reviews=OuterRef(review or "pk")))
    created = OuterRef(f"{prefix}content__created_at")
    by_author = Exists(active.filter(author=OuterRef(f"{prefix}author_id"))
                       .filter(Q(created_from__isnull=True) | Q(created_from__lte=created))
                       .filter(Q(created_before__isnull=True) | Q(created_before__gt=created)))
    return Q(named) | Q(by_author)


def review_holds(review_id) -> list[int]:
    """The ids of the active holds that keep review `review_id` (empty: none), in one query. Call
    holding the review's row lock to act on the answer (the module docstring: why)."""
    created = F("author__reviews__content__created_at")
    return list(holds_active().filter(
        Q(reviews=review_id)
        | Q(Q(created_from__isnull=True) | Q(created_from__lte=created),
            Q(created_before__isnull=True) | Q(created_before__gt=created), author__reviews=review_id)
    ).order_by("pk").values_list("pk", flat=True).distinct())


def required_text(value: str, name: str, limit: int) -> str:
    """`value` stripped, or ValidationError naming `name` when it is empty or longer than `limit`."""
    value = (value or "").strip()
    if not value or len(value) > limit:
        raise ValidationError({name: f"required, at most {limit} characters"})
    return value


def hold_place(*, reason: str, reference: str, placed_by: str, reviews: Iterable = (), author: Author | None = None,
               created_from: datetime | None = None, created_before: datetime | None = None,
               expires_at: datetime | None = None) -> LegalHold:
    """Place a hold on `reviews` (ids), or on `author`'s content (in [created_from, created_before)
    when either is given), audited, in one transaction that locks every review it keeps (the
    module docstring: the race with erasure). Raises ValidationError for a bad hold."""
    reason = required_text(reason, "reason", HOLD_TEXT_MAX)
    reference = required_text(reference, "reference", HOLD_REFERENCE_MAX)
    placed_by = required_text(placed_by, "placed_by", 150)
    review_ids = sorted(set(reviews), key=str)
    if bool(review_ids) == (author is not None):
        raise ValidationError("a hold names reviews, or an author (with an optional date range), not both")
    if created_from and created_before and created_from >= created_before:
        raise ValidationError({"created_before": "the range ends before it starts"})
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationError({"expires_at": "an expiry is in the future (empty: until lifted)"})
    if author is None:
        scope = HoldScope.REVIEWS
    else:
        scope = HoldScope.QUERY if created_from or created_before else HoldScope.AUTHOR
    with transaction.atomic():
        locked = _lock_held(review_ids, author=author, created_from=created_from, created_before=created_before)
        if review_ids and len(locked) != len(review_ids):
            raise ValidationError({"reviews": f"{len(review_ids) - len(locked)} of the reviews named do not exist"})
        now = timezone.now()  # once the locks are held: no erasure of what it keeps ends after it
        hold = LegalHold.objects.create(scope=scope, author=author, created_from=created_from,
                                        created_before=created_before, reason=reason, reference=reference,
                                        placed_by=placed_by, placed_at=now, expires_at=expires_at)
        hold.reviews.set(review_ids)
        LegalHoldEvent.objects.create(hold=hold, action=HoldAction.PLACED, actor_id=placed_by, at=now,
                                      expires_at=expires_at, note=reason)
    return hold


def _lock_held(review_ids: list, *, author: Author | None, created_from: datetime | None,
               created_before: datetime | None) -> list:
    """Take the row lock of every review a hold keeps, the lock an erasure takes before it asks
    whether its review is held (the module docstring). The ids locked."""
    if review_ids:
        rows = ContentReview.objects.filter(pk__in=review_ids)
    else:
        rows = ContentReview.objects.filter(author=author)
        if created_from:
            rows = rows.filter(content__created_at__gte=created_from)
        if created_before:
            rows = rows.filter(content__created_at__lt=created_before)
    return list(rows.select_for_update(of=("self",)).order_by("pk").values_list("pk", flat=True))


def _hold_locked(hold_id) -> LegalHold:
    hold = LegalHold.objects.select_for_update().filter(pk=hold_id).first()
    if hold is None:
        raise ValidationError(f"no legal hold {hold_id}")
    if not hold.active_at(timezone.now()):
        raise ValidationError(f"legal hold {hold_id} has ended")
    return hold


def hold_extend(*, hold_id: int, expires_at: datetime | None, by: str, note: str = "") -> LegalHold:
    """Move an active hold's expiry later (None: until lifted), audited."""
    by = required_text(by, "by", 150)
    with transaction.atomic():
        hold = _hold_locked(hold_id)
        if expires_at is not None and (hold.expires_at is None or expires_at <= hold.expires_at):
            raise ValidationError({"expires_at": "an extension ends later than the hold does now"})
        hold.expires_at = expires_at
        hold.save(update_fields=["expires_at"])
        LegalHoldEvent.objects.create(hold=hold, action=HoldAction.EXTENDED, actor_id=by, expires_at=expires_at,
                                      note=note.strip())
    return hold


def hold_lift(*, hold_id: int, by: str, reason: str) -> LegalHold:
    """Lift an active hold, audited; the erasures it deferred run after commit (those another hold
    still keeps stay deferred)."""
    by = required_text(by, "by", 150)
    reason = required_text(reason, "reason", HOLD_TEXT_MAX)
    with transaction.atomic():
        hold = _hold_locked(hold_id)
        hold.lifted_at, hold.lifted_by = timezone.now(), by
        hold.save(update_fields=["lifted_at", "lifted_by"])
        LegalHoldEvent.objects.create(hold=hold, action=HoldAction.LIFTED, actor_id=by, at=hold.lifted_at,
                                      expires_at=hold.expires_at, note=reason)
        enqueue_on_commit("moderation.tasks.erasures_deferred_run")
    return hold


HOTLINE_HOLD_DAYS = 365  # US REPORT Act (2024): a CyberTipline report's contents kept one year


def hold_for_a_year(*, review_id, reference: str, reason: str, placed_by: str) -> LegalHold:
    """The one-year hold a hotline report or an urgent escalation places on its review."""
    return hold_place(reviews=[review_id], reference=reference, reason=reason, placed_by=placed_by,
                      expires_at=timezone.now() + timedelta(days=HOTLINE_HOLD_DAYS))
