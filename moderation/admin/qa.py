"""Moderator QA in the admin (docs/qa.md): QA work shown as the review page shows a review,
blind; the golden form on a decided review's page; and the QA page of figures, golden items and
disagreements.

Blind: a golden item or a second review is the review page of its content as if it waited in a
queue (the status "waiting for a human", the model's scores, the decide panel), without what
would give it away: the decision in force, the notes, reports and appeal, and the timeline's
entries from the decision on. Its decide panel posts to the same URL as a review's; the answer
goes to `qa_answer`, never to the review.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from types import SimpleNamespace

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone

from moderation import services
from moderation.admin import review_media, review_page
from moderation.admin.paginator import rows_page
from moderation.admin.review_forms import DecideForm, NoteForm
from moderation.errors import ModerationError, QueueForbidden
from moderation.models import QA_NOTE_MAX, ContentReview, GoldenItem, QaItem, QaKind, ReviewStatus
from moderation.observability import qa as figures
from moderation.observability.timeline import review_timeline
from moderation.validation import policy_categories
from moderation.words import STATUS_NOW, decided, refusal_words

VIEW = "moderation.view_qaitem"
VIEW_ALL = "moderation.view_all_qa"
LEAD = "moderation.lead_qa"
WEEKS_DEFAULT, WEEKS_MAX = 8, 104
TIMELINE_ROWS = 100


# --- QA work on the review page -------------------------------------------------------------------


def blind_review(item: QaItem, review: ContentReview, user, priority: float) -> ContentReview:
    """`review` (never saved) dressed as a review waiting in the item's queue, held by `user`."""
    review.queue, review.queued_at = item.queue, item.created_at if item.kind == QaKind.SECOND_REVIEW else item.taken_at
    review.leased_to, review.lease_expires_at = user, item.leased_until
    review.priority = priority
    return review


def qa_page(model_admin, request, item: QaItem, review: ContentReview, posted=None):
    """The review page of QA work: blind, as above. Answered, it shows the answer as the
    moderator's decision, as a review page shows the decision just made."""
    policy = services.policy_active()
    scored = review_page.model_decision(review)
    # The timeline up to the decision the item must not show (the first decision; a golden
    # review's decision in force).
    shown_until = item.first_decision or review.decision
    cut = shown_until.created_at if shown_until is not None else timezone.now()
    # The priority a model-routed review of these scores would have (moderation.review_queues).
    priority = policy.priority_score_weight * float(scored.score or 0) if scored is not None else 0.0
    review = blind_review(item, review, request.user, priority)
    answered = item.answered_at is not None
    decide_form = None
    if not answered:
        flags = {"reported": False, "appealed": False, "policy": policy}
        if posted is not None:
            data = posted.copy()
            data["version"] = review.version
            decide_form = DecideForm(data, **flags)
            decide_form.is_valid()
        else:
            decide_form = DecideForm(initial={"version": review.version, "queue": item.queue}, **flags)
    if answered:
        status = f"{decided(item.label)} by a moderator"
        words = f"{decided(item.label, item.category)} by moderator {request.user}" + (f": {item.reason}" if item.reason else "")
    else:
        status = STATUS_NOW[ReviewStatus.MANUAL_REVIEW].capitalize()
        words = "None yet" if scored is None else (f"{decided(scored.label, scored.category)} by the model"
                                                   + (f", top score {scored.score:.2f}" if scored.score is not None else ""))
    empty = lambda offset, limit: []  # noqa: E731 - a page of nothing
    return review_page.workplace_page(
        model_admin, request, "admin/moderation/contentreview/timeline.html", f"Review {review.short_id}",
        review=review,
        entries=rows_page(request.GET, "timeline_page", TIMELINE_ROWS, lambda offset, limit: [
            entry for entry in review_timeline(review, notes=False, first=offset + limit) if entry.at < cut][offset:]),
        media_host=review_page.media_host(review.content.media_url),
        media=review_media.media_panel(request, review),
        metadata=review_page.metadata_rows(review.content.metadata),
        scored_decision=scored, scores=review_page.score_rows(scored, policy),
        decide_form=decide_form, typed=None, escalate_form=None, reprocess_form=None, erasure=None,
        status_words=status, decision_words=words, note_form=NoteForm(),
        notes=rows_page(request.GET, "notes_page", 50, lambda offset, limit: [
            SimpleNamespace(author=request.user, created_at=item.taken_at, decision=None, text=item.note)
        ][offset:offset + limit] if item.note else []),
        leased_to_me=not answered, queue=item.queue,
        queue_label=services.review_queue_label(item.queue) if item.queue else "",
        reports=rows_page(request.GET, "reports_page", 50, empty), report_count=0, report_summary=None,
        report_reasons="—", report_kinds="", pile_on="", appeal=None,
    )


