"""Reporters: how much a reporter's report weighs, and a moderator's mute (docs/design.md,
"Reporters").

The weight rule is written once, here, twice over: `reporter_weight` for Python and
`weight_expression` for SQL (the admin's filter, the metrics), and a test holds the two equal
over every count up to a bound. A reporter (per client) with fewer than RATED_AFTER resolved
reports weighs 1; from RATED_AFTER on, 0.5 + 1.5 * the share of them a moderator actioned (0.5
for none, 2.0 for all), to two decimals, the precision `Report.weight` keeps. One with at least
MUTE_AFTER resolved reports of which fewer than 10% were actioned is muted: it weighs 0 for the
threshold, and its reports are still stored, counted and told their outcome. A moderator's
`mute` overrides the accuracy rule either way: `muted` weighs 0, `unmuted` weighs its accuracy
weight whatever the rule says.

Locking rule: a report takes its review's row lock first, then the reporter's with FOR KEY SHARE
(`reporter_weight_locked`): reports of one reporter never wait for one another, nor for the
counters a decision adds (an UPDATE of non-key columns takes FOR NO KEY UPDATE, which KEY SHARE
does not conflict with). A moderator's mute takes FOR UPDATE, which does conflict: it waits for
the reports in flight, and a report waits for a mute in flight, so a report that commits after a
mute always weighs what the mute says. Nothing locks a review while holding a reporter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from django.db import connection, transaction
from django.db.models import Case, Count, DecimalField, F, Q, Value, When
from django.db.models.functions import Cast, Round
from django.db.models.lookups import LessThan
from django.utils import timezone

from moderation.errors import ReasonRequired, StaleReporter
from moderation.models import ACCOUNT_REASON_MAX, Reporter, ReporterMute

logger = logging.getLogger(__name__)

RATED_AFTER = 5  # resolved reports before the accuracy counts (the contract's "at least 5")
MUTE_AFTER = 10  # resolved reports before the accuracy may mute
MUTE_BELOW_PERCENT = 10  # muted when fewer than this share of them were actioned
LOWEST, NEUTRAL, HIGHEST, MUTED_WEIGHT = Decimal("0.50"), Decimal("1.00"), Decimal("2.00"), Decimal("0.00")
_CENT = Decimal("0.01")


# --- the rule -----------------------------------------------------------------------------------

def accuracy_weight(resolved: int, actioned: int) -> Decimal:
    """What a reporter weighs by their accuracy alone: 1 until RATED_AFTER resolved reports, then
    linear in the share actioned, from 0.5 (none) to 2.0 (all), rounded half up to 0.01."""
    _check_counts(resolved, actioned)
    if resolved < RATED_AFTER:
        return NEUTRAL
    # 0.5 + 1.5 * a / r as one exact fraction, (r + 3a) / 2r, before the one rounding.
    return (Decimal(resolved + 3 * actioned) / Decimal(2 * resolved)).quantize(_CENT, rounding=ROUND_HALF_UP)


def muted_by_accuracy(resolved: int, actioned: int) -> bool:
    """Fewer than MUTE_BELOW_PERCENT% actioned of at least MUTE_AFTER resolved reports."""
    _check_counts(resolved, actioned)
    return resolved >= MUTE_AFTER and actioned * 100 < resolved * MUTE_BELOW_PERCENT


def reporter_weight(*, resolved: int, actioned: int, mute: str = ReporterMute.AUTO) -> Decimal:
    """The weight a new report of this reporter carries toward the threshold (0 when muted)."""
    mute = ReporterMute(mute)
    if mute == ReporterMute.MUTED or (mute == ReporterMute.AUTO and muted_by_accuracy(resolved, actioned)):
        return MUTED_WEIGHT
    return accuracy_weight(resolved, actioned)


def _check_counts(resolved: int, actioned: int) -> None:
    if not 0 <= actioned <= resolved:
        raise ValueError(f"a reporter's counts need 0 <= actioned <= resolved, not {actioned} of {resolved}")


def share_below(num: int, den: int) -> Q:
    """A Reporter row whose share actioned is under num/den: actioned * den < resolved * num,
    in integers, as the Python compares."""
    return Q(LessThan(F("actioned") * den, F("resolved") * num))


# The same rule over a Reporter row, for queries.
MUTED_BY_ACCURACY = Q(resolved__gte=MUTE_AFTER) & share_below(MUTE_BELOW_PERCENT, 100)
MUTED = Q(mute=ReporterMute.MUTED) | (Q(mute=ReporterMute.AUTO) & MUTED_BY_ACCURACY)


def weight_expression() -> Case:
    """`reporter_weight` as a SQL expression over a Reporter row (PostgreSQL's round() of a
    numeric rounds half away from zero: half up, as the Python)."""
    money, whole = DecimalField(max_digits=3, decimal_places=2), DecimalField(max_digits=20, decimal_places=0)
    # (r + 3a) / 2r as numerics: PostgreSQL divides them to at least 16 decimals, then rounds once.
    share = Cast(F("resolved") + 3 * F("actioned"), whole) / Cast(2 * F("resolved"), whole)
    return Case(
        When(MUTED, then=Value(MUTED_WEIGHT)),
        When(resolved__lt=RATED_AFTER, then=Value(NEUTRAL)),
        default=Round(share, 2),
        output_field=money,
    )


@dataclass(frozen=True)
class ReporterStanding:
    """What the admin shows of a reporter: the share actioned (None until rated), the weight,
    and whether and why it is muted ("accuracy", "moderator" or "")."""

    accuracy: Decimal | None
    weight: Decimal
    muted_by: str


def reporter_standing(reporter: Reporter) -> ReporterStanding:
    resolved, actioned = reporter.resolved, reporter.actioned
    accuracy = Decimal(actioned) / Decimal(resolved) if resolved >= RATED_AFTER else None
    if reporter.mute == ReporterMute.MUTED:
        muted_by = "moderator"
    elif reporter.mute == ReporterMute.AUTO and muted_by_accuracy(resolved, actioned):
        muted_by = "accuracy"
    else:
        muted_by = ""
    return ReporterStanding(accuracy=accuracy, muted_by=muted_by,
                            weight=reporter_weight(resolved=resolved, actioned=actioned, mute=reporter.mute))


# --- figures ------------------------------------------------------------------------------------

# The accuracy bands of /metrics (`moderation_reporters{accuracy_band}`) for rated reporters, each
# with its upper bound on the share actioned (exclusive; the last one takes the rest, up to 100%):
# under 10% is where the rule mutes, under a third where a reporter weighs under 1.
UNRATED = "unrated"
ACCURACY_BANDS = {"0-10": (MUTE_BELOW_PERCENT, 100), "10-33": (1, 3), "33-67": (2, 3), "67-100": None}


def accuracy_band(resolved: int, actioned: int) -> str:
    """The band of `ACCURACY_BANDS` (or UNRATED) a reporter's counts fall in."""
    _check_counts(resolved, actioned)
    if resolved < RATED_AFTER:
        return UNRATED
    return next(band for band, bound in ACCURACY_BANDS.items() if bound is None or actioned * bound[1] < resolved * bound[0])


