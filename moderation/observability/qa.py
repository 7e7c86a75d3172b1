"""The moderators' QA figures (docs/qa.md), by moderator, category and week (ISO weeks, UTC):

- accuracy on golden items: of the golden items a moderator answered, the share answered as the
  team lead expected (the label, and a rejection's category);
- agreement with second reviews: Cohen's kappa between the first decision and the second
  review, per category (each rater's judgement read as "rejected as this category" or not) and
  over every label ("approved", or "rejected as C" for each C);
- the overturn rate on appeal: of a moderator's rejections whose appeal was decided, the share
  overturned;
- the time per decision: from when "Review next" leased a moderator the review to their decision.

`viewer`: None reads every moderator's figures; a user name reads only theirs (for agreement:
the pairs they took part in, as first decider or as second reviewer).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from django.db.models import Aggregate, Avg, Count, F, FloatField, Q
from django.db.models.functions import TruncWeek

from moderation.models import Appeal, AppealStatus, DecisionSource, DecisionTime, QaItem, QaKind, ReviewStatus

APPROVAL = "(approval)"  # the category column of an approval


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]]) -> float | None:
    """Cohen's kappa of two raters' labels for the same items: (p_o - p_e) / (1 - p_e), p_o the
    share of items they label alike, p_e the share expected by chance from each rater's own
    label frequencies. None when it is undefined: no pairs, or both raters gave one and the same
    label to every item (p_e = 1)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[label] * second[label] for label in first.keys() | second.keys()) / (n * n)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def category_kappa(pairs: Sequence[tuple[str, str]], category: str) -> float | None:
    """Kappa for one category: each judgement read as "rejected as `category`" or not."""
    target = _judgement(ReviewStatus.REJECTED, category)
    return cohen_kappa([(a == target, b == target) for a, b in pairs])


def _judgement(label: str, category: str) -> str:
    return f"{label}:{category}" if label == ReviewStatus.REJECTED else str(label)


class Median(Aggregate):
    """PostgreSQL's median of a column (percentile_cont(0.5) WITHIN GROUP)."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


@dataclass(frozen=True)
class GoldenRow:
    moderator: str
    week: date
    category: str
    answered: int
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.answered


@dataclass(frozen=True)
class AgreementRow:
    week: date
    category: str
    pairs: int  # second reviews answered that week
    both: int  # of them, how many both raters rejected as this category
    kappa: float | None


@dataclass(frozen=True)
class ModeratorAgreementRow:
    moderator: str
    week: date
    pairs: int
    agreed: int
    kappa: float | None  # over every label

    @property
    def agreement(self) -> float:
        return self.agreed / self.pairs


@dataclass(frozen=True)
class OverturnRow:
    moderator: str
    week: date
    category: str
    decided: int  # appeals of their rejections decided that week
    overturned: int

    @property
    def rate(self) -> float:
        return self.overturned / self.decided


@dataclass(frozen=True)
class TimeRow:
    moderator: str
    week: date
    decisions: int
    median_seconds: float
    mean_seconds: float


def _week(moment: datetime) -> date:
    return moment.date() if isinstance(moment, datetime) else moment


def golden_accuracy(*, since: datetime, viewer: str | None = None) -> list[GoldenRow]:
    answered = QaItem.objects.filter(kind=QaKind.GOLDEN, answered_at__gte=since)
    if viewer is not None:
        answered = answered.filter(moderator__username=viewer)
    rows = (answered.annotate(week=TruncWeek("answered_at")).values("moderator__username", "week",
                                                                       "golden__expected_category")
            .annotate(n=Count("pk"), right=Count("pk", filter=Q(correct=True)))
            .order_by("-week", "moderator__username", "golden__expected_category"))
    return [GoldenRow(r["moderator__username"], _week(r["week"]), r["golden__expected_category"] or APPROVAL,
                      r["n"], r["right"]) for r in rows]


def _second_reviews(since: datetime, viewer: str | None = None):
    pairs = QaItem.objects.filter(kind=QaKind.SECOND_REVIEW, answered_at__gte=since)
    if viewer is not None:
        pairs = pairs.filter(Q(moderator__username=viewer) | Q(first_decision__moderator__username=viewer))
    return (pairs.annotate(week=TruncWeek("answered_at"))
            .values_list("week", "first_decision__label", "first_decision__category", "label", "category",
                         "first_decision__moderator__username", "moderator__username"))


def agreement(*, since: datetime, viewer: str | None = None) -> tuple[list[AgreementRow], list[ModeratorAgreementRow]]:
    """Kappa per week and category (every category either rater named that week), and per
    moderator and week (over every label), of the second reviews answered since `since`."""
    by_week: dict[date, list[tuple[str, str]]] = defaultdict(list)
    by_moderator: dict[tuple[str, date], list[tuple[str, str]]] = defaultdict(list)
    for week, label1, category1, label2, category2, first, second in _second_reviews(since, viewer):
        pair = (_judgement(label1, category1), _judgement(label2, category2))
        by_week[_week(week)].append(pair)
        for name in {first, second}:
            if viewer is None or name == viewer:
                by_moderator[(name, _week(week))].append(pair)
    rows = []
    for week in sorted(by_week, reverse=True):
        pairs = by_week[week]
        for category in sorted(_categories(pairs)):
            target = _judgement(ReviewStatus.REJECTED, category)
            rows.append(AgreementRow(week, category, len(pairs), sum(1 for a, b in pairs if a == b == target),
                                     category_kappa(pairs, category)))
    per_moderator = [ModeratorAgreementRow(name, week, len(pairs), sum(1 for a, b in pairs if a == b),
                                           cohen_kappa(pairs))
                     for (name, week), pairs in sorted(by_moderator.items(), key=lambda kv: (-kv[0][1].toordinal(), kv[0][0]))]
    return rows, per_moderator


def _categories(pairs: Iterable[tuple[str, str]]) -> set[str]:
    prefix = f"{ReviewStatus.REJECTED}:"
    return {j.removeprefix(prefix) for pair in pairs for j in pair if j.startswith(prefix)}


def overturns(*, since: datetime, viewer: str | None = None) -> list[OverturnRow]:
    """Appeals of moderators' rejections decided since `since`, by the rejection's moderator and
    category and the week the appeal was decided."""
    decided = Appeal.objects.filter(resolved_at__gte=since, decision__source=DecisionSource.MODERATOR,
                                    status__in=[AppealStatus.UPHELD, AppealStatus.OVERTURNED])
    if viewer is not None:
        decided = decided.filter(decision__moderator__username=viewer)
    rows = (decided.annotate(week=TruncWeek("resolved_at"))
            .values("decision__moderator__username", "week", "decision__category")
            .annotate(n=Count("pk"), over=Count("pk", filter=Q(status=AppealStatus.OVERTURNED)))
            .order_by("-week", "decision__moderator__username", "decision__category"))
    return [OverturnRow(r["decision__moderator__username"], _week(r["week"]), r["decision__category"] or APPROVAL,
                        r["n"], r["over"]) for r in rows]


def decision_times(*, since: datetime, viewer: str | None = None) -> list[TimeRow]:
    times = DecisionTime.objects.filter(created_at__gte=since)
    if viewer is not None:
        times = times.filter(moderator__username=viewer)
    rows = (times.annotate(week=TruncWeek("created_at")).values("moderator__username", "week")
            .annotate(n=Count("pk"), median=Median(F("seconds")), mean=Avg("seconds"))
            .order_by("-week", "moderator__username"))
    return [TimeRow(r["moderator__username"], _week(r["week"]), r["n"], r["median"], r["mean"]) for r in rows]
