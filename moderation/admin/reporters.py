"""Reporters in the admin: the list (each reporter's resolved and actioned reports, accuracy,
weight, and whether and why it is muted), the reporter page (its reports and its mute history)
and a moderator's mute or unmute, with a reason (docs/design.md, "Reporters").

Like the author page, the buttons go through the service (moderation/services/reporters.py),
posting the mute the page was rendered with: a reporter another moderator muted or unmuted
since is refused, and the message says by whom and why.
"""

from __future__ import annotations

import re

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from audit.admin_base import ReadOnlyPermissionsMixin
from moderation.admin import review_page
from moderation.admin.paginator import ClientKeyedListMixin, rows_page
from moderation.admin.reviews import refuse_nul
from moderation.errors import ModerationError
from moderation.models import ACCOUNT_REASON_MAX, Report, Reporter, ReporterMute
from moderation.selectors import visible_to
from moderation.services.reporters import MUTED_BY_ACCURACY, RATED_AFTER, mute_token, reporter_mute, reporter_standing

REPORTER_PK = re.compile(r"[0-9]{1,18}")
MUTE_PERMISSION = "moderation.mute_reporter"
PAGE_ROWS = 25
# The buttons: the service's `muted` argument, and what the message says was done.
BUTTONS = {"mute": (True, "muted"), "unmute": (False, "unmuted"), "auto": (None, "handed back to the accuracy rule")}


class MutedFilter(admin.SimpleListFilter):
    title = "muted"
    parameter_name = "muted"
    CHOICES = {
        "accuracy": ("Muted by accuracy", lambda qs: qs.filter(MUTED_BY_ACCURACY, mute=ReporterMute.AUTO)),
        "moderator": ("Muted by a moderator", lambda qs: qs.filter(mute=ReporterMute.MUTED)),
        "unmuted": ("Unmuted by a moderator", lambda qs: qs.filter(mute=ReporterMute.UNMUTED)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.CHOICES.items()]

    def queryset(self, request, queryset):
        choice = self.CHOICES.get(self.value())
        return choice[1](queryset) if choice else queryset


class RatedFilter(admin.SimpleListFilter):
    title = "rated"
    parameter_name = "rated"

    def lookups(self, request, model_admin):
        return [("yes", f"At least {RATED_AFTER} resolved reports"), ("no", f"Fewer than {RATED_AFTER}")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(resolved__gte=RATED_AFTER)
        if self.value() == "no":
            return queryset.filter(resolved__lt=RATED_AFTER)
        return queryset


class MuteForm(forms.Form):
    """A mute, unmute or back-to-the-rule button: the reason, and the mute the page showed."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=ACCOUNT_REASON_MAX)
    token = forms.CharField(widget=forms.HiddenInput, max_length=80)


def buttons_for(reporter: Reporter) -> list[str]:
    """The buttons that would change something: every mute but the reporter's own."""
    return [name for name, (muted, _) in BUTTONS.items()
            if {True: ReporterMute.MUTED, False: ReporterMute.UNMUTED, None: ReporterMute.AUTO}[muted] != reporter.mute]


class ReporterAdmin(ClientKeyedListMixin, ReadOnlyPermissionsMixin, admin.ModelAdmin):
    list_display = ["reporter_id", "client", "resolved", "actioned", "accuracy", "weight", "muted"]
    list_filter = [MutedFilter, RatedFilter, "client"]
    list_select_related = ["client"]
    search_fields = ["reporter_id"]
    search_help_text = "The reporter's id, exactly as the client sends it."
    client_key = "reporter_id"

    def changelist_view(self, request, extra_context=None):
        return refuse_nul(request) or super().changelist_view(request, extra_context)

    @admin.display(description="accuracy")
    def accuracy(self, reporter: Reporter) -> str:
        share = reporter_standing(reporter).accuracy
        return "—" if share is None else f"{share * 100:.0f}%"

    @admin.display(description="weight")
    def weight(self, reporter: Reporter) -> str:
        return str(reporter_standing(reporter).weight)

    @admin.display(description="muted")
    def muted(self, reporter: Reporter) -> str:
        by = reporter_standing(reporter).muted_by
        if reporter.mute == ReporterMute.UNMUTED:
            return "no (unmuted by a moderator)"
        return {"accuracy": "yes, by accuracy", "moderator": "yes, by a moderator"}.get(by, "no")

    def has_mute_permission(self, request) -> bool:
        return request.user.has_perm(MUTE_PERMISSION)

    def get_urls(self):
        own = [path("<int:object_id>/mute/<str:button>/", self.admin_site.admin_view(self.mute_view),
                    name="moderation_reporter_mute")]
        return own + super().get_urls()

    def _reporter_url(self, reporter_pk) -> str:
        return reverse("admin:moderation_reporter_change", args=[reporter_pk])

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The reporter page: its figures, the buttons, its reports (newest first) and every
        change of its mute, a page at a time."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if not REPORTER_PK.fullmatch(str(object_id)):
            raise Http404
        reporter = get_object_or_404(Reporter.objects.select_related("client", "mute_changed_by"), pk=object_id)
        query = request.GET

        def page(param, queryset):
            return rows_page(query, param, PAGE_ROWS, lambda offset, limit: list(queryset[offset:offset + limit]))

        token = mute_token(reporter)
        return review_page.workplace_page(
            self, request, "admin/moderation/reporter/reporter_page.html", f"Reporter {reporter.reporter_id}",
            reporter=reporter,
            standing=reporter_standing(reporter),
            muted=self.muted(reporter),
            accuracy=self.accuracy(reporter),
            # Its reports of reviews the user may not see are not listed (moderation/admin/visibility.py).
            reports=page("reports_page", visible_to(request.user, Report.objects.filter(
                reporter_id=reporter.reporter_id, review__client_id=reporter.client_id), through="review")
                         .select_related("review").order_by("-created_at", "-id")),
            # Its history is its mutes: a report creates a reporter without a history row, and
            # the counters are not in it.
            changes=page("changes_page", reporter.history.exclude(history_type="+")
                         .select_related("history_user", "mute_changed_by").order_by("-history_id")),
            buttons=[(name, MuteForm(initial={"token": token}, auto_id=f"id_{name}_%s"))
                     for name in buttons_for(reporter)] if self.has_mute_permission(request) else [],
        )

    def mute_view(self, request, object_id, button):
        if request.method != "POST" or button not in BUTTONS or not self.has_mute_permission(request):
            raise PermissionDenied
        reporter = get_object_or_404(Reporter, pk=object_id)
        muted, done = BUTTONS[button]
        form = MuteForm(request.POST)
        if not form.is_valid():
            why = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
            return self._refused(request, reporter, done, why)
        try:
            reporter_mute(reporter_pk=reporter.pk, muted=muted, reason=form.cleaned_data["reason"], user=request.user,
                          expected=form.cleaned_data["token"])
        except ModerationError as exc:  # a stale page, a blank reason
            return self._refused(request, reporter, done, f"{getattr(exc, 'reason', None) or exc}. Nothing was changed")
        self.message_user(request, f"Reporter {done}.", messages.SUCCESS)
        return HttpResponseRedirect(self._reporter_url(reporter.pk))

    def _refused(self, request, reporter: Reporter, done: str, why: str):
        self.message_user(request, f"Not {done}: {why}", messages.ERROR)
        return HttpResponseRedirect(self._reporter_url(reporter.pk))
