"""The transparency report page: the figures of `manage.py transparency_report` for a period
chosen in a form (moderation/transparency/report.py; docs/transparency.md, "The
transparency report").

A read: a GET form, no writes. It opens for staff with the permission to view statements of
reasons (`moderation.view_transparencystatement`), and is served under the admin's
Content-Security-Policy (moderation/admin/csp.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from itertools import groupby
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from moderation.admin import review_page
from moderation.transparency.report import LAST_DAY, report_rows, transparency_report

VIEW_PERMISSION = "moderation.view_transparencystatement"
TEMPLATE = "admin/moderation/transparency_report.html"


def current_period(today: date) -> tuple[date, date]:
    """The default period: the current calendar month so far, up to `today` (UTC) included."""
    return today.replace(day=1), today


def last_full_month(today: date) -> tuple[date, date]:
    """The last whole calendar month before `today` (UTC), the unit the reports are compiled
    from: one link away on the page."""
    last = today.replace(day=1) - timedelta(days=1)
    return last.replace(day=1), last


class PeriodForm(forms.Form):
    start = forms.DateField(label="First day", help_text="YYYY-MM-DD, UTC")
    end = forms.DateField(label="Last day", help_text="YYYY-MM-DD, UTC, included")

    def clean(self):
        data = super().clean()
        if data.get("start") and data.get("end") and data["end"] < data["start"]:
            raise forms.ValidationError("The last day is before the first day.")
        if data.get("end") and data["end"] > LAST_DAY:
            raise forms.ValidationError(f"The last day may be {LAST_DAY} at the latest.")
        return data


@dataclass(frozen=True)
class Section:
    name: str
    rows: list[tuple[str, str]]


def shown(value: Any) -> str:
    """A figure as the page shows it: a missing one (a median of nothing) as a dash."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def sections(report: dict[str, Any]) -> list[Section]:
    return [Section(name, [(key, shown(value)) for _, key, value in rows])
            for name, rows in groupby(report_rows(report), key=lambda row: row[0])]


def transparency_report_view(model_admin, request):
    """GET: the report of the period in the query (start, end), by default the current month so
    far; the last full month is a link away."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    today = timezone.now().date()
    start, end = current_period(today)
    last_start, last_end = last_full_month(today)
    form = PeriodForm(request.GET or None, initial={"start": start, "end": end})
    report = None
    if not form.is_bound:
        report = transparency_report(start=start, end=end)
    elif form.is_valid():
        report = transparency_report(start=form.cleaned_data["start"], end=form.cleaned_data["end"])
    return review_page.workplace_page(model_admin, request, TEMPLATE, "Transparency report", form=form,
                                      report=report, sections=sections(report) if report else [],
                                      last_month={"start": last_start.isoformat(), "end": last_end.isoformat()})
