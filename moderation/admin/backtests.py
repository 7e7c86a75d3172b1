"""Backtests and drafts in the admin (docs/quality.md, "Backtests" and "Drafts").

A version's page starts a backtest of it ("Backtest this version": since a date, at most N
decisions) and, for a draft, shows its last finished backtest beside the active version's
figures on the same reviews, with the button that activates it. A backtest's page shows its
progress (reloading itself while it runs), a cancel button, both versions' figures per slice, and
the reviews whose decision would change, each linked; a review the viewer may not open is counted,
never shown (moderation/admin/visibility.py).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from audit.admin_base import ReadOnlyAdmin
from moderation import services
from moderation.admin import review_page
from moderation.quality import backtests
from moderation.errors import DraftStale, ModerationError
from moderation.models import BACKTEST_LIVE_STATUSES, Backtest, ContentReview, ModerationPolicy
from moderation.observability.evaluation import ALL, EvaluationError, figure
from moderation.selectors import reviews_visible_to

REFRESH_S = 3  # a running backtest's page reloads itself this often
CHANGES_SHOWN = 200
PUBLISH = "moderation.add_moderationpolicy"  # who may start a backtest or activate a draft


class BacktestForm(forms.Form):
    since = forms.DateField(required=False, help_text="Only decisions made from this day on.")
    limit = forms.IntegerField(required=False, min_value=1, max_value=1_000_000,
                               help_text="At most this many decisions, the newest first.")


def own_page(model_admin, request, object_id, url_name: str):
    """The generic change page of a row whose own page is `url_name`: a redirect there (404 for
    no such row, 403 without the view permission)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    if not str(object_id).isdigit():
        raise Http404
    row = get_object_or_404(model_admin.model, pk=object_id)
    return HttpResponseRedirect(reverse(url_name, args=[row.pk]))


def comparison_rows(candidate: dict, baseline: dict) -> list[dict]:
    """One row per slice: the candidate's figures beside the baseline's (evaluate_policy's JSON)."""
    theirs = {(s["by"], s["value"]): s for s in (baseline or {}).get("slices", [])}
    rows = []
    for s in (candidate or {}).get("slices", []):
        b = theirs.get((s["by"], s["value"]))

        def three(x):
            return {k: figure(x["not_approved"][k]) for k in ("precision", "recall", "f1")} if x else None

        rows.append({"name": ALL if s["by"] == ALL else f"{s['by']}: {s['value']}", "texts": s["texts"],
                     "candidate": three(s), "baseline": three(b),
                     "humans": f"{s['to_humans'] * 100:.1f}%", "baseline_humans": f"{b['to_humans'] * 100:.1f}%" if b else "",
                     "rejected": figure(s["rejected"]["f1"]), "baseline_rejected": figure(b["rejected"]["f1"]) if b else ""})
    return rows


def visible_changes(backtest: Backtest, user) -> tuple[list[dict], int]:
    """The changes the viewer may open (with each review's short id), and how many they may not."""
    changes = backtest.changes[:CHANGES_SHOWN]
    ids = [c["review"] for c in changes if c["review"]]
    shown = {str(review.pk): review.short_id for review in
             reviews_visible_to(user, ContentReview.objects.filter(pk__in=ids)).only("pk", "last_queue")} if ids else {}
    visible = [{**c, "short_id": shown[c["review"]]} for c in changes if not c["review"] or c["review"] in shown]
    return visible, len(changes) - len(visible)


