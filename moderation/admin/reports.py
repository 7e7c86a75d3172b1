"""Reports and appeals on the review's change page: read-only, as the review itself (only
services write), and a page at a time (a client can file thousands of reports on one review)."""

from __future__ import annotations

from django.contrib import admin
from django.forms.models import BaseInlineFormSet

from moderation.admin.paginator import rows_page
from moderation.models import Appeal, Report

INLINE_PAGE_ROWS = 50


class _PagedFormSet(BaseInlineFormSet):
    """Forms for one page of the rows (`?<prefix>_page=N`); `page` says where it is."""

    query = None  # the request's query string, set by the inline

    def get_queryset(self):
        if not hasattr(self, "_queryset"):
            rows = super().get_queryset()
            self.page = rows_page(self.query, f"{self.prefix}_page", INLINE_PAGE_ROWS,
                                  lambda offset, limit: list(rows[offset:offset + limit]))
            self._queryset = self.page.rows
        return self._queryset


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False
    formset = _PagedFormSet
    template = "admin/moderation/paged_tabular.html"

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"query": request.GET})

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReportInline(_ReadOnlyInline):
    model = Report
    fields = readonly_fields = ["reporter_id", "kind_vouched", "reason", "detail", "decision", "created_at",
                                "outcome_told", "resolved_at", "agreement"]
    verbose_name_plural = "user reports"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("decision", "review__client", "resolved_by")

    @admin.display(description="outcome")
    def outcome_told(self, report: Report) -> str:
        """What the client was told became of it (`report.resolved`), and the decision it cites."""
        if not report.outcome:
            return "open"
        cited = f" (decision {report.resolved_by_id}, {report.resolved_by.label})" if report.resolved_by_id else ""
        return f"{report.get_outcome_display()}{cited}"

    @admin.display(description="moderator agreed")
    def agreement(self, report: Report) -> str:
        """Whether a moderator's decision found the reporter right; only these count toward their
        accuracy."""
        return {True: "yes", False: "no", None: "not judged by a moderator"}[report.agreed]

    @admin.display(description="kind")
    def kind_vouched(self, report: Report) -> str:
        """The report's kind and the client that vouched for it: a trusted flagger is one only
        because that client says so (docs/design.md, "Reports")."""
        return f"{report.get_kind_display()}, as {report.review.client} says"


class AppealInline(_ReadOnlyInline):
    model = Appeal
    fk_name = "review"
    fields = readonly_fields = ["appellant_id", "statement", "status", "decision", "resolution", "created_at",
                                "resolved_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("decision", "resolution")