def qa_answer_view(model_admin, request, item: QaItem, review: ContentReview):
    """The decide panel's post on QA work: the answer, scored, and said as a decision is said.
    None when answered (the caller goes on as after a decision), else the page again, as posted."""
    form = DecideForm(request.POST, policy=services.policy_active())
    refused = None if form.is_valid() else "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
    if refused is None:
        data = form.cleaned_data
        try:
            item = services.qa_answer(item_id=item.pk, moderator=request.user, label=data["label"],
                                      category=data.get("category", ""), reason=data.get("reason", ""),
                                      reason_codes=data.get("reason_codes", ()), note=data.get("note", ""))
        except ModerationError as exc:
            refused = refusal_words(exc, me=str(request.user))
    if refused:
        model_admin.message_user(request, f"Not overridden: {refused}", messages.ERROR)
        page = qa_page(model_admin, request, item, review, posted=request.POST)
        page.status_code = 400 if form.errors else 409
        return page
    model_admin.message_user(request, f"{decided(item.label, item.category)}.", messages.SUCCESS)
    return None


# --- marking a decided review golden --------------------------------------------------------------


class GoldenForm(forms.Form):
    expected_label = forms.ChoiceField(choices=[(ReviewStatus.APPROVED, "Approve"), (ReviewStatus.REJECTED, "Reject")],
                                       label="Expected decision")
    expected_category = forms.ChoiceField(required=False, label="Expected category (a rejection's)")

    def __init__(self, *args, policy=None, **kwargs):
        super().__init__(*args, **kwargs)
        categories = policy_categories(policy or services.policy_active())
        self.fields["expected_category"].choices = [("", "—")] + [(c, c) for c in categories]


def golden_panel(request, review: ContentReview) -> dict | None:
    """What the review page shows a team lead about golden items: the form to mark this decided
    review golden (prefilled with its decision), or the golden item it is. None for others."""
    if not request.user.has_perm(LEAD) or review.status not in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
        return None
    golden = GoldenItem.objects.filter(review=review).first()
    decision = review.decision
    form = None if golden else GoldenForm(initial={"expected_label": review.status,
                                                   "expected_category": decision.category if decision else ""})
    return {"form": form, "golden": golden}


def golden_mark_view(model_admin, request, object_id):
    if request.method != "POST" or not request.user.has_perm(LEAD):
        raise PermissionDenied
    form = GoldenForm(request.POST)
    if not form.is_valid():
        model_admin.message_user(request, "Not marked golden: " + "; ".join(
            f"{field}: {' '.join(e)}" for field, e in form.errors.items()), messages.ERROR)
    else:
        try:
            services.golden_mark(review_id=object_id, expected_label=form.cleaned_data["expected_label"],
                                 expected_category=form.cleaned_data["expected_category"], lead=request.user)
            model_admin.message_user(request, "Marked golden: moderators get it blind, at the policy's golden rate.",
                                     messages.SUCCESS)
        except ModerationError as exc:
            model_admin.message_user(request, f"Not marked golden: {refusal_words(exc)}", messages.ERROR)
        except ContentReview.DoesNotExist:
            model_admin.message_user(request, "Not marked golden: there is no such review.", messages.ERROR)
    return HttpResponseRedirect(reverse("admin:moderation_contentreview_timeline", args=[object_id]))


# --- the QA page ------------------------------------------------------------------------------------


class FiguresForm(forms.Form):
    weeks = forms.IntegerField(min_value=1, max_value=WEEKS_MAX, required=False, label="Weeks",
                               help_text=f"The last N ISO weeks, this one included (default {WEEKS_DEFAULT}).")
    moderator = forms.CharField(max_length=150, required=False, label="Moderator",
                                help_text="A user name, exactly; empty: everyone.")


class SettleForm(forms.Form):
    settlement = forms.CharField(max_length=QA_NOTE_MAX, widget=forms.Textarea(attrs={"rows": 2}),
                                 label="How it was settled")


@dataclass(frozen=True)
class Disagreement:
    item: QaItem
    first: str
    second: str


