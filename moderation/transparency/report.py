"""The DSA transparency report (DSA Art. 15 and 24; docs/transparency.md, "The transparency
report"): a period's notices, actions, internal complaints, account restrictions, the accuracy
of automated means and the corrections, as the Commission's report templates ask for them.

The period is the days `start` to `end`, both included, in UTC: the half-open interval
[start 00:00 UTC, end + 1 day 00:00 UTC). Half-open so that consecutive periods (a month, then
the next) count every row exactly once, whatever its microseconds; UTC because the
Transparency Database's own dates (`application_date`) are UTC days.

Every figure comes from a fixed number of aggregate queries (GROUP BY with COUNT ... FILTER and
percentile_cont), each bounded by a range on an indexed timestamp, so the cost follows the
period's rows and never a loop in Python: the only Python loops run over grouped rows (a few
categories times a few kinds), never over the data. A figure is "as of now" for the rows of the
period: a notice received in the period and actioned after it counts as actioned.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from django.db import connection, transaction
from django.db.models import Aggregate, Case, CharField, Count, F, FloatField, Func, Q, QuerySet, Value, When

from moderation.models import (
    AccountAction,
    Cause,
    AccountAppeal,
    AccountAppealStatus,
    ActionCause,
    ActionKind,
    Appeal,
    AppealStatus,
    Report,
    ReportKind,
    ReportOutcome,
    ReviewQueue,
    TransparencyStatement,
    vocabulary,
)
from moderation.selectors import decision_times, decisions_between
from moderation.transparency.statements import (
    AUTOMATED_DECISION,
    AUTOMATION_FULLY,
    AUTOMATION_PARTIALLY,
    SOURCE_TYPE,
)

# Statements whose decision automated means took or prepared: the accuracy figure's subjects.
AUTOMATED = (AUTOMATED_DECISION[AUTOMATION_FULLY], AUTOMATED_DECISION[AUTOMATION_PARTIALLY])
OPEN = "open"  # a report without an outcome yet (Report.outcome "")


class RestrictionType(StrEnum):
    """What a statement restricted, from its facts (moderation/services/statements.py)."""

    CONTENT_VISIBILITY = "content_visibility"
    ACCOUNT_SUSPENSION = "account_suspension"
    ACCOUNT_TERMINATION = "account_termination"


class Median(Aggregate):
    """PostgreSQL's percentile_cont(0.5): the median, computed by the database over the group."""

    function = "percentile_cont"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def seconds_between(later: str, earlier: str) -> Func:
    return Func(F(later), F(earlier), template="EXTRACT(EPOCH FROM %(expressions)s)", arg_joiner=" - ",
                output_field=FloatField())


# The last day a period may end on: it is counted up to the midnight after it, which must be a
# date too (9999-12-31 has none).
LAST_DAY = date.max - timedelta(days=1)


def period_bounds(start: date, end: date) -> tuple[datetime, datetime]:
    """[start 00:00 UTC, end + 1 day 00:00 UTC): the period's days, both included."""
    if end < start:
        raise ValueError(f"the period ends ({end}) before it starts ({start})")
    if end > LAST_DAY:
        raise ValueError(f"the period ends ({end}) after the last day a report can count ({LAST_DAY})")
    return datetime.combine(start, time.min, tzinfo=UTC), datetime.combine(end + timedelta(days=1), time.min, tzinfo=UTC)


def _in(field: str, since: datetime, until: datetime) -> Q:
    return Q(**{f"{field}__gte": since, f"{field}__lt": until})


# --- notices (Art. 15(1)(b), 16) ----------------------------------------------------------------

# What became of the notices: each figure's name, and the Report.outcome it counts ("" while open).
_OUTCOMES = {**{outcome.value: outcome.value for outcome in ReportOutcome}, OPEN: ""}


def _outcome_counts() -> dict[str, Count]:
    return {"received": Count("pk"), **{name: Count("pk", filter=Q(outcome=value)) for name, value in _OUTCOMES.items()}}


# The kind of report behind a stay in a review queue (docs/design.md, "Deadlines"): the notice
# kind the review had when it entered, else "user" when user reports sent it.
_VISIT_KIND = Case(
    When(~Q(notice_kind=""), then=F("notice_kind")),
    When(cause=Cause.USER_REPORTS.value, then=Value(ReportKind.USER.value)),
    default=Value(""), output_field=CharField(),
)


