"""Bulk actions by query in the admin (docs/workplace.md, "Bulk actions by query").

From the review list, "Act on all matching" opens `new/<action>/` with the list's own query
string: the review admin's ChangeList reads it, so whatever filters and search the list has (its
search engine included) select the same reviews here. The moderator names the action (an
override's label and category, the reason); the job is drafted with each matching review and its
version frozen, and the job page shows that draft to confirm: how many, how many of each status,
excerpts of a sample. Started, the same page shows the progress (refreshed every few seconds
while it runs), a cancel button, and the skipped reviews with the reason of each.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from audit.admin_base import ReadOnlyAdmin
from moderation import services
from moderation.admin import review_page
from moderation.admin.paginator import rows_page
from moderation.admin.review_forms import BulkOverrideForm, BulkReasonForm
from moderation.admin.reviews import excerpted, refuse_nul
from moderation.admin.visibility import ReviewScoped
from moderation.errors import BulkTooLarge, ModerationError
from moderation.models import (
    BULK_LIVE_STATUSES,
    BulkAction,
    BulkItemOutcome,
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
    ContentReview,
    ReviewStatus,
)
from moderation.selectors import hidden_from
from moderation.services.bulk import APPLIES_TO, PERMISSION

SAMPLE_ROWS = 10
SKIPPED_PAGE_ROWS = 100
REFRESH_S = 3  # the job page reloads itself this often while the job runs
FORMS = {BulkAction.OVERRIDE: BulkOverrideForm, BulkAction.ESCALATE: BulkReasonForm,
         BulkAction.REPROCESS: BulkReasonForm}


def _query_words(changelist, query) -> list[tuple[str, str]]:
    """The list's filters and search as its sidebar names them: ("client", "acme"), ("search", "bodoh").
    A filter the sidebar does not show (one client only) is named by its parameter."""
    words, named = [], {"q", "o", "p"}
    for spec in changelist.filter_specs:
        named.update(spec.expected_parameters())
        if getattr(spec, "used_parameters", None):
            chosen = [str(c["display"]) for c in spec.choices(changelist) if c.get("selected")]
            words.append((str(spec.title), ", ".join(chosen)))
    words += [(key.removesuffix("__exact").replace("__", " "), value) for key, value in query.items() if key not in named]
    if changelist.query:
        words.append(("search", changelist.query))
    return words


class BulkJobAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["job", "action_text", "status", "progress", "created_by", "created_at"]
    list_display_links = None
    list_filter = ["status", "action"]
    ordering = ["-created_at"]
    list_per_page = 50

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("moderation.view_contentreview")

    def visible_rows(self, user, rows):
        # A job acting on a review the user may not see is not shown to them at all: its counts,
        # sample and skipped reviews would tell of it (moderation/admin/visibility.py).
        hidden = hidden_from(user, through="review")
        return rows if hidden is None else rows.exclude(Exists(BulkJobItem.objects.filter(hidden, job=OuterRef("pk"))))

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request)

    @admin.display(description="job", ordering="id")
    def job(self, job):
        return format_html('<a href="{}">Bulk job {}</a>', self._job_url(job.pk), job.pk)

    @admin.display(description="action")
    def action_text(self, job):
        return action_text(job)

    @admin.display(description="done / skipped / remaining")
    def progress(self, job):
        p = services.bulk_job_progress(job)
        return f"{p.done} / {p.skipped} / {p.remaining}"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("new/<str:action>/", view(self.new_view), name="moderation_bulkjob_new"),
            path("<int:job_id>/job/", view(self.job_view), name="moderation_bulkjob_job"),
            path("<int:job_id>/start/", view(self.start_view), name="moderation_bulkjob_start"),
            path("<int:job_id>/cancel/", view(self.cancel_view), name="moderation_bulkjob_cancel"),
        ] + super().get_urls()

    def _job_url(self, job_id) -> str:
        return reverse("admin:moderation_bulkjob_job", args=[job_id])

    def new_view(self, request, action):
        """The action's form over the reviews the list's query matches, with how many they are;
        posted, the job is drafted and its page asks for confirmation."""
        if action not in BulkAction.values:
            raise PermissionDenied
        action = BulkAction(action)
        if not request.user.has_perm(PERMISSION[action]):
            raise PermissionDenied
        refused = refuse_nul(request)
        if refused:
            return refused
        reviews_admin = self.admin_site.get_model_admin(ContentReview)
        try:
            changelist = reviews_admin.get_changelist_instance(request)
        except IncorrectLookupParameters:
            self.message_user(request, "The review list's filters are not valid: open the list again.", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:moderation_contentreview_changelist"))
        matching, words = changelist.queryset, _query_words(changelist, request.GET)
        count = matching.order_by().values("pk")[:services.BULK_MAX_REVIEWS + 1].count()
        form = FORMS[action](request.POST if request.method == "POST" else None)
        too_many = BulkTooLarge(count=count, limit=services.BULK_MAX_REVIEWS).reason \
            if count > services.BULK_MAX_REVIEWS else ""
        if request.method == "POST" and not too_many and form.is_valid():
            data = form.cleaned_data
            try:
                job = services.bulk_job_draft(reviews=matching, moderator=request.user, action=action,
                                              label=data.get("label", ""), category=data.get("category", ""),
                                              reason=data["reason"], query=request.GET.urlencode(),
                                              query_words=words, reason_codes=data.get("reason_codes", ()),
                                              share_reason=data.get("share_reason", False))
            except BulkTooLarge as exc:  # more matched between the count and the draft
                too_many = exc.reason
            else:
                return HttpResponseRedirect(self._job_url(job.pk))
        return review_page.workplace_page(
            self, request, "admin/moderation/bulkjob/new.html",
            f"{action.label} all {count if not too_many else 'the'} reviews matching this search",
            action=action, form=form, count=count, too_many=too_many, query_words=words,
            list_url=reverse("admin:moderation_contentreview_changelist") + "?" + request.GET.urlencode(),
            applies_to=[ReviewStatus(s).label.lower() for s in APPLIES_TO[action]], limit=services.BULK_MAX_REVIEWS,
        )

    def job_view(self, request, job_id):
        """A draft: what the job will act on, to confirm. Started: its progress and skipped reviews."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        job = get_object_or_404(self.get_queryset(request).select_related("created_by", "policy"), pk=job_id)
        context = {"job": job, "action": action_text(job), "progress": services.bulk_job_progress(job),
                   "live": job.status in BULK_LIVE_STATUSES, "refresh_s": REFRESH_S,
                   "query_words": job.query_words,
                   "mine": job.created_by_id == request.user.pk}
        if job.status == BulkJobStatus.DRAFT:
            statuses = job.items.values_list("status_seen").annotate(n=Count("pk")).order_by("-n")
            context["statuses"] = [(ReviewStatus(s).label, n, s in APPLIES_TO[job.action]) for s, n in statuses]
            sample = job.items.order_by("position").values_list("review_id", flat=True)[:SAMPLE_ROWS]
            context["sample"] = excerpted(list(sample), request.user)
        context["skipped"] = rows_page(request.GET, "skipped_page", SKIPPED_PAGE_ROWS,
                                       lambda offset, limit: _skipped(job, offset, limit, request.user))
        return review_page.workplace_page(self, request, "admin/moderation/bulkjob/job.html", f"Bulk job {job.pk}",
                                          **context)

    def start_view(self, request, job_id):
        return self._post(request, job_id, services.bulk_job_start, "Started: the job runs in the background.")

    def cancel_view(self, request, job_id):
        return self._post(request, job_id, services.bulk_job_cancel,
                          "Cancelling: the job stops after the review it is on; what it did stays done.")

    def _post(self, request, job_id, service, said: str):
        job = get_object_or_404(self.get_queryset(request), pk=job_id)
        if request.method != "POST" or not request.user.has_perm(PERMISSION[job.action]):
            raise PermissionDenied
        try:
            job = service(job_id=job.pk, moderator=request.user)
        except ModerationError as exc:
            self.message_user(request, f"Not done: {getattr(exc, 'reason', exc)}.", messages.ERROR)
        else:
            self.message_user(request, "Discarded: nothing was done." if job.status == BulkJobStatus.DISCARDED
                              else said, messages.SUCCESS)
        return HttpResponseRedirect(self._job_url(job.pk))


def action_text(job: BulkJob) -> str:
    """What the job does, in the moderator's words: "Reject (spam)", "Escalate to manual review"."""
    if job.action == BulkAction.OVERRIDE:
        verb = "Approve" if job.label == ReviewStatus.APPROVED else "Reject"
        return f"{verb} ({job.category})" if job.category else verb
    return job.get_action_display()


def _skipped(job: BulkJob, offset: int, limit: int, user) -> list:
    items = list(job.items.filter(outcome=BulkItemOutcome.SKIPPED).order_by("position")[offset:offset + limit])
    excerpts = {r.pk: r for r in excerpted([i.review_id for i in items], user)}
    for item in items:
        item.shown = excerpts.get(item.review_id)
    return items
