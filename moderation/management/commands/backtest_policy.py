"""Replay a policy version (usually a draft) over what moderators decided, beside the active
version: `evaluate_policy`'s figures for both, the decisions that would change, the share sent to
humans and the provider's time (moderation/quality/backtests.py; docs/quality.md, "Backtests")."""

from __future__ import annotations

import json
import time
from datetime import datetime, time as day_start
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from moderation.models import Backtest, BacktestStatus, ModerationPolicy
from moderation.quality import backtests
from moderation.observability.evaluation import ALL, EvaluationError, figure
from moderation.text.visible import visible_text

CHANGES_SHOWN = 20


class Command(BaseCommand):
    help = ("Replay a policy version (a draft) over the reviews moderators decided, or a labelled file, beside "
            "the active version. Writes nothing to reviews and sends no notification; the backtest is kept and "
            "shown on the version's admin page.")

    def add_arguments(self, parser):
        parser.add_argument("--candidate", type=int, required=True, metavar="VERSION",
                            help="the policy version to replay (a draft, or any version)")
        parser.add_argument("--since", metavar="DATE", help="only decisions made from this date or time on (ISO 8601)")
        parser.add_argument("--limit", type=int, metavar="N", help="at most the N newest decisions")
        parser.add_argument("--data", metavar="FILE",
                            help="a labelled .csv or .jsonl file (evaluate_policy's) instead of the decisions")
        parser.add_argument("--provider", metavar="NAME", help="the provider (default: MODERATION_PROVIDER)")
        parser.add_argument("--json", metavar="OUT", help="also write both versions' figures and the changes as JSON")

    def handle(self, *args, candidate: int, since: str | None, limit: int | None, data: str | None,
               provider: str | None, **options):
        version = ModerationPolicy.objects.filter(version=candidate).first()
        if version is None:
            raise CommandError(f"no policy version {candidate}")
        if data and (since or limit):
            raise CommandError("--since and --limit choose decisions: they do not apply to --data")
        try:
            backtest = backtests.backtest_start(candidate=version, since=_since(since), limit=limit, data=data or "",
                                               provider_name=provider, enqueue=False)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backtest {backtest.pk}: {version} against the active {backtest.baseline}, "
                          f"provider {backtest.provider}, {backtest.total} examples")
        started = time.monotonic()
        while True:
            outcome = backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 5, enqueue_rest=False)
            backtest.refresh_from_db()
            if backtest.status not in (BacktestStatus.QUEUED, BacktestStatus.RUNNING):
                break
            self.stdout.write(f"  {backtest.judged} of {backtest.total} judged")
        if backtest.status != BacktestStatus.DONE:
            raise CommandError(f"backtest {backtest.pk} {backtest.status}: {outcome}")
        self.stdout.write("\n".join(report(backtest)))
        if options["json"]:
            Path(options["json"]).write_text(json.dumps(as_json(backtest), ensure_ascii=False, indent=2) + "\n",
                                             encoding="utf-8")
            self.stdout.write(f"figures written to {options['json']}")
        self.stdout.write(summary(backtest, seconds=time.monotonic() - started))


def _since(value: str | None) -> datetime | None:
    if not value:
        return None
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"--since {value!r} is not a date (YYYY-MM-DD) or a time (ISO 8601)")
        moment = datetime.combine(day, day_start.min)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, timezone.get_current_timezone())


def _slices(figures: dict) -> list[dict]:
    return figures.get("slices", []) if figures else []


def report(backtest: Backtest) -> list[str]:
    """Both versions side by side, per slice, then the changed decisions."""
    baseline = {(s["by"], s["value"]): s for s in _slices(backtest.baseline_figures)}
    lines = [f"{'slice':<28}{'texts':>7}  {'candidate P / R / F1':>22}  {'active P / R / F1':>20}  "
             f"{'to humans':>14}  {'rejected F1':>14}"]
    for s in _slices(backtest.figures):
        b = baseline.get((s["by"], s["value"]), {})
        name = ALL if s["by"] == ALL else f"{s['by']} {visible_text(s['value'], limit=20)}"

        def prf(x):
            na = x.get("not_approved", {})
            return " / ".join(figure(na.get(k)) for k in ("precision", "recall", "f1")) if na else "-"

        humans = f"{s['to_humans'] * 100:.1f}% / {b['to_humans'] * 100:.1f}%" if b else f"{s['to_humans'] * 100:.1f}%"
        rejected = f"{figure(s['rejected']['f1'])} / {figure(b['rejected']['f1'])}" if b else figure(s["rejected"]["f1"])
        lines.append(f"{name:<28}{s['texts']:>7}  {prf(s):>22}  {prf(b):>20}  {humans:>14}  {rejected:>14}")
    lines.append(f"{backtest.changed} decisions would change"
                 + (f" (the first {CHANGES_SHOWN} below)" if backtest.changed > CHANGES_SHOWN else ""))
    base = settings.PUBLIC_BASE_URL.rstrip("/")
    for change in backtest.changes[:CHANGES_SHOWN]:
        where = (f"{base}{reverse('admin:moderation_contentreview_change', args=[change['review']])}"
                 if change["review"] else f"row {change['row']}")
        score = "" if change["score"] is None else f" (score {change['score']:.2f})"
        lines.append(f"  {where}: moderator {change['human']}, active {change['baseline']} -> "
                     f"candidate {change['candidate']}{' as ' + change['category'] if change['category'] else ''}{score}")
    lines.append(f"provider: {backtest.provider_seconds:.1f} s waiting; {backtest.cached} answers read from the "
                 "kept ones, not asked again")
    return lines


def as_json(backtest: Backtest) -> dict:
    return {"backtest": backtest.pk, "candidate": backtest.candidate.version, "baseline": backtest.baseline.version,
            "provider": backtest.provider, "examples": backtest.total, "changed": backtest.changed,
            "provider_seconds": backtest.provider_seconds, "cached_answers": backtest.cached,
            "candidate_figures": backtest.figures, "baseline_figures": backtest.baseline_figures,
            "changes": backtest.changes}


def summary(backtest: Backtest, *, seconds: float) -> str:
    every = next((s for s in _slices(backtest.figures) if s["by"] == ALL), None)
    if every is None:
        return f"backtest_policy: 0 examples, nothing to compare ({seconds:.1f} s)"
    na = every["not_approved"]
    return (f"backtest_policy: {every['texts']} examples, not-approved precision {figure(na['precision'])} "
            f"recall {figure(na['recall'])} F1 {figure(na['f1'])}, rejected F1 {figure(every['rejected']['f1'])}, "
            f"to humans {every['to_humans'] * 100:.1f}%, {backtest.changed} decisions changed, {seconds:.1f} s")
