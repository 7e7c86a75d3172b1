"""Shadow runs in the admin (docs/quality.md, "Shadow runs"): started and stopped from a policy
version's page, one page per shadow with its agreement per day and category (with the live
decisions and with moderators') and its disagreements, newest first. A disagreement on a review
the viewer may not open is counted, never shown (moderation/admin/visibility.py)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from audit.admin_base import ReadOnlyAdmin
from moderation.admin import review_page
from moderation.admin.backtests import own_page
from moderation.admin.paginator import rows_page
from moderation.errors import ModerationError
from moderation.models import ContentReview, ModerationPolicy, ShadowRun
from moderation.providers import provider_names
from moderation.quality import shadows
from moderation.selectors import reviews_visible_to

PUBLISH = "moderation.add_moderationpolicy"
DISAGREEMENTS_PAGE_ROWS = 50
REFRESH_S = 30  # a live shadow's page reloads itself this often


class ShadowForm(forms.Form):
    provider = forms.ChoiceField(choices=(), help_text="The provider the shadow asks (the live one by default).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [(name, name) for name in provider_names()]
        self.fields["provider"].initial = settings.MODERATION_PROVIDER


class ShadowRunAdmin(ReadOnlyAdmin):
    list_display = ["shadow", "policy", "provider", "state", "judged", "errors", "started_by", "started_at"]
    list_display_links = None
    list_select_related = ["policy", "started_by"]
    ordering = ["-started_at"]

    @admin.display(description="shadow run", ordering="id")
    def shadow(self, shadow):
        return format_html('<a href="{}">Shadow {}</a>', reverse("admin:moderation_shadowrun_page", args=[shadow.pk]),
                           shadow.pk)

    @admin.display(description="state")
    def state(self, shadow):
        return f"stopped {shadow.stopped_at:%Y-%m-%d %H:%M}" if shadow.stopped_at else "running"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [path("<int:shadow_id>/page/", view(self.page_view), name="moderation_shadowrun_page"),
                path("<int:shadow_id>/stop/", view(self.stop_view), name="moderation_shadowrun_stop"),
                ] + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The shadow's page is its one view (with its disagreements checked against the viewer's queues).
        return own_page(self, request, object_id, "admin:moderation_shadowrun_page")

    def page_view(self, request, shadow_id):
        if not self.has_view_permission(request):
            raise PermissionDenied
        shadow = get_object_or_404(ShadowRun.objects.select_related("policy", "started_by"), pk=shadow_id)
        disagreements = rows_page(request.GET, "page", DISAGREEMENTS_PAGE_ROWS,
                                  lambda offset, limit: _shown(shadow, offset, limit, request.user))
        return review_page.workplace_page(
            self, request, "admin/moderation/shadowrun/page.html", str(shadow), shadow=shadow,
            agreement=shadows.shadow_agreement(shadow), disagreements=disagreements,
            may_stop=request.user.has_perm(PUBLISH) and shadow.stopped_at is None,
            live=shadow.stopped_at is None, refresh_s=REFRESH_S)

    def stop_view(self, request, shadow_id):
        if request.method != "POST" or not request.user.has_perm(PUBLISH):
            raise PermissionDenied
        try:
            shadows.shadow_stop(shadow_id=shadow_id, user=request.user)
        except ModerationError as exc:
            self.message_user(request, f"Not done: {getattr(exc, 'reason', exc)}.", messages.ERROR)
        else:
            self.message_user(request, "Stopped: the shadow judges nothing more; its verdicts stay.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:moderation_shadowrun_page", args=[shadow_id]))


def _shown(shadow: ShadowRun, offset: int, limit: int, user) -> list:
    """A page of disagreements; those on reviews `user` may not open are kept as hidden rows
    (counted on the page, never shown)."""
    rows = list(shadows.shadow_disagreements(shadow)[offset:offset + limit])
    visible = {review.pk: review for review in reviews_visible_to(
        user, ContentReview.objects.filter(pk__in=[r.review_id for r in rows])).only("pk", "last_queue")}
    for row in rows:
        row.shown = visible.get(row.review_id)
    return rows


def shadow_start_view(model_admin, request, policy_id):
    if request.method != "POST" or not request.user.has_perm(PUBLISH):
        raise PermissionDenied
    policy = get_object_or_404(ModerationPolicy, pk=policy_id)
    form = ShadowForm(request.POST)
    back = reverse("admin:moderation_moderationpolicy_change", args=[policy.pk])
    if not form.is_valid():
        model_admin.message_user(request, f"Not started: {form.errors.as_text()}", messages.ERROR)
        return HttpResponseRedirect(back)
    try:
        shadow = shadows.shadow_start(policy=policy, provider_name=form.cleaned_data["provider"], user=request.user)
    except ModerationError as exc:
        model_admin.message_user(request, f"Not started: {getattr(exc, 'reason', exc)}.", messages.ERROR)
        return HttpResponseRedirect(back)
    model_admin.message_user(request, "In shadow from now on: it judges each new decision within a minute or so, "
                                      "and acts on nothing.", messages.SUCCESS)
    return HttpResponseRedirect(reverse("admin:moderation_shadowrun_page", args=[shadow.pk]))


def policy_shadow_panel(policy: ModerationPolicy | None) -> dict:
    if policy is None or policy.pk is None:
        return {}
    return {"form": ShadowForm(), "runs": list(policy.shadows.order_by("-started_at")[:5])}