def notices(since: datetime, until: datetime) -> dict[str, Any]:
    """The reports received in the period, by kind and by reason, with what became of them
    (report_created_idx); and per kind the median time to act: from the anchor (when the review
    entered its queue, docs/design.md "Deadlines") to the decision, of the decisions made in the
    period on reviews that kind of report sent to a human, as the deadline figures count it
    (moderation.selectors.decision_times: an undone decision is none)."""
    received = Report.objects.filter(_in("created_at", since, until)).order_by()
    by_kind = {kind: {**dict.fromkeys(["received", *_OUTCOMES], 0), "median_seconds_to_action": None}
               for kind in ReportKind.values}
    for row in received.values("kind").annotate(**_outcome_counts()):
        by_kind[row.pop("kind")].update(row)
    for row in decision_times(decisions_between(since, until).annotate(kind=_VISIT_KIND).filter(
            kind__in=ReportKind.values), "kind"):
        by_kind[row["kind"]]["median_seconds_to_action"] = row["median_s"]
    by_reason = {row.pop("reason"): row for row in received.values("reason").annotate(**_outcome_counts())}
    total = {name: sum(figures[name] for figures in by_kind.values()) for name in ["received", *_OUTCOMES]}
    return {"total": total, "by_kind": by_kind, "by_reason": by_reason}


# --- actions: the statements of reasons (Art. 15(1)(c), 24(5)) ---------------------------------

_RESTRICTION = Case(
    When(Q(facts__kind="account", facts__action=ActionKind.BAN.value),
         then=Value(RestrictionType.ACCOUNT_TERMINATION.value)),
    When(Q(facts__kind="account"), then=Value(RestrictionType.ACCOUNT_SUSPENSION.value)),
    default=Value(RestrictionType.CONTENT_VISIBILITY.value),
    output_field=CharField(),
)


_RESTRICTIONS = [restriction.value for restriction in RestrictionType]


def statement_groups(field: str, since: datetime, until: datetime) -> QuerySet:
    """The statements whose `field` (created_at, overturned_at) falls in the period, counted by
    category, automation, source and restriction, with how many of them were overturned."""
    return (TransparencyStatement.objects.filter(_in(field, since, until)).order_by()
            .annotate(restriction=_RESTRICTION)
            .values("dsa_category", "automated_decision", "source_type", "restriction")
            .annotate(count=Count("pk"), overturned=Count("pk", filter=Q(overturned_at__isnull=False))))


def _tally(groups: Iterable[dict], key: str, keys: Iterable[str] = ()) -> dict[str, int]:
    counts = dict.fromkeys(keys, 0)
    for group in groups:
        counts[group[key]] = counts.get(group[key], 0) + group["count"]
    return counts


def _categories() -> list[str]:
    return list(vocabulary()["STATEMENT_CATEGORIES"])


def actions(groups: list[dict]) -> dict[str, Any]:
    """The statements written in the period, by DSA category, by what they restricted, by how
    automated the decision was and by whose initiative (statement_created_idx)."""
    return {
        "total": sum(group["count"] for group in groups),
        "by_category": _tally(groups, "dsa_category", _categories()),
        "by_type": _tally(groups, "restriction", _RESTRICTIONS),
        "by_automated_decision": _tally(groups, "automated_decision", AUTOMATED_DECISION.values()),
        "by_source_type": _tally(groups, "source_type", dict.fromkeys(SOURCE_TYPE.values())),
    }


def automation(groups: list[dict]) -> dict[str, Any]:
    """Accuracy of automated means (Art. 15(1)(e)): per DSA category, the period's statements of
    fully or partially automated decisions and the share of them overturned since."""
    by_category: dict[str, dict[str, Any]] = {}
    for group in groups:
        if group["automated_decision"] in AUTOMATED:
            figures = by_category.setdefault(group["dsa_category"], {"automated": 0, "overturned": 0})
            figures["automated"] += group["count"]
            figures["overturned"] += group["overturned"]
    total = {"automated": sum(f["automated"] for f in by_category.values()),
             "overturned": sum(f["overturned"] for f in by_category.values())}
    for figures in [*by_category.values(), total]:
        figures["overturned_share"] = figures["overturned"] / figures["automated"] if figures["automated"] else None
    return {"total": total, "by_category": by_category}


def corrections(since: datetime, until: datetime) -> dict[str, Any]:
    """The statements overturned in the period, whenever they were written: the restriction was
    lifted (statement_overturned_idx)."""
    groups = list(statement_groups("overturned_at", since, until))
    return {"total": sum(group["count"] for group in groups), "by_category": _tally(groups, "dsa_category"),
            "by_type": _tally(groups, "restriction", _RESTRICTIONS)}


# --- internal complaints (Art. 20, 15(1)(d)) and account restrictions -----------------------------

