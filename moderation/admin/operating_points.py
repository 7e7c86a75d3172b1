"""What moving a threshold costs, on the policy page (docs/model-card.md, "Operating points").

For each category the local model scores: precision, recall and the share of texts flagged at
each threshold from 0.05 to 0.95, measured by `make model` on the held-out split of the model's
training data and shipped in the model file (moderation.providers.local.operating_points). The
rows of the policy's own review and reject thresholds for the category are marked; a threshold
between two rows marks the nearest one "≈"; a threshold beyond the first or last row marks none
and says so. Another provider's figures are not known here: the page says so and shows no table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from moderation.models import ModerationPolicy
from moderation.providers import local
from moderation.verdicts import thresholds_for

if TYPE_CHECKING:  # (the model's module imports NumPy: a web process that never opens this page need not)
    from moderation.providers.local_model import CategoryPoints, OperatingPoint

logger = logging.getLogger(__name__)

# A policy's 0.3 and a row's 0.30000000000000004 are the same threshold.
SAME_THRESHOLD = 1e-9


@dataclass(frozen=True)
class Mark:
    """One of the policy's thresholds of a category, and the row that stands for it."""

    kind: str                  # "review" or "reject"
    threshold: float           # the policy's
    row: OperatingPoint | None  # None: beyond the table's first or last row
    exact: bool

    @property
    def label(self) -> str:
        """The row's mark: "review 0.35", or "≈ review 0.33" on the row nearest to 0.33."""
        return f"{self.kind} {self.threshold:g}" if self.exact else f"≈ {self.kind} {self.threshold:g}"

    @property
    def summary(self) -> str:
        """What the threshold gives, in a line."""
        if self.row is None:
            return f"{self.kind} {self.threshold:g}: beyond the table's rows"
        near = "" if self.exact else f"≈ row {self.row.threshold:.2f}, "
        return (f"{self.kind} {self.threshold:g}: {near}precision {figure(self.row.precision)}, "
                f"recall {figure(self.row.recall)}, {percent(self.row.share)} flagged")


@dataclass(frozen=True)
class TableRow:
    threshold: str
    precision: str
    recall: str
    share: str
    marks: tuple[Mark, ...]


@dataclass(frozen=True)
class Table:
    category: str
    texts: int
    positives: int
    rows: tuple[TableRow, ...]
    marks: tuple[Mark, ...]  # review, then reject


@dataclass(frozen=True)
class Panel:
    """What the policy page shows: the tables, or why there are none (`note`)."""

    policy: ModerationPolicy
    provider: str
    tables: tuple[Table, ...] = ()
    note: str = ""


def nearest(points: tuple[OperatingPoint, ...], threshold: float) -> tuple[OperatingPoint | None, bool]:
    """The row that stands for `threshold` and whether it is the threshold's own; (None, False)
    beyond the first or last row. Halfway between two rows, the lower one."""
    for point in points:
        if abs(point.threshold - threshold) <= SAME_THRESHOLD:
            return point, True
    if not points or threshold < points[0].threshold or threshold > points[-1].threshold:
        return None, False
    return min(points, key=lambda p: (abs(p.threshold - threshold), p.threshold)), False


def figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def table(policy: ModerationPolicy, category: str, found: CategoryPoints) -> Table:
    review, reject = thresholds_for(policy, category)
    marks = tuple(Mark(kind, threshold, *nearest(found.points, threshold))
                  for kind, threshold in (("review", review), ("reject", reject)))
    rows = tuple(TableRow(f"{p.threshold:.2f}", figure(p.precision), figure(p.recall), percent(p.share),
                     tuple(m for m in marks if m.row is p)) for p in found.points)
    return Table(category, found.texts, found.positives, rows, marks)


def operating_points_panel(policy: ModerationPolicy) -> Panel:
    """The figures of the policy page for `policy` (its thresholds marked)."""
    provider = settings.MODERATION_PROVIDER
    if provider != "local":
        return Panel(policy, provider, note=f"Precision and recall per threshold are known for the bundled local model only; "
                                            f"this installation's provider is {provider}.")
    from moderation.providers.local_model import ModelFileError

    try:
        points = local.operating_points()
    except ModelFileError as exc:  # the moderation itself fails loudly on it; this page still opens
        logger.warning("the policy page shows no operating points: %s", exc)
        return Panel(policy, provider, note="The local model's file cannot be read (the server's log says why): no figures to show.")
    if not points:
        return Panel(policy, provider, note="The local model's file holds no operating points: run `make model`.")
    return Panel(policy, provider, tables=tuple(table(policy, category, found) for category, found in points.items()))
