"""Print the DSA transparency report of a period (docs/transparency.md, "The transparency report")."""

from __future__ import annotations

import json
import re
from datetime import date

from django.core.management.base import BaseCommand, CommandError

from moderation.transparency.report import LAST_DAY, report_csv, transparency_report

FORMATS = ("json", "csv")
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")  # date.fromisoformat alone would take 20261101 and 2026-W44-1 too


def _day(text: str, name: str) -> date:
    try:
        if not DAY.fullmatch(text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{name} {text!r} is not a date: give YYYY-MM-DD") from None


class Command(BaseCommand):
    help = ("Print the DSA transparency report of the days --start to --end, both included (UTC): "
            "JSON (indented, keys sorted) or CSV (section,key,value, one row per figure).")

    def add_arguments(self, parser):
        parser.add_argument("--start", required=True, help="the period's first day, YYYY-MM-DD (UTC)")
        parser.add_argument("--end", required=True, help="the period's last day, YYYY-MM-DD (UTC), included")
        parser.add_argument("--format", choices=FORMATS, default="json")

    def handle(self, *args, start: str, end: str, format: str, **options):  # noqa: A002 - the option's name
        first, last = _day(start, "--start"), _day(end, "--end")
        if last < first:
            raise CommandError(f"--end {last} is before --start {first}")
        if last > LAST_DAY:
            raise CommandError(f"--end {last} is past the last day a report can count, {LAST_DAY}")
        report = transparency_report(start=first, end=last)
        if format == "csv":
            self.stdout.write(report_csv(report), ending="")
        else:
            self.stdout.write(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
