"""The moderator's workplace: the review list, the timeline page, actions and the queue.

Every action goes through the same services as the API, tasks and commands; the admin only
parses, checks the permission, calls, and says what happened.
"""

from __future__ import annotations

from collections import Counter

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince
from simple_history.admin import SimpleHistoryAdmin

from audit.admin_base import ReadOnlyHistoryMixin, ReadOnlyPermissionsMixin
from audit.models import Actor
from moderation.observability.timeline import review_timeline
from moderation import services
from moderation.admin.filters import CallbackTroubleFilter, DecisionSourceFilter, StuckFilter
from moderation.admin.review_forms import BulkOverrideForm, BulkReasonForm, OverrideForm, ReasonForm
from moderation.errors import ModerationError
from moderation.models import ContentReview, ModerationRequest, ReviewStatus
from moderation.observability.search import review_ids_matching

PERMISSIONS = {
    "override": "moderation.override_review",
    "escalate": "moderation.escalate_review",
    "reprocess": "moderation.reprocess_review",
}
DONE = {"override": "overridden", "escalate": "escalated", "reprocess": "sent for reprocessing"}


def act(request, action: str, review: ContentReview, data: dict) -> str | None:
    """Run one action on one review through its service. None when done, else why not."""
    if not request.user.has_perm(PERMISSIONS[action]):
        raise PermissionDenied
    version = data.get("version")
    try:
        if action == "override":
            if review.status == data["label"]:
                return f"already {review.get_status_display().lower()}"
            services.review_override(review_id=review.pk, label=data["label"], reason=data["reason"],
                                     moderator=request.user, expected_version=version)
        elif action == "escalate":
            services.review_escalate(review_id=review.pk, reason=data["reason"], moderator=request.user,
                                     expected_version=version)
        else:
            services.review_reprocess(review_id=review.pk, actor=Actor.ADMIN, actor_id=str(request.user),
                                      reason=data.get("reason", ""), user=request.user, expected_version=version)
    except ModerationError as exc:
        return getattr(exc, "reason", None) or str(exc)
    return None


