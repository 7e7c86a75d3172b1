"""The transparency report's figures counted straight from the tables, the slow obvious way
(plain ORM filters, Python over the rows): the oracle the report's aggregate queries are
checked against (tests/moderation/test_transparency_report.py, and the race lab with its own
period). Written without the report's code, so that a wrong GROUP BY or FILTER shows."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from moderation.models import (
    AccountAction,
    AccountAppeal,
    Appeal,
    QueueVisit,
    Report,
    ReviewQueue,
    TransparencyStatement,
    vocabulary,
)

AUTOMATED_DECISIONS = ["AUTOMATED_DECISION_FULLY", "AUTOMATED_DECISION_PARTIALLY", "AUTOMATED_DECISION_NOT_AUTOMATED"]
SOURCE_TYPES = ["SOURCE_VOLUNTARY", "SOURCE_ARTICLE_16", "SOURCE_TRUSTED_FLAGGER"]
TYPES = ["content_visibility", "account_suspension", "account_termination"]
OUTCOME_NAMES = {"actioned": "actioned", "no_action": "no_action", "expired": "expired", "": "open"}


def _median_seconds(pairs) -> float | None:
    seconds = [(resolved - created).total_seconds() for created, resolved in pairs]
    return statistics.median(seconds) if seconds else None


def _outcomes(reports: list[dict]) -> dict[str, int]:
    counts = {"received": len(reports), **dict.fromkeys(OUTCOME_NAMES.values(), 0)}
    for report in reports:
        counts[OUTCOME_NAMES[report["outcome"]]] += 1
    return counts


def _percentile(values: list[float], fraction: float) -> float | None:
    """PostgreSQL's percentile_cont, the obvious way: linear between the two nearest ranks."""
    if not values:
        return None
    ranked = sorted(values)
    at = fraction * (len(ranked) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ranked) - 1)
    return ranked[low] + (ranked[high] - ranked[low]) * (at - low)


def _decided_visits(since, until) -> list[QueueVisit]:
    """The stays in a review queue a decision ended in the period (an undone one reopened its visit)."""
    return [v for v in QueueVisit.objects.all() if v.decided and since <= v.left_at < until]


def _visit_kind(visit: QueueVisit) -> str:
    return visit.notice_kind or ("user" if visit.cause == "user_reports" else "")


def _notices(since, until) -> dict[str, Any]:
    reports = list(Report.objects.filter(created_at__gte=since, created_at__lt=until)
                   .values("kind", "reason", "outcome", "created_at", "resolved_at"))
    visits = _decided_visits(since, until)
    by_kind = {}
    for kind in ("user", "dsa_notice", "trusted_flagger"):
        mine = [r for r in reports if r["kind"] == kind]
        by_kind[kind] = {**_outcomes(mine), "median_seconds_to_action": _median_seconds(
            (v.anchor_at, v.left_at) for v in visits if _visit_kind(v) == kind)}
    by_reason = {reason: _outcomes([r for r in reports if r["reason"] == reason])
                 for reason in {r["reason"] for r in reports}}
    return {"total": _outcomes(reports), "by_kind": by_kind, "by_reason": by_reason}


def _type(facts: dict) -> str:
    if facts["kind"] == "decision":
        return "content_visibility"
    return "account_termination" if facts["action"] == "ban" else "account_suspension"


def _count_by(statements: list[dict], key, keys=()) -> dict[str, int]:
    counts = dict.fromkeys(keys, 0)
    for statement in statements:
        counts[key(statement)] = counts.get(key(statement), 0) + 1
    return counts


def _share(overturned: int, automated: int) -> dict[str, Any]:
    return {"automated": automated, "overturned": overturned,
            "overturned_share": overturned / automated if automated else None}


