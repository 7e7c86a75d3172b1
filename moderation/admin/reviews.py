"""The moderator's workplace: the review list, the review queues, the review page (content first, then
the model's scores, the decide panel, notes and the timeline) and the actions.

Every action goes through the same services as the API, tasks and commands; the admin only
parses, checks the permission, calls, and says what happened.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Substr
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince
from simple_history.admin import SimpleHistoryAdmin

from audit.admin_base import ReadOnlyHistoryMixin, ReadOnlyPermissionsMixin
from audit.models import Actor
from moderation import services
from moderation.admin import qa, review_media, review_page, review_words
from moderation.admin.reports import AppealInline, ReportInline
from moderation.admin.second_looks import SECOND_LOOK_QUEUE, second_look_panel, second_looks_waiting
from moderation.admin.filters import (
    CONTENT_LIST_FILTERS,
    REVIEW_FILTERS,
    AuthorFilter,
    CallbackTroubleFilter,
    DecisionSourceFilter,
    QueueFilter,
    StuckFilter,
    SubmittedFilter,
    filtered_reviews,
)
from moderation.admin.deadlines import DEFAULT_NEAR_SHARE, deadlines_view, due_html
from moderation.admin.paginator import EstimatedCountPaginator, rows_page
from moderation.admin.visibility import ReviewScoped, visible_review_or_404
from moderation.admin.review_forms import (
    BulkOverrideForm,
    BulkReasonForm,
    DecideForm,
    EscalateForm,
    NoteForm,
    ReasonForm,
    UndoForm,
    prefilled_category,
    refused_decide_form,
)
from moderation.errors import ModerationError, StaleVersion
from moderation.models import (
    AccountAppeal,
    AccountAppealStatus,
    Content,
    ContentReview,
    ModerationRequest,
    ModeratorNote,
    ReviewQueue,
    ReviewStatus,
)
from moderation.observability.search import reviews_matching
from moderation.review_queues import deadline_for, queue_order_words
from moderation.observability.timeline import review_timeline
from moderation.observability.workplace import report_summaries, review_queue_figures
from moderation.selectors import reviews_visible_to
from moderation.text.visible import visible_html
from moderation.words import refusal_words

EXCERPT_CHARS = 200
SEARCH_HELP = ("Words of the content (in any form its language's stemmer knows: \"idiots\" finds \"idiot\"; "
               "\"quoted phrase\", -excluded), a part of a word (3 or 4 letters, or when no content has the "
               "words), or a review id, content id, external id, idempotency key, provider request id or "
               "provider event id.")
# A review's version as a form posts it: ASCII digits that fit the column (str.isdigit also
# takes "²", which int() refuses).
VERSION = re.compile(r"[0-9]{1,9}")
QUEUE_PAGE_ROWS = 50
LIST_PAGE_ROWS = 50  # the review page's reports and notes
TIMELINE_PAGE_ROWS = 100
# The queues whose list shows what the reports say: count, weighted score, reasons, pile-on.
REPORT_QUEUES = (ReviewQueue.REPORTS, ReviewQueue.NOTICES)

PERMISSIONS = {
    "override": "moderation.override_review",
    "escalate": "moderation.escalate_review",
    "reprocess": "moderation.reprocess_review",
    "undo": "moderation.override_review",  # a moderator's own decision, taken back
    # A decided review sent for a senior's second look, and a senior confirming its decision
    # (docs/workplace.md, "A second look at a decided review").
    "second_look": "moderation.escalate_review",
    "confirm_second_look": "moderation.settle_second_look",
}
DONE = {"override": "overridden", "escalate": "escalated", "reprocess": "sent for reprocessing", "undo": "undone",
        "second_look": "sent for a second look", "confirm_second_look": "confirmed"}
FORMS = {"override": DecideForm, "escalate": EscalateForm, "undo": UndoForm}


def act(request, action: str, review: ContentReview, data: dict) -> str | None:
    """Run one action on one review through its service. None when done, else why not."""
    if not request.user.has_perm(PERMISSIONS[action]):
        raise PermissionDenied
    version = data.get("version")
    try:
        if action == "override":
            if review.status == data["label"]:
                return f"already {review.get_status_display().lower()}"
            services.review_override(review_id=review.pk, label=data["label"], reason=data.get("reason", ""),
                                     category=data.get("category", ""), note=data.get("note", ""),
                                     reason_codes=data.get("reason_codes", ()),
                                     share_reason=data.get("share_reason", False),
                                     moderator=request.user, expected_version=version)
        elif action == "escalate":  # a bulk escalation (no "release" field) releases what it escalates
            services.review_escalate(review_id=review.pk, reason=data["reason"], moderator=request.user,
                                     expected_version=version, release=data.get("release", True))
        elif action == "second_look":
            services.review_second_look(review_id=review.pk, reason=data["reason"], moderator=request.user,
                                        expected_version=version)
        elif action == "confirm_second_look":
            services.second_look_confirm(review_id=review.pk, moderator=request.user, reason=data["reason"])
        elif action == "undo":
            services.review_undo(review_id=review.pk, decision_id=data["decision"], moderator=request.user,
                                 expected_version=version)
        else:
            services.review_reprocess(review_id=review.pk, actor=Actor.ADMIN, actor_id=str(request.user),
                                      reason=data.get("reason", ""), user=request.user, expected_version=version)
    except StaleVersion as exc:  # what changed since the moderator looked, and that nothing was applied
        return f"{refusal_words(exc, me=str(request.user))}. Nothing was applied: look again at the review as it is now"
    except ModerationError as exc:  # in words: the codes stay in the error's message (API, logs)
        return refusal_words(exc, me=str(request.user))
    return None


def queue_in_sentence(queue: str) -> str:
    """A queue's label inside a sentence: "the low-confidence model results queue", but "the DSA
    notices and trusted flaggers queue" (an acronym keeps its capitals)."""
    label = services.review_queue_label(queue)
    first = label.split(" ", 1)[0]
    return label if len(first) > 1 and first.isupper() else label[:1].lower() + label[1:]