@admin.register(QaItem)
class QaAdmin(admin.ModelAdmin):
    """The QA page (its list), the golden items and the disagreements to settle."""

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(VIEW) or request.user.has_perm(VIEW_ALL)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_urls(self):
        return [
            path("settle/<int:item_id>/", self.admin_site.admin_view(self.settle_view), name="moderation_qaitem_settle"),
            path("golden/<int:golden_id>/retire/", self.admin_site.admin_view(self.retire_view),
                 name="moderation_qaitem_retire"),
            path("", self.admin_site.admin_view(self.changelist_view), name="moderation_qaitem_changelist"),
        ]

    def changelist_view(self, request, extra_context=None):
        """GET: the figures of the last N weeks, by moderator, category and week: everyone's for
        a team lead or an auditor, the viewer's own for a moderator."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        everyone = request.user.has_perm(VIEW_ALL)
        form = FiguresForm(request.GET or None)
        weeks, viewer = WEEKS_DEFAULT, None if everyone else request.user.get_username()
        if form.is_bound and form.is_valid():
            weeks = form.cleaned_data["weeks"] or WEEKS_DEFAULT
            if everyone and form.cleaned_data["moderator"].strip():
                viewer = form.cleaned_data["moderator"].strip()
        today = timezone.now()
        since = (today - timedelta(days=today.weekday(), weeks=weeks - 1)).replace(hour=0, minute=0, second=0,
                                                                                   microsecond=0)
        by_category, by_moderator = figures.agreement(since=since, viewer=viewer)
        lead = request.user.has_perm(LEAD)
        return review_page.workplace_page(
            self, request, "admin/moderation/qaitem/qa_page.html", "Moderator QA",
            form=form, since=since, everyone=everyone, lead=lead, viewer=viewer,
            golden=figures.golden_accuracy(since=since, viewer=viewer),
            agreement=by_category, agreement_by_moderator=by_moderator,
            overturns=figures.overturns(since=since, viewer=viewer),
            times=figures.decision_times(since=since, viewer=viewer),
            disagreements=self._disagreements(request) if everyone else [],
            golden_items=GoldenItem.objects.filter(retired_at__isnull=True)
            .exclude(queue__in=services.queues_forbidden(request.user))
            .select_related("review", "marked_by")[:100] if everyone else [],
            settle_form=SettleForm() if lead else None,
        )

    def _disagreements(self, request) -> list[Disagreement]:
        """Second reviews that disagreed and wait for a team lead, oldest first (100), of reviews
        the viewer may see."""
        items = (QaItem.objects.filter(kind=QaKind.SECOND_REVIEW, agrees=False, settled_at__isnull=True)
                 .exclude(queue__in=services.queues_forbidden(request.user))
                 .select_related("review", "first_decision__moderator", "moderator").order_by("answered_at")[:100])
        return [Disagreement(item, f"{decided(item.first_decision.label, item.first_decision.category)} by "
                                   f"{item.first_decision.moderator}",
                             f"{decided(item.label, item.category)} by {item.moderator}") for item in items]

    def settle_view(self, request, item_id):
        if request.method != "POST" or not request.user.has_perm(LEAD):
            raise PermissionDenied
        form = SettleForm(request.POST)
        try:
            if not form.is_valid():
                raise ModerationError("say how it was settled", reason="say how it was settled")
            services.qa_disagreement_settle(item_id=item_id, lead=request.user,
                                            settlement=form.cleaned_data["settlement"])
            self.message_user(request, "Settled.", messages.SUCCESS)
        except (QaItem.DoesNotExist, QueueForbidden):  # one the lead may not see is not found either
            self.message_user(request, "Not settled: there is no such second review.", messages.ERROR)
        except ModerationError as exc:
            self.message_user(request, f"Not settled: {refusal_words(exc)}", messages.ERROR)
        return HttpResponseRedirect(reverse("admin:moderation_qaitem_changelist"))

    def retire_view(self, request, golden_id):
        if request.method != "POST" or not request.user.has_perm(LEAD):
            raise PermissionDenied
        try:
            services.golden_retire(golden_id=golden_id, lead=request.user)
            self.message_user(request, "Retired: it is handed out no more.", messages.SUCCESS)
        except (GoldenItem.DoesNotExist, QueueForbidden):  # one the lead may not see is not found either
            self.message_user(request, "Not retired: there is no such golden item.", messages.ERROR)
        return HttpResponseRedirect(reverse("admin:moderation_qaitem_changelist"))
