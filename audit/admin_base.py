"""Admin building blocks shared by the apps."""

from __future__ import annotations

from django.contrib import admin


class ReadOnlyPermissionsMixin:
    """Records that only services write: viewable, never added, edited or deleted here."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyAdmin(ReadOnlyPermissionsMixin, admin.ModelAdmin):
    pass


class ReadOnlyHistoryMixin:
    """For SimpleHistoryAdmin: history pages are for reading.

    SIMPLE_HISTORY_REVERT_DISABLED only hides the button; simple_history's history form view
    still saves a POST (checking only the *view* permission), which would write an old row over
    the current one, past the services, the state machine and the audit log.
    """

    def history_form_view(self, request, object_id, version_id, extra_context=None):
        if request.method != "GET":
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied("history is read-only")
        return super().history_form_view(request, object_id, version_id, extra_context)