# The reviews a moderator passed over (Skip, `j`), kept in their session for as long as a lease
# lasts: "Review next", Skip and "decide and next" hand none of them back to them meanwhile
# (issue 49: `j` on the second of two reviews handed the first back). At most SKIPS_KEPT.
SKIPPED_SESSION_KEY = "moderation_skipped_reviews"
SKIPS_KEPT = 200


def skipped_reviews(request, *, add=None) -> list[str]:
    """The ids of the reviews `request`'s moderator skipped within MODERATOR_LEASE_S, with `add`."""
    now = time.time()
    kept = {review_id: until for review_id, until in request.session.get(SKIPPED_SESSION_KEY, {}).items()
            if isinstance(until, (int, float)) and until > now}
    if add is not None:
        kept.pop(str(add), None)
        kept[str(add)] = now + settings.MODERATOR_LEASE_S
        kept = dict(list(kept.items())[-SKIPS_KEPT:])
    if kept != request.session.get(SKIPPED_SESSION_KEY, {}):
        request.session[SKIPPED_SESSION_KEY] = kept
    return list(kept)


def nothing_to_take(moderator, queue: str | None) -> str:
    """What "Review next" says when it found nothing: empty, or what waits for someone else."""
    barred = services.reviews_waiting_for_another(moderator=moderator, queue=queue)
    label = queue_in_sentence(queue) if queue else ""
    if not barred:
        return f"The {label} queue is empty." if queue else "Every queue you may take is empty."
    where = f"The {label} queue has" if queue else "No queue has"
    waits = "1 waits" if barred == 1 else f"{barred} wait"
    return (f"{where} {'no' if queue else 'a'} review you may take: {waits} for another moderator "
            "(appeals of your own decisions).")


def queue_refused(moderator, queue: str | None) -> str:
    """Why "Review next" may not take from `queue` for `moderator` ("" when it may): no such
    queue, or one only its groups' members may take."""
    if queue is None:
        return ""
    if queue not in services.review_queue_slugs():
        return f"There is no queue {queue!r}."
    if queue in services.queues_forbidden(moderator):
        return f"The {queue_in_sentence(queue)} queue is only for its groups' members."
    return ""