def _appeals(model, upheld: str, overturned: str, since: datetime, until: datetime) -> dict[str, Any]:
    """Received (created) and decided (resolved) in the period: one query, the two ranges OR-ed
    so that each takes its own index (`*_created_idx`, `*_resolved_idx`)."""
    received, decided = _in("created_at", since, until), _in("resolved_at", since, until)
    return model.objects.filter(received | decided).order_by().aggregate(
        received=Count("pk", filter=received),
        decided=Count("pk", filter=decided),
        upheld=Count("pk", filter=decided & Q(status=upheld)),
        overturned=Count("pk", filter=decided & Q(status=overturned)),
        median_seconds_to_decide=Median(seconds_between("resolved_at", "created_at"), filter=decided),
    )


def appeals(since: datetime, until: datetime) -> dict[str, Any]:
    return {
        "content": _appeals(Appeal, AppealStatus.UPHELD, AppealStatus.OVERTURNED, since, until),
        "account": _appeals(AccountAppeal, AccountAppealStatus.UPHELD, AccountAppealStatus.OVERTURNED, since, until),
    }


def accounts(since: datetime, until: datetime) -> dict[str, Any]:
    """The suspensions and bans taken in the period, by cause (account_action_created_idx)."""
    figures = {name: {"total": 0, **dict.fromkeys(ActionCause.values, 0)} for name in ("suspensions", "terminations")}
    name_of = {ActionKind.SUSPEND.value: "suspensions", ActionKind.BAN.value: "terminations"}
    rows = (AccountAction.objects.filter(_in("created_at", since, until), action__in=list(name_of)).order_by()
            .values("action", "cause").annotate(count=Count("pk")))
    for row in rows:
        figures[name_of[row["action"]]][row["cause"]] = row["count"]
        figures[name_of[row["action"]]]["total"] += row["count"]
    return figures


# --- time to decision per review queue (docs/design.md, "Deadlines") ---------------------------

# The name a published report gives every queue an operator made: their names are internal, and
# a queue restricted to some groups must not be named to whoever may read the report.
CUSTOM_QUEUES = "custom"


def time_to_decision(since: datetime, until: datetime) -> dict[str, Any]:
    """Per review queue, the decisions made in the period, their median and 95th percentile
    seconds from anchor to decision, and those made after their due time: the deadline page's
    computation over the period (queue_visit_decided_idx). The built-in queues by name, the
    operators' own together as CUSTOM_QUEUES."""
    visits = decisions_between(since, until).annotate(published_queue=Case(
        When(queue__in=ReviewQueue.values, then=F("queue")), default=Value(CUSTOM_QUEUES), output_field=CharField()))
    return {row["published_queue"]: {"decided": row["decided"], "median_seconds": row["median_s"],
                                     "p95_seconds": row["p95_s"], "breached": row["breached"]}
            for row in decision_times(visits, "published_queue")}


# --- the report ---------------------------------------------------------------------------------

def transparency_report(*, start: date, end: date) -> dict[str, Any]:
    """Every figure of the period's report (9 queries whatever the data). Raises ValueError when
    `end` is before `start` or after LAST_DAY."""
    since, until = period_bounds(start, end)
    with _one_snapshot():
        groups = list(statement_groups("created_at", since, until))
        return {
            "period": {"start": start.isoformat(), "end": end.isoformat(), "from": since.isoformat(),
                       "until": until.isoformat()},
            "notices": notices(since, until),
            "actions": actions(groups),
            "automation": automation(groups),
            "corrections": corrections(since, until),
            "appeals": appeals(since, until),
            "accounts": accounts(since, until),
            "time_to_decision": time_to_decision(since, until),
        }


@contextmanager
def _one_snapshot() -> Iterator[None]:
    """The report's queries in one REPEATABLE READ, READ ONLY transaction, so its figures agree
    with each other (a notice counted actioned has its action counted) while decisions go on.
    Inside a caller's transaction (a test's) that transaction's snapshot is used as it is: the
    isolation level can only be set by a transaction's first statement."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


# --- its flat form: the command's CSV, the admin page's tables ----------------------------------

def report_rows(report: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(section, key, value) for each figure: `section` a top-level name (period, notices, ...),
    `key` the path below it joined with "." (notices: "by_kind.user.actioned"), in the
    report's order."""
    for section, figures in report.items():
        for key, value in _flatten(figures):
            yield section, key, value


def _flatten(figures: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in figures.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{key}.")
        else:
            yield key, value


def report_csv(report: dict[str, Any]) -> str:
    """The report as CSV: a header `section,key,value`, then one row per figure; a missing
    figure (a median of nothing, a share of none) is an empty value."""
    out = io.StringIO()
    # The default line ending, "\r\n" (RFC 4180): with "\n" alone, a lone "\r" in a name would
    # go out unquoted and split the row when read back.
    writer = csv.writer(out)
    writer.writerow(["section", "key", "value"])
    writer.writerows((section, key, "" if value is None else value) for section, key, value in report_rows(report))
    return out.getvalue()