def _statements(since, until) -> dict[str, Any]:
    made = list(TransparencyStatement.objects.filter(created_at__gte=since, created_at__lt=until)
                .values("dsa_category", "automated_decision", "source_type", "facts", "overturned_at"))
    automated = [s for s in made if s["automated_decision"] in AUTOMATED_DECISIONS[:2]]
    overturned = list(TransparencyStatement.objects.filter(overturned_at__gte=since, overturned_at__lt=until)
                      .values("dsa_category", "facts"))
    return {
        "actions": {
            "total": len(made),
            "by_category": _count_by(made, lambda s: s["dsa_category"], vocabulary()["STATEMENT_CATEGORIES"]),
            "by_type": _count_by(made, lambda s: _type(s["facts"]), TYPES),
            "by_automated_decision": _count_by(made, lambda s: s["automated_decision"], AUTOMATED_DECISIONS),
            "by_source_type": _count_by(made, lambda s: s["source_type"], SOURCE_TYPES),
        },
        "automation": {
            "total": _share(sum(s["overturned_at"] is not None for s in automated), len(automated)),
            "by_category": {category: _share(sum(s["overturned_at"] is not None for s in mine), len(mine))
                            for category in {s["dsa_category"] for s in automated}
                            for mine in [[s for s in automated if s["dsa_category"] == category]]},
        },
        "corrections": {
            "total": len(overturned),
            "by_category": _count_by(overturned, lambda s: s["dsa_category"]),
            "by_type": _count_by(overturned, lambda s: _type(s["facts"]), TYPES),
        },
    }


def _appeals(model, since, until) -> dict[str, Any]:
    received = model.objects.filter(created_at__gte=since, created_at__lt=until)
    decided = model.objects.filter(resolved_at__gte=since, resolved_at__lt=until)
    return {
        "received": received.count(),
        "decided": decided.count(),
        "upheld": decided.filter(status="upheld").count(),
        "overturned": decided.filter(status="overturned").count(),
        "median_seconds_to_decide": _median_seconds(decided.values_list("created_at", "resolved_at")),
    }


def _accounts(since, until) -> dict[str, Any]:
    actions = AccountAction.objects.filter(created_at__gte=since, created_at__lt=until)
    figures = {}
    for name, action in (("suspensions", "suspend"), ("terminations", "ban")):
        mine = actions.filter(action=action)
        figures[name] = {"total": mine.count(), "strikes": mine.filter(cause="strikes").count(),
                         "moderator": mine.filter(cause="moderator").count()}
    return figures


def _time_to_decision(since, until) -> dict[str, Any]:
    figures = {}
    visits = _decided_visits(since, until)
    # The built-in queues by name; every queue an operator made under one name, never its own.
    published = {v.pk: v.queue if v.queue in ReviewQueue.values else "custom" for v in visits}
    for queue in set(published.values()):
        mine = [v for v in visits if published[v.pk] == queue]
        seconds = [(v.left_at - v.anchor_at).total_seconds() for v in mine]
        figures[queue] = {"decided": len(mine), "median_seconds": _percentile(seconds, 0.5),
                          "p95_seconds": _percentile(seconds, 0.95),
                          "breached": sum(1 for v in mine if v.left_at > v.due_at)}
    return figures


def transparency_counts_from_tables(*, start: date, end: date) -> dict[str, Any]:
    """The report of the days `start` to `end` (both included, UTC) as the tables hold it."""
    since = datetime.combine(start, time.min, tzinfo=UTC)
    until = datetime.combine(end + timedelta(days=1), time.min, tzinfo=UTC)
    return {
        "period": {"start": start.isoformat(), "end": end.isoformat(), "from": since.isoformat(),
                   "until": until.isoformat()},
        "notices": _notices(since, until),
        **_statements(since, until),
        "appeals": {"content": _appeals(Appeal, since, until), "account": _appeals(AccountAppeal, since, until)},
        "accounts": _accounts(since, until),
        "time_to_decision": _time_to_decision(since, until),
    }


def assert_same_figures(actual: Any, expected: Any, where: str = "report") -> None:
    """`actual == expected`, floats (medians, shares) to a microsecond's precision: the database
    and Python compute them apart."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and set(actual) == set(expected), (where, actual, expected)
        for key in expected:
            assert_same_figures(actual[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, float) and actual is not None:
        assert math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-6), (where, actual, expected)
    else:
        assert actual == expected and type(actual) is type(expected), (where, actual, expected)