def refuse_nul(request) -> HttpResponseBadRequest | None:
    """PostgreSQL text cannot hold NUL: a filter or search value with one (`?status__exact=%00`)
    would fail in the database as a 500. No status, id or name contains one: refuse the request."""
    if any("\x00" in key or "\x00" in value for key, values in request.GET.lists() for value in values):
        return HttpResponseBadRequest("A query parameter contains a NUL character.")
    return None


def with_excerpts(reviews) -> list[ContentReview]:
    """Set `excerpt` on each review: its text's first characters, cut in the database."""
    reviews = list(reviews)
    excerpts = dict(Content.objects.filter(pk__in=[r.content_id for r in reviews])
                    .values_list("pk", Substr("text", 1, EXCERPT_CHARS + 1)))
    for review in reviews:
        review.excerpt = excerpts.get(review.content_id, "")
    return reviews


def excerpted(review_ids, user) -> list[ContentReview]:
    """These reviews, each with `excerpt_shown`: its excerpt as the list shows it (`excerpt_html`),
    for the bulk actions' confirmation pages. A review deleted since, or one `user` may not see, is
    not among them."""
    reviews = with_excerpts(review_media.with_thumbnail_flag(
        reviews_visible_to(user, ContentReview.objects.filter(pk__in=review_ids)).select_related("content")
        .defer("content__text", "content__metadata").order_by("created_at"), user))
    for review in reviews:
        review.excerpt_shown = excerpt_html(review)
    return reviews


def excerpt_html(review: ContentReview) -> str:
    """The review's excerpt (`with_excerpts`) as a list shows it, escaped; media as its kind and
    host, never loaded from there, after a blurred thumbnail of our own copy of an image
    (`review_media.with_thumbnail_flag`)."""
    thumbnail = review_media.thumbnail_html(review)
    if review.excerpt:  # hidden characters shown as markers, as on the review page
        return format_html('{}<span class="excerpt">{}</span>', thumbnail,
                           visible_html(Truncator(review.excerpt).chars(EXCERPT_CHARS)))
    if review.content.media_url:
        return format_html('{}<span class="excerpt">{} at <code>{}</code></span>', thumbnail, review.content.kind,
                           review_page.media_host(review.content.media_url))
    if thumbnail:
        return format_html('{}<span class="excerpt">{}</span>', thumbnail, review.content.kind)
    return "—"


class ReviewChangeList(ChangeList):
    """The excerpts are read for the page shown, after it is cut: the count (or its estimate)
    and the page query stay on the review table and its indexes."""

    def get_results(self, request):
        super().get_results(request)
        with_excerpts(self.result_list)  # fills the page queryset's cache; the template reads it
        labels = {q.slug: q.label for q in services.review_queues()}
        waiting = any(review.queue for review in self.result_list)
        near_share = services.policy_active().deadline_near_share if waiting else None  # read once a page
        for review in self.result_list:
            review.queue_label = labels.get(review.queue, review.queue)
            review.near_share = near_share


