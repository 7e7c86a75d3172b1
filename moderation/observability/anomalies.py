"""The anomaly alarms' read side (docs/quality.md, "Anomaly alarms"): the last hour's rejection
rate, share sent to humans and each rule's match rate, against their 7-day baseline, from the
hourly counts moderation/quality/alarms.py keeps (`DecisionRollup`).

A signal moves out of its band when both hold:
- it differs from its baseline (the mean over the 7 days before the hour) by more than
  ANOMALY_BAND times the baseline;
- it differs by at least ANOMALY_MIN_DELTA in absolute terms.
The hour and the baseline must also each hold at least ANOMALY_MIN_DECISIONS decisions. One
computation feeds both alarms: the notice on the admin index, and `moderation_anomaly` at /metrics,
which the Prometheus rule `ModerationDecisionAnomaly` alerts on (deploy/prometheus/alerts.yml).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from moderation.models import DecisionRollup

BASELINE_DAYS = 7
SIGNALS = {"label:rejected": "rejection rate", "label:manual_review": "share sent to humans"}


@dataclass(frozen=True)
class Anomaly:
    signal: str  # "label:rejected", "label:manual_review" or "rule:<name>"
    now: float  # its share of the last hour's decisions
    baseline: float  # its mean share over the 7 days before
    decisions: int  # the last hour's decisions

    @property
    def name(self) -> str:
        return SIGNALS.get(self.signal) or f"match rate of rule {self.signal.removeprefix('rule:')}"

    @property
    def direction(self) -> str:
        return "up" if self.now > self.baseline else "down"


@dataclass(frozen=True)
class SignalFigures:
    signal: str
    now: float
    baseline: float
    out_of_band: bool


def signal_figures(*, now: datetime | None = None) -> tuple[int, list[SignalFigures]]:
    """The last full hour's decisions, and each signal's share in it and in its baseline (the 7
    days of hours before it), from the rollup: one grouped query."""
    now = now or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    since = hour - timedelta(days=BASELINE_DAYS)
    rows = DecisionRollup.objects.filter(hour__gte=since, hour__lte=hour).values_list("hour", "key", "count")
    current: dict[str, int] = {}
    before: dict[str, int] = {}
    for at, key, count in rows:
        (current if at == hour else before)[key] = (current if at == hour else before).get(key, 0) + count
    total_now = sum(n for key, n in current.items() if key.startswith("label:"))
    total_before = sum(n for key, n in before.items() if key.startswith("label:"))
    figures = []
    for signal in sorted(set(SIGNALS) | {k for k in (*current, *before) if k.startswith("rule:")}):
        share_now = current.get(signal, 0) / total_now if total_now else 0.0
        share_before = before.get(signal, 0) / total_before if total_before else 0.0
        moved = abs(share_now - share_before)
        out = (total_now >= settings.ANOMALY_MIN_DECISIONS and total_before >= settings.ANOMALY_MIN_DECISIONS
               and moved >= settings.ANOMALY_MIN_DELTA and moved > settings.ANOMALY_BAND * share_before)
        figures.append(SignalFigures(signal, share_now, share_before, out))
    return total_now, figures


def anomalies(*, now: datetime | None = None) -> list[Anomaly]:
    """The signals out of their band in the last full hour (docstring of this module)."""
    total, figures = signal_figures(now=now)
    return [Anomaly(f.signal, f.now, f.baseline, total) for f in figures if f.out_of_band]
