"""Admin building blocks shared by the apps."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404


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
    """For SimpleHistoryAdmin: history pages are for reading, and only of rows the admin shows.

    SIMPLE_HISTORY_REVERT_DISABLED only hides the button; simple_history's history form view
    still saves a POST (checking only the *view* permission), which would write an old row over
    the current one, past the services, the state machine and the audit log.

    simple_history reads the history rows themselves, not the admin's `get_queryset`: the history
    of a row the admin leaves out (a review of a queue the user may not see) would open. Both
    pages first ask `get_object`, which answers as the change page does.
    """

    def history_view(self, request, object_id, extra_context=None):
        self._shown_or_404(request, object_id)
        return super().history_view(request, object_id, extra_context)

    def history_form_view(self, request, object_id, version_id, extra_context=None):
        if request.method != "GET":
            raise PermissionDenied("history is read-only")
        self._shown_or_404(request, object_id)
        return super().history_form_view(request, object_id, version_id, extra_context)

    def _shown_or_404(self, request, object_id) -> None:
        if self.get_object(request, unquote(object_id)) is None:
            raise Http404("No such row.")

