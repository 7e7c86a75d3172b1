"""Reports and appeals on the review page: read-only, as the review itself (only services write)."""

from __future__ import annotations

from django.contrib import admin

from moderation.models import Appeal, Report


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReportInline(_ReadOnlyInline):
    model = Report
    fields = readonly_fields = ["reporter_id", "reason", "detail", "decision", "created_at"]
    verbose_name_plural = "user reports"


class AppealInline(_ReadOnlyInline):
    model = Appeal
    fk_name = "review"
    fields = readonly_fields = ["appellant_id", "statement", "status", "decision", "resolution", "created_at",
                                "resolved_at"]