class BacktestAdmin(ReadOnlyAdmin):
    list_display = ["backtest", "candidate", "baseline", "status", "progress", "changed", "created_by", "created_at"]
    list_display_links = None
    list_filter = ["status"]
    list_select_related = ["candidate", "baseline", "created_by"]
    ordering = ["-created_at"]
    list_per_page = 50

    @admin.display(description="backtest", ordering="id")
    def backtest(self, backtest):
        return format_html('<a href="{}">Backtest {}</a>', reverse("admin:moderation_backtest_page", args=[backtest.pk]),
                           backtest.pk)

    @admin.display(description="judged")
    def progress(self, backtest):
        return f"{backtest.judged} / {backtest.total}"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [path("<int:backtest_id>/page/", view(self.page_view), name="moderation_backtest_page"),
                path("<int:backtest_id>/cancel/", view(self.cancel_view), name="moderation_backtest_cancel"),
                ] + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The backtest's page is its one view: the stored figures hold excerpts of the texts it
        # missed, of every queue, which the generic change page would print field by field.
        return own_page(self, request, object_id, "admin:moderation_backtest_page")

    def page_view(self, request, backtest_id):
        if not self.has_view_permission(request):
            raise PermissionDenied
        backtest = get_object_or_404(Backtest.objects.select_related("candidate", "baseline", "created_by"),
                                     pk=backtest_id)
        changes, hidden = visible_changes(backtest, request.user)
        return review_page.workplace_page(
            self, request, "admin/moderation/backtest/page.html", str(backtest), backtest=backtest,
            live=backtest.status in BACKTEST_LIVE_STATUSES, refresh_s=REFRESH_S,
            rows=comparison_rows(backtest.figures, backtest.baseline_figures), changes=changes, hidden=hidden,
            may_cancel=request.user.has_perm(PUBLISH))

    def cancel_view(self, request, backtest_id):
        if request.method != "POST" or not request.user.has_perm(PUBLISH):
            raise PermissionDenied
        try:
            backtests.backtest_cancel(backtest_id=backtest_id, user=request.user)
        except ModerationError as exc:
            self.message_user(request, f"Not done: {getattr(exc, 'reason', exc)}.", messages.ERROR)
        else:
            self.message_user(request, "Cancelling: the backtest stops after the chunk it is on.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:moderation_backtest_page", args=[backtest_id]))


def policy_quality_panel(policy: ModerationPolicy | None, request) -> dict:
    """What a version's page shows under its fields: its backtests, the form that starts one, and
    for a draft its last backtest beside the active version with the activation button."""
    if policy is None or policy.pk is None:
        return {}
    active = services.policy_active()
    latest = backtests.backtest_latest(policy)
    return {"policy": policy, "active": active, "may_publish": request.user.has_perm(PUBLISH),
            "backtest_form": BacktestForm(), "backtests": list(policy.backtests.order_by("-created_at")[:5]),
            "latest": latest, "stale": policy.is_draft and policy.drafted_from != active.version,
            "rows": comparison_rows(latest.figures, latest.baseline_figures) if latest else [],
            "compared_with_active": latest is not None and latest.baseline_id == active.pk}


def backtest_start_view(model_admin, request, policy_id):
    if request.method != "POST" or not request.user.has_perm(PUBLISH):
        raise PermissionDenied
    policy = get_object_or_404(ModerationPolicy, pk=policy_id)
    form = BacktestForm(request.POST)
    back = reverse("admin:moderation_moderationpolicy_change", args=[policy.pk])
    if not form.is_valid():
        model_admin.message_user(request, f"Not started: {form.errors.as_text()}", messages.ERROR)
        return HttpResponseRedirect(back)
    since = form.cleaned_data["since"]
    try:
        backtest = backtests.backtest_start(
            candidate=policy, user=request.user, limit=form.cleaned_data["limit"],
            since=timezone.make_aware(timezone.datetime.combine(since, timezone.datetime.min.time())) if since else None)
    except EvaluationError as exc:
        model_admin.message_user(request, f"Not started: {exc}", messages.ERROR)
        return HttpResponseRedirect(back)
    model_admin.message_user(request, f"Backtest started over {backtest.total} decisions: it runs in the background.",
                             messages.SUCCESS)
    return HttpResponseRedirect(reverse("admin:moderation_backtest_page", args=[backtest.pk]))


def activate_view(model_admin, request, policy_id):
    if request.method != "POST" or not request.user.has_perm(PUBLISH):
        raise PermissionDenied
    policy = get_object_or_404(ModerationPolicy, pk=policy_id)
    try:
        expected = int(request.POST.get("expected_active", ""))
    except ValueError:
        raise PermissionDenied from None
    try:
        services.policy_activate(version=policy.version, user=request.user, expected_active=expected)
    except DraftStale as exc:
        model_admin.message_user(request, f"Not activated: {exc.reason}.", messages.ERROR)
    else:
        model_admin.message_user(request, f"Policy version {policy.version} is now the active version.",
                                 messages.SUCCESS)
    return HttpResponseRedirect(reverse("admin:moderation_moderationpolicy_change", args=[policy.pk]))