def reporter_counts() -> dict:
    """Reporters by accuracy band (`accuracy_band`, in SQL), and the muted ones by who muted them
    ("accuracy", "moderator"), in two passes over the table."""
    band = Case(When(resolved__lt=RATED_AFTER, then=Value(UNRATED)),
                *[When(share_below(*bound), then=Value(name)) for name, bound in ACCURACY_BANDS.items() if bound],
                default=Value(next(reversed(ACCURACY_BANDS))))
    bands = dict(Reporter.objects.annotate(band=band).values_list("band").annotate(n=Count("pk")).order_by())
    muted = Reporter.objects.aggregate(accuracy=Count("pk", filter=Q(mute=ReporterMute.AUTO) & MUTED_BY_ACCURACY),
                                       moderator=Count("pk", filter=Q(mute=ReporterMute.MUTED)))
    return {"bands": bands, "muted": muted}


# --- a report's reporter ------------------------------------------------------------------------

_ENSURE = """
INSERT INTO moderation_reporter (client_id, reporter_id, resolved, actioned, mute, mute_reason, created_at)
VALUES (%(client)s, %(reporter_id)s, 0, 0, '', '', now())
ON CONFLICT (client_id, reporter_id) DO NOTHING
"""
_READ = """
SELECT resolved, actioned, mute FROM moderation_reporter WHERE client_id = %(client)s AND reporter_id = %(reporter_id)s
FOR KEY SHARE
"""