class ReviewAdmin(ReviewScoped, ReadOnlyPermissionsMixin, ReadOnlyHistoryMixin, SimpleHistoryAdmin):
    review_path = ""  # the rows are the reviews: those of a queue the user may not see are left out
    list_display = ["short_id", "status", "content_excerpt", "kind", "top_category", "badges", "client", "provider",
                    "age", "decision_summary", "moderator_lease"]
    list_display_links = None  # the review id links to the review page, not to a change form
    list_filter = ["status", QueueFilter, *CONTENT_LIST_FILTERS, DecisionSourceFilter, CallbackTroubleFilter, StuckFilter,
                   ("content__kind", admin.ChoicesFieldListFilter), "client",
                   SubmittedFilter, AuthorFilter]
    search_fields = ["content__external_id"]
    search_help_text = SEARCH_HELP
    list_select_related = ["content", "client", "decision", "leased_to"]
    readonly_fields = ["timeline_link", *[f.name for f in ContentReview._meta.fields]]
    actions = ["override_selected", "escalate_selected", "reprocess_selected"]
    inlines = [AppealInline, ReportInline]
    change_list_template = "admin/moderation/contentreview/change_list.html"
    ordering = ["-created_at"]  # newest first; the queues have their own order (queues_view)
    # No count(*) of a large table: the planner's estimate (moderation/admin/paginator.py).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    list_per_page = 50

    # --- the list ------------------------------------------------------------------------------

    def get_queryset(self, request):
        latest_provider = ModerationRequest.objects.filter(review=OuterRef("pk")).order_by("-id").values("provider")[:1]
        # A page of 100,000-character texts is not loaded: the list reads excerpts (ReviewChangeList).
        reviews = (super().get_queryset(request).defer("content__text", "content__metadata")
                   .annotate(provider_name=Subquery(latest_provider)))
        return review_media.with_thumbnail_flag(review_page.with_model_score(reviews), request.user)

    def get_changelist(self, request, **kwargs):
        return ReviewChangeList

    @admin.display(description="review", ordering="id")
    def short_id(self, review):
        return format_html('<a href="{}" class="review-link">{}</a>', self._timeline_url(review.pk), review.short_id)

    @admin.display(description="content")
    def content_excerpt(self, review):
        return excerpt_html(review)

    @admin.display(description="content type", ordering="content__kind")
    def kind(self, review):
        return review.content.kind

    @admin.display(description="top category")
    def top_category(self, review):
        return review_page.top_category_text(review)

    @admin.display(description="queue")
    def badges(self, review):
        """The review queue, priority and wait of a review waiting for a human, and the pile-on
        mark of one whose reports look like one."""
        if review.status != ReviewStatus.MANUAL_REVIEW or not review.queue:
            return review_page.pile_on_html(review)
        now = timezone.now()
        return format_html(
            '<span class="badge queue-{}">{}</span> <span class="badge">priority {}</span> '
            '<span class="badge" title="waiting in the queue">{}</span> {} {}',
            review.queue, getattr(review, "queue_label", review.queue), f"{review.priority or 0:.0f}",
            timesince(review.queued_at, now) if review.queued_at else "—",
            due_html(review, now=now, near_share=getattr(review, "near_share", None) or DEFAULT_NEAR_SHARE),
            review_page.pile_on_html(review),
        )

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
        category = f", {review.decision.category}" if review.decision.category else ""
        return f"{review.decision.label} ({review.decision.source}{score}{category})"

    @admin.display(description="moderator")
    def moderator_lease(self, review):
        if review.leased_to_id and review.lease_expires_at and review.lease_expires_at > timezone.now():
            return str(review.leased_to)
        return ""

    @admin.display(description="review page")
    def timeline_link(self, review):
        return format_html('<a class="button" href="{}">Open the review page</a>', self._timeline_url(review.pk))

    def get_search_results(self, request, queryset, search_term):
        """Ids and content (docs/workplace.md, "Search"); the rule used is shown by the page."""
        try:
            found, request.search_rule = reviews_matching(queryset, search_term)
        except ValueError as exc:  # said on the page; the list shows nothing rather than everything
            self.message_user(request, f"Not searched: {exc}", messages.ERROR)
            return queryset.none(), False
        return found, False

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
            path("queues/", self.admin_site.admin_view(self.queues_view), name="moderation_contentreview_queues"),
            path("deadlines/", self.admin_site.admin_view(lambda request: deadlines_view(self, request)),
                 name="moderation_contentreview_deadlines"),
            path("<uuid:object_id>/timeline/", self.admin_site.admin_view(self.timeline_view),
                 name="moderation_contentreview_timeline"),
            path("<uuid:object_id>/act/<str:action>/", self.admin_site.admin_view(self.act_view),
                 name="moderation_contentreview_act"),
            path("<uuid:object_id>/note/", self.admin_site.admin_view(self.note_view),
                 name="moderation_contentreview_note"),
            path("<uuid:object_id>/release/", self.admin_site.admin_view(self.release_view),
                 name="moderation_contentreview_release"),
            path("<uuid:object_id>/skip/", self.admin_site.admin_view(self.skip_view),
                 name="moderation_contentreview_skip"),
            path("<uuid:object_id>/golden/",
                 self.admin_site.admin_view(lambda request, object_id: qa.golden_mark_view(self, request, object_id)),
                 name="moderation_contentreview_golden"),
            path("<uuid:object_id>/media/",
                 self.admin_site.admin_view(lambda request, object_id: review_media.media_view(self, request, object_id)),
                 name="moderation_contentreview_media"),
            path("<uuid:object_id>/media-preference/",
                 self.admin_site.admin_view(lambda request, object_id: review_media.preference_view(self, request, object_id)),
                 name="moderation_contentreview_media_preference"),
        ]
        return own + super().get_urls()

    def _timeline_url(self, review_id) -> str:
        return reverse("admin:moderation_contentreview_timeline", args=[review_id])

    def _queues_url(self, queue: str = "") -> str:
        return reverse("admin:moderation_contentreview_queues") + (f"?queue={queue}" if queue else "")

    def _page(self, request, template: str, title: str, **context):
        return review_page.workplace_page(self, request, template, title, **context)

    def timeline_view(self, request, object_id, posted=None):
        """The review page: the whole content, the model's scores against the thresholds, the
        decide panel, the notes, then the timeline. `posted`: a refused decision's form data,
        shown back as typed (act_view)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        review = visible_review_or_404(request, object_id, ContentReview.objects.select_related(
            "content", "client", "decision__policy", "decision__moderator", "leased_to", "author"))
        item = services.qa_item_shown(moderator=request.user, review_id=review.pk)
        if item is not None:  # QA work handed to this moderator: the same page, blind (docs/qa.md)
            return qa.qa_page(self, request, item, review, posted=posted)
        can = {action: request.user.has_perm(perm) for action, perm in PERMISSIONS.items()}
        is_final, version = review.is_final, {"version": review.version}
        policy = services.policy_active()
        scored = review_page.model_decision(review)
        queue = request.GET.get("queue") or review.queue
        summary = report_summaries([review]).get(review.pk)
        appeal = review.appeals.select_related("decision__moderator").order_by("-created_at").first()
        decide_form, erasure = None, review_words.erasure_words(review)
        if can["override"] and is_final and erasure is None:  # erased: nothing is left to judge
            flags = {"reported": bool(summary and summary.open), "appealed": bool(appeal and appeal.is_open),
                     "policy": policy}
            if posted is not None:
                decide_form = refused_decide_form(posted, review, **flags)
            else:
                decide_form = DecideForm(initial={**version, "queue": queue if queue in services.review_queue_slugs() else ""},
                                         **flags)
                decide_form.initial["category"] = prefilled_category(review, summary, decide_form.categories())
        looks = second_look_panel(request, review, can_escalate=can["escalate"], erased=erasure is not None)
        if looks["hold_decide"]:  # only a senior moderator decides it now: the panel says why
            decide_form = None
        return self._page(
            request, "admin/moderation/contentreview/timeline.html", f"Review {review.short_id}",
            review=review,
            **looks,
            # Each list a page at a time: a client can file thousands of reports on one review.
            entries=rows_page(request.GET, "timeline_page", TIMELINE_PAGE_ROWS,
                              lambda offset, limit: review_timeline(review, notes=True, first=offset + limit)[offset:]),
            media_host=review_page.media_host(review.content.media_url),
            media=review_media.media_panel(request, review),
            metadata=review_page.metadata_rows(review.content.metadata),
            scored_decision=scored,
            scores=review_page.score_rows(scored, policy),
            decide_form=decide_form,
            typed=review_page.typed_back(posted) if posted is not None and decide_form is None else None,
            escalate_form=EscalateForm(initial=version) if can["escalate"] and erasure is None
            and review.status in (ReviewStatus.PENDING, ReviewStatus.PROCESSING) else None,
            reprocess_form=ReasonForm(initial=version) if can["reprocess"] and is_final and erasure is None else None,
            erasure=erasure,
            status_words=review_words.status_words(review, summary.count if summary else 0),
            decision_words=review_words.decision_words(review.decision),
            note_form=NoteForm() if can["override"] or can["escalate"] else None,
            notes=rows_page(request.GET, "notes_page", LIST_PAGE_ROWS, lambda offset, limit: list(
                ModeratorNote.objects.filter(review=review).select_related("author", "decision")
                .order_by("created_at", "pk")[offset:offset + limit])),
            leased_to_me=review.leased_to_id == request.user.pk
            and review.lease_expires_at and review.lease_expires_at > timezone.now(),
            queue=queue,
            queue_label=services.review_queue_label(review.queue) if review.queue else "",
            due=due_html(review, now=timezone.now(), near_share=services.policy_active().deadline_near_share)
            if review.due_at else "",
            reports=rows_page(request.GET, "reports_page", LIST_PAGE_ROWS, lambda offset, limit: list(
                review.reports.order_by("created_at", "pk")[offset:offset + limit])),
            report_count=review.reports.count(),
            report_summary=summary,
            report_reasons=review_page.reasons_html(summary),
            report_kinds=review_page.kinds_text(summary),
            pile_on=review_page.pile_on_html(review),
            appeal=appeal,
            golden=qa.golden_panel(request, review),
        )

    def queues_view(self, request):
        """Each review queue's depth and oldest wait, and the chosen queue's first reviews in the
        order "Review next" hands them out."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        queues = services.review_queues(request.user)  # only those this moderator may take
        can_see_escalations = SECOND_LOOK_QUEUE in {q.slug for q in queues}
        figures = review_queue_figures(queues=queues)
        chosen = request.GET.get("queue", "")
        if chosen not in {q.slug for q in queues}:
            chosen = next((q.queue for q in figures if q.depth), figures[0].queue if figures else "")
        refused = refuse_nul(request)
        if refused:
            return refused
        filters = [{"param": f.param, "title": f.title, "choices": f.choices(), "value": request.GET.get(f.param, "")}
                   for f in REVIEW_FILTERS]
        queued = filtered_reviews(reviews_visible_to(
            request.user, ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, queue=chosen)), request.GET)
        search, search_rule = request.GET.get("q", ""), None
        try:
            queued, search_rule = reviews_matching(queued, search)
        except ValueError as exc:
            self.message_user(request, f"Not searched: {exc}", messages.ERROR)
            queued = queued.none()
        # "Review next"'s order (most urgent first), or by due time (review_queue_due_idx).
        by_due = request.GET.get("order") == "due"
        waiting = with_excerpts(review_media.with_thumbnail_flag(
            review_page.with_model_score(queued).select_related("content", "decision", "leased_to").defer("content__text", "content__metadata")
            .order_by(*(("due_at", "id") if by_due else ("queue_order_at", "id"))), request.user)[:QUEUE_PAGE_ROWS]
        )
        now = timezone.now()
        policy = services.policy_active()
        # The urgent queue's deadline is in minutes (docs/legal-holds.md), not hours.
        urgent = chosen == ReviewQueue.URGENT
        minutes = policy.urgent_deadline_minutes if urgent else 0
        # What the reports say, for the page shown: one grouped query over these reviews' reports.
        reported = chosen in REPORT_QUEUES
        summaries = report_summaries(waiting) if reported else {}
        rows = [{
            "review": review,
            "reports": summaries.get(review.pk),
            "reasons": review_page.reasons_html(summaries.get(review.pk)),
            "pile_on": review_page.pile_on_html(review),
            "excerpt": self.content_excerpt(review),
            "top": self.top_category(review),
            "waited": timesince(review.queued_at, now) if review.queued_at else "—",
            "due": due_html(review, now=now, near_share=policy.deadline_near_share),
            "deadline": review.queued_at + timedelta(minutes=minutes) if urgent and review.queued_at else None,
            "holder": self.moderator_lease(review),
        } for review in waiting]
        looks_count, looks = second_looks_waiting(request.user) if can_see_escalations else (0, [])
        for row, review in zip(looks, with_excerpts(row["look"].review for row in looks), strict=True):
            row["excerpt"] = excerpt_html(review)
        return self._page(
            request, "admin/moderation/contentreview/queues.html", "Review queues",
            second_looks=looks if chosen == SECOND_LOOK_QUEUE else None, second_look_count=looks_count,
            second_look_queue=SECOND_LOOK_QUEUE,
            account_appeals_open=AccountAppeal.objects.filter(status=AccountAppealStatus.OPEN).count()
            if request.user.has_perm("moderation.view_accountappeal") else None,
            figures=figures, chosen=chosen, chosen_label=next((q.label for q in queues if q.slug == chosen), chosen),
            rows=rows, reported=reported, urgent=urgent, deadline_minutes=minutes, by_due=by_due,
            order_words=queue_order_words(chosen),
            target=deadline_for(policy, chosen) if chosen else None, near_share=policy.deadline_near_share,
            can_take=self.has_override_permission(request), page_rows=QUEUE_PAGE_ROWS,
            search=search, search_rule=search_rule, search_help=SEARCH_HELP, filters=filters,
            narrowed=bool(search.strip()) or any(f["value"] for f in filters),
        )

    def act_view(self, request, object_id, action):
        if request.method != "POST" or action not in PERMISSIONS:
            raise PermissionDenied
        review = visible_review_or_404(request, object_id)
        item = services.qa_item_shown(moderator=request.user, review_id=review.pk) if action == "override" else None
        if item is not None and item.is_open:  # QA work: the answer is scored, never applied (docs/qa.md)
            if not self.has_override_permission(request):
                raise PermissionDenied
            refused_page = qa.qa_answer_view(self, request, item, review)
            if refused_page is not None:
                return refused_page
            if "decide_and_next" in request.POST:
                return self._next(request, None if queue_refused(request.user, item.queue or None) else item.queue or None)
            return HttpResponseRedirect(self._timeline_url(review.pk))
        form = FORMS.get(action, ReasonForm)(request.POST)
        if action == "reprocess" and not request.POST.get("reason", "").strip():
            form = ReasonForm({**request.POST.dict(), "reason": "reprocessed from the admin"})
        refused = (None if form.is_valid() else
                   "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items()))
        refused = refused or act(request, action, review, form.cleaned_data)
        if refused:
            self.message_user(request, f"Not {DONE[action]}: {refused}", messages.ERROR)
            if action == "override":  # nothing typed is lost: the page again, the form as posted
                page = self.timeline_view(request, object_id, posted=request.POST)
                page.status_code = 400 if form.errors else 409
                return page
            return HttpResponseRedirect(self._timeline_url(review.pk))
        review.refresh_from_db()
        self.message_user(request, review_words.done_message(request, action, review), messages.SUCCESS)
        if action == "override" and "decide_and_next" in request.POST:
            queue = form.cleaned_data.get("queue") or None  # a queue gone or barred meanwhile: every queue
            return self._next(request, None if queue_refused(request.user, queue) else queue)
        return HttpResponseRedirect(self._timeline_url(review.pk))

    def _next(self, request, queue: str | None, skipped=None):
        """Lease the next review of review queue `queue` (every one when None) and open it: none
        the moderator skipped lately (`skipped_reviews`)."""
        skipped = skipped_reviews(request) if skipped is None else skipped
        review = services.review_take_next(moderator=request.user, queue=queue, skip=skipped)
        if review is None:
            passed = (f" You skipped {len(skipped)} review{'s' if len(skipped) != 1 else ''} lately: they come "
                      f"back to you {settings.MODERATOR_LEASE_S // 60} minutes after you skipped them.") if skipped else ""
            self.message_user(request, nothing_to_take(request.user, queue) + passed, messages.INFO)
            return HttpResponseRedirect(self._queues_url(queue or ""))
        return HttpResponseRedirect(self._timeline_url(review.pk) + (f"?queue={queue}" if queue else ""))

    def review_next_view(self, request):
        if request.method != "POST" or not self.has_override_permission(request):
            raise PermissionDenied
        queue = request.POST.get("queue") or None
        refused = queue_refused(request.user, queue)
        if refused:
            self.message_user(request, refused, messages.ERROR)
            return HttpResponseRedirect(self._queues_url())
        return self._next(request, queue)

    def note_view(self, request, object_id):
        if request.method != "POST" or not (self.has_override_permission(request)
                                            or self.has_escalate_permission(request)):
            raise PermissionDenied
        visible_review_or_404(request, object_id)
        form = NoteForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(" ".join(e) for e in form.errors.values())
            self.message_user(request, f"Note not added: {errors}", messages.ERROR)
        else:
            try:
                item = services.qa_item_shown(moderator=request.user, review_id=object_id)
                if item is not None and item.is_open:  # QA work's note stays with it (docs/qa.md)
                    services.qa_note_add(item_id=item.pk, moderator=request.user, text=form.cleaned_data["text"])
                else:
                    services.review_note_add(review_id=object_id, author=request.user, text=form.cleaned_data["text"])
                self.message_user(request, "Note added.", messages.SUCCESS)
            except ModerationError as exc:
                self.message_user(request, f"Note not added: {refusal_words(exc)}", messages.ERROR)
        return HttpResponseRedirect(self._timeline_url(object_id))

    def release_view(self, request, object_id):
        if request.method != "POST" or not self.has_override_permission(request):
            raise PermissionDenied
        if services.review_release(review_id=object_id, moderator=request.user):
            self.message_user(request, "Review returned to the queue.", messages.INFO)
        else:  # say so: nothing changed
            self.message_user(request, "Not returned to the queue: you do not hold this review.", messages.ERROR)
        return HttpResponseRedirect(reverse("admin:moderation_contentreview_changelist"))

    def changelist_view(self, request, extra_context=None):
        refused = refuse_nul(request)
        if refused:
            return refused
        response = super().changelist_view(request, extra_context)
        if getattr(response, "context_data", None) is not None:  # the rule the search used, if any
            response.context_data["search_rule"] = getattr(request, "search_rule", None)
        return response

    def skip_view(self, request, object_id):
        """Pass over this review: return it to its queue and take the next one there."""
        if request.method != "POST" or not self.has_override_permission(request):
            raise PermissionDenied
        queue = request.POST.get("queue") or None
        if queue_refused(request.user, queue):
            queue = None
        services.review_release(review_id=object_id, moderator=request.user)
        return self._next(request, queue, skipped=skipped_reviews(request, add=object_id))

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
                "form": form, "reviews": excerpted(queryset.values("pk"), request.user), "action": f"{action}_selected",
            })
        reviews = list(queryset.order_by("created_at"))
        # The version each review had on the confirmation page: one changed since (another
        # moderator, a provider result) is refused, not overwritten. All are read before any
        # review is touched, so a bad one leaves the whole batch as it was.
        versions = {}
        for review in reviews:
            seen = request.POST.get(f"version_{review.pk}", "")
            if seen and not VERSION.fullmatch(seen):
                self.message_user(request, f"Nothing was {DONE[action]}: the version posted for review "
                                           f"{review.short_id} is not a version number.", messages.ERROR)
                return None
            versions[review.pk] = int(seen) if seen else review.version
        outcomes, skipped = Counter(), Counter()
        for review in reviews:
            refused = act(request, action, review, {**form.cleaned_data, "version": versions[review.pk]})
            if refused:
                skipped[refused] += 1
            else:
                outcomes[DONE[action]] += 1
        summary = ", ".join([f"{n} {what}" for what, n in outcomes.items()]
                            + [f"{n} skipped: {why}" for why, n in skipped.items()]) or "nothing to do"
        self.message_user(request, summary[0].upper() + summary[1:] + ".", messages.WARNING if skipped else messages.SUCCESS)
        return None