class ReviewAdmin(ReadOnlyPermissionsMixin, ReadOnlyHistoryMixin, SimpleHistoryAdmin):
    list_display = ["short_id", "status", "kind", "client", "provider", "age", "decision_summary", "moderator_claim"]
    list_filter = ["status", DecisionSourceFilter, CallbackTroubleFilter, StuckFilter, "content__kind", "client"]
    search_fields = ["content__external_id"]
    search_help_text = (
        "Review id, content id, external id, idempotency key, provider request id or provider event id."
    )
    list_select_related = ["content", "client", "decision", "claimed_by"]
    readonly_fields = ["timeline_link", *[f.name for f in ContentReview._meta.fields]]
    actions = ["override_selected", "escalate_selected", "reprocess_selected"]
    change_list_template = "admin/moderation/contentreview/change_list.html"
    show_full_result_count = False
    list_per_page = 50
    ordering = ["-created_at"]  # newest first

    # --- the list ------------------------------------------------------------------------------

    def get_queryset(self, request):
        latest_provider = ModerationRequest.objects.filter(review=OuterRef("pk")).order_by("-id").values("provider")[:1]
        return super().get_queryset(request).annotate(provider_name=Subquery(latest_provider))

    @admin.display(description="review", ordering="id")
    def short_id(self, review):
        return str(review.pk)[:8]

    @admin.display(description="content type", ordering="content__kind")
    def kind(self, review):
        return review.content.kind

    @admin.display(description="provider")
    def provider(self, review):
        return review.provider_name or "—"

    @admin.display(description="age", ordering="created_at")
    def age(self, review):
        return timesince(review.created_at, timezone.now())

    @admin.display(description="decision")
    def decision_summary(self, review):
        if review.decision is None:
            return "—"
        score = f" {review.decision.score:.2f}" if review.decision.score is not None else ""
        return f"{review.decision.label} ({review.decision.source}{score})"

    @admin.display(description="moderator")
    def moderator_claim(self, review):
        if review.claimed_by_id and review.claim_expires_at and review.claim_expires_at > timezone.now():
            return str(review.claimed_by)
        return ""

    @admin.display(description="timeline")
    def timeline_link(self, review):
        return format_html('<a class="button" href="{}">Open the timeline</a>', self._timeline_url(review.pk))

    def get_search_results(self, request, queryset, search_term):
        if not search_term.strip():
            return queryset, False
        return queryset.filter(pk__in=review_ids_matching(search_term)), False

    # --- permissions: nothing here edits a review directly (ReadOnlyPermissionsMixin) ----------

    def has_override_permission(self, request) -> bool:
        return request.user.has_perm(PERMISSIONS["override"])

    def has_escalate_permission(self, request) -> bool:
        return request.user.has_perm(PERMISSIONS["escalate"])

    def has_reprocess_permission(self, request) -> bool:
        return request.user.has_perm(PERMISSIONS["reprocess"])

    # --- pages ------------------------------------------------------------------------------------

    def get_urls(self):
        own = [
            path("review-next/", self.admin_site.admin_view(self.review_next_view), name="moderation_contentreview_next"),
            path("<uuid:object_id>/timeline/", self.admin_site.admin_view(self.timeline_view),
                 name="moderation_contentreview_timeline"),
            path("<uuid:object_id>/act/<str:action>/", self.admin_site.admin_view(self.act_view),
                 name="moderation_contentreview_act"),
            path("<uuid:object_id>/release/", self.admin_site.admin_view(self.release_view),
                 name="moderation_contentreview_release"),
        ]
        return own + super().get_urls()

    def _timeline_url(self, review_id) -> str:
        return reverse("admin:moderation_contentreview_timeline", args=[review_id])

    def timeline_view(self, request, object_id):
        if not self.has_view_permission(request):
            raise PermissionDenied
        review = get_object_or_404(
            ContentReview.objects.select_related("content", "client", "decision__policy", "claimed_by"), pk=object_id
        )
        can = {action: request.user.has_perm(perm) for action, perm in PERMISSIONS.items()}
        is_final = review.is_final
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Timeline of review {review.pk}",
            "review": review,
            "entries": review_timeline(review),
            "override_form": OverrideForm(initial={"version": review.version}) if can["override"] and is_final else None,
            "escalate_form": ReasonForm(initial={"version": review.version})
            if can["escalate"] and review.status in (ReviewStatus.PENDING, ReviewStatus.PROCESSING) else None,
            "reprocess_form": ReasonForm(initial={"version": review.version}) if can["reprocess"] and is_final else None,
            "claimed_by_me": review.claimed_by_id == request.user.pk
            and review.claim_expires_at and review.claim_expires_at > timezone.now(),
        }
        return TemplateResponse(request, "admin/moderation/contentreview/timeline.html", context)

    def act_view(self, request, object_id, action):
        if request.method != "POST" or action not in PERMISSIONS:
            raise PermissionDenied
        review = get_object_or_404(ContentReview, pk=object_id)
        form = (OverrideForm if action == "override" else ReasonForm)(request.POST)
        if action == "reprocess" and not request.POST.get("reason", "").strip():
            form = ReasonForm({**request.POST.dict(), "reason": "reprocessed from the admin"})
        if not form.is_valid():
            errors = "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
            self.message_user(request, f"Not {DONE[action]}: {errors}", messages.ERROR)
            return HttpResponseRedirect(self._timeline_url(review.pk))
        refused = act(request, action, review, form.cleaned_data)
        if refused:
            self.message_user(request, f"Not {DONE[action]}: {refused}", messages.ERROR)
        else:
            self.message_user(request, f"Review {DONE[action]}.", messages.SUCCESS)
        return HttpResponseRedirect(self._timeline_url(review.pk))

    def review_next_view(self, request):
        if request.method != "POST" or not self.has_override_permission(request):
            raise PermissionDenied
        review = services.review_take_next(moderator=request.user)
        if review is None:
            self.message_user(request, "The manual review queue is empty.", messages.INFO)
            return HttpResponseRedirect(reverse("admin:moderation_contentreview_changelist"))
        return HttpResponseRedirect(self._timeline_url(review.pk))

    def release_view(self, request, object_id):
        if request.method != "POST" or not self.has_override_permission(request):
            raise PermissionDenied
        if services.review_release(review_id=object_id, moderator=request.user):
            self.message_user(request, "Review returned to the queue.", messages.INFO)
        else:  # say so: nothing changed
            self.message_user(request, "Not returned to the queue: you do not hold this review.", messages.ERROR)
        return HttpResponseRedirect(reverse("admin:moderation_contentreview_changelist"))

    def changelist_view(self, request, extra_context=None):
        # PostgreSQL text cannot hold NUL: a filter value with one (`?status__exact=%00`) would
        # fail in the database as a 500. No status, id or name contains one: refuse the request.
        if any("\x00" in key or "\x00" in value for key, values in request.GET.lists() for value in values):
            return HttpResponseBadRequest("A query parameter contains a NUL character.")
        return super().changelist_view(request, extra_context)

    # --- bulk actions: each review in its own transaction, each outcome reported ---------------

    @admin.action(description="Override selected reviews…", permissions=["override"])
    def override_selected(self, request, queryset):
        return self._bulk(request, queryset, "override", BulkOverrideForm)

    @admin.action(description="Escalate selected reviews to manual review…", permissions=["escalate"])
    def escalate_selected(self, request, queryset):
        return self._bulk(request, queryset, "escalate", BulkReasonForm)

    @admin.action(description="Reprocess selected reviews…", permissions=["reprocess"])
    def reprocess_selected(self, request, queryset):
        return self._bulk(request, queryset, "reprocess", BulkReasonForm)

    def _bulk(self, request, queryset, action: str, form_class):
        form = form_class(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return TemplateResponse(request, "admin/moderation/contentreview/bulk_action.html", {
                **self.admin_site.each_context(request),
                "opts": self.model._meta, "title": f"{action.capitalize()} {queryset.count()} reviews",
                "form": form, "reviews": queryset, "action": f"{action}_selected",
            })
        outcomes, skipped = Counter(), Counter()
        for review in queryset.order_by("created_at"):
            # The version each review had on the confirmation page: one changed since (another
            # moderator, a provider result) is refused, not overwritten.
            seen = request.POST.get(f"version_{review.pk}", "")
            data = {**form.cleaned_data, "version": int(seen) if seen.isdigit() else review.version}
            refused = act(request, action, review, data)
            if refused:
                skipped[refused] += 1
            else:
                outcomes[DONE[action]] += 1
        summary = ", ".join([f"{n} {what}" for what, n in outcomes.items()]
                            + [f"{n} skipped: {why}" for why, n in skipped.items()]) or "nothing to do"
        self.message_user(request, summary[0].upper() + summary[1:] + ".", messages.WARNING if skipped else messages.SUCCESS)
        return None