def reporter_weight_locked(*, client_id: int, reporter_id: str) -> Decimal:
    """The weight of `reporter_id` of `client_id` now, creating the reporter on its first report.

    Call inside the report's transaction, holding its review's row lock. The insert (of a reporter
    not found) waits only for a transaction inserting the same one (then does nothing); the
    read's FOR KEY SHARE keeps a moderator's mute (FOR UPDATE) from landing between this read
    and the report's commit, and makes this read wait for a mute in flight. The row's history is not written for a creation:
    a reporter's history is its mutes (the counters are excluded from it too).
    """
    params = {"client": client_id, "reporter_id": reporter_id}
    with connection.cursor() as cursor:
        cursor.execute(_READ, params)
        row = cursor.fetchone()
        if row is None:
            # Read first, insert only when missing: an insert's unique check on an existing row
            # waits for a transaction updating it (a decision adding to the counters).
            cursor.execute(_ENSURE, params)
            # A new statement, a new snapshot: it sees a row another transaction inserted and
            # committed while the insert above waited for it.
            cursor.execute(_READ, params)
            row = cursor.fetchone()
    resolved, actioned, mute = row
    return reporter_weight(resolved=resolved, actioned=actioned, mute=mute)


# --- a moderator's mute -------------------------------------------------------------------------

def mute_token(reporter: Reporter) -> str:
    """What a mute form carries of the reporter it was rendered from: its mute and when that last
    changed. A form whose token is no longer the reporter's is stale."""
    changed = reporter.mute_changed_at.isoformat() if reporter.mute_changed_at else "never"
    return f"{reporter.mute or 'auto'}@{changed}"


def reporter_mute(*, reporter_pk: int, muted: bool | None, reason: str, user,
                  expected: str | None = None) -> Reporter:
    """A moderator mutes (`muted=True`), unmutes (`False`) or hands back to the accuracy rule
    (`None`) a reporter, with a reason: the reporter's history row records who, when and why.

    Refused with StaleReporter when `expected` (a `mute_token`) is not the reporter's: another
    moderator changed its mute since the page this came from. Reports already filed keep the
    weight they arrived with; the new weight counts from the next report.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("a reason is required to mute or unmute a reporter")
    if len(reason) > ACCOUNT_REASON_MAX:
        raise ReasonRequired(f"a reason is at most {ACCOUNT_REASON_MAX} characters")
    if muted not in (True, False, None):
        raise ValueError(f"muted is True, False or None, not {muted!r}")
    mute = {True: ReporterMute.MUTED, False: ReporterMute.UNMUTED, None: ReporterMute.AUTO}[muted]
    with transaction.atomic():
        # FOR UPDATE, not NO KEY UPDATE: it must conflict with the reports' FOR KEY SHARE.
        reporter = Reporter.objects.select_for_update(of=("self",)).select_related("mute_changed_by").get(pk=reporter_pk)
        if expected is not None and mute_token(reporter) != expected:
            raise StaleReporter(reporter=reporter, expected=expected)
        now: datetime = timezone.now()
        reporter.mute, reporter.mute_reason = mute, reason
        reporter.mute_changed_by, reporter.mute_changed_at = user, now
        reporter._change_reason = f"{mute.label}: {reason}"[:100]  # simple-history's column is 100 long
        reporter._history_user = user
        reporter.save(update_fields=["mute", "mute_reason", "mute_changed_by", "mute_changed_at"])
        logger.info("reporter %s of client %s: %s by user %s", reporter.reporter_id, reporter.client_id,
                    mute.label, getattr(user, "pk", None))
    return reporter
