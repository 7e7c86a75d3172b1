"""Account appeals in the workplace (docs/workplace.md, "Account appeals"): a queue of their own
(the open ones, the longest waiting first), and one page per appeal with the appeal, the
account action it contests, the strikes the action rested on and the content behind them, and
the decision: uphold or overturn, under four eyes (the moderator who took the action may not
decide its appeal), through `account_appeal_resolve`, which lifts an overturned restriction and
tells the client.

The strikes are the action's own record of them (`AccountAction.strikes`, fixed when it was
taken). The content behind a strike whose review waits, or last waited, in a queue the
moderator may not see is not shown, nor linked (moderation/admin/visibility.py): the strike
stays, as on the author page, because it counts in the action.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from audit.admin_base import ReadOnlyPermissionsMixin
from moderation import services
from moderation.admin import review_page, review_words
from moderation.admin.reviews import excerpt_html, refuse_nul, with_excerpts
from moderation.errors import ModerationError
from moderation.models import ACCOUNT_REASON_MAX, AccountAppeal, AccountAppealStatus, ActionCause, ContentReview
from moderation.selectors import reviews_visible_to
from moderation.words import refusal_words

ACT_PERMISSION = "moderation.act_on_author"  # who may act on an author resolves its appeals (moderation/roles.py)


class AppealDecisionForm(forms.Form):
    outcome = forms.ChoiceField(
        choices=[(AccountAppealStatus.UPHELD, "Uphold: the action stays in force"),
                 (AccountAppealStatus.OVERTURNED, "Overturn: the suspension or ban is lifted")],
        widget=forms.RadioSelect)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=ACCOUNT_REASON_MAX,
                             label="Reason (required; the client is told the outcome)")


class StatusFilter(admin.SimpleListFilter):
    """The queue is the open appeals: what the list shows when no status is chosen."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [("open", "Open (the queue)"), ("upheld", "Upheld"), ("overturned", "Overturned"), ("all", "All")]

    def choices(self, changelist):
        for value, label in self.lookup_choices:
            yield {"selected": (self.value() or "open") == value, "display": label,
                   "query_string": changelist.get_query_string({self.parameter_name: value})}

    def queryset(self, request, queryset):
        value = self.value() or "open"
        return queryset if value == "all" else queryset.filter(status=value)


def action_words(action) -> str:
    """The contested action as a moderator reads it: what, until when, and who took it."""
    what = {"suspend": "Suspension", "ban": "Ban", "warn": "Warning"}.get(action.action, action.action)
    until = f" until {action.until:%Y-%m-%d %H:%M} UTC" if action.until else (" with no end" if action.action == "ban"
                                                                            else "")
    if action.cause == ActionCause.STRIKES:
        who = f"the enforcement ladder ({action.strike_points} strike point{'s' if action.strike_points != 1 else ''})"
    else:
        who = f"moderator {action.moderator}" if action.moderator else "a moderator"
    return f"{what}{until}, taken by {who}"


class AccountAppealAdmin(ReadOnlyPermissionsMixin, admin.ModelAdmin):
    list_display = ["appeal_link", "author_link", "client", "contested", "filed", "waited", "status", "resolved_by"]
    list_filter = [StatusFilter]
    list_select_related = ["author__client", "action__moderator", "resolved_by"]
    search_fields = ["=author__author_id"]
    search_help_text = "The author's id, exactly as the client sends it."
    ordering = ["created_at", "id"]  # the longest waiting first, as "Review next" hands out content appeals
    list_per_page = 50
    show_full_result_count = False

    def changelist_view(self, request, extra_context=None):
        return refuse_nul(request) or super().changelist_view(
            request, {**(extra_context or {}), "title": "Account appeals"})

    @admin.display(description="appeal")
    def appeal_link(self, appeal):
        url = reverse("admin:moderation_accountappeal_change", args=[appeal.pk])
        return format_html('<a href="{}" class="appeal-link" id="appeal-{}">Open</a>', url, appeal.pk)

    @admin.display(description="author")
    def author_link(self, appeal):
        return appeal.author.author_id

    @admin.display(description="client")
    def client(self, appeal):
        return appeal.author.client

    @admin.display(description="contests")
    def contested(self, appeal):
        return action_words(appeal.action)

    @admin.display(description="filed (UTC)", ordering="created_at")
    def filed(self, appeal):
        return f"{appeal.created_at:%Y-%m-%d %H:%M}"

    @admin.display(description="waited")
    def waited(self, appeal):
        return timesince(appeal.created_at, appeal.resolved_at or timezone.now())

    def has_decide_permission(self, request) -> bool:
        return request.user.has_perm(ACT_PERMISSION)

    def get_urls(self):
        own = [path("<uuid:appeal_id>/decide/", self.admin_site.admin_view(self.decide_view),
                    name="moderation_accountappeal_decide")]
        return own + super().get_urls()

    def _page_url(self, appeal_id) -> str:
        return reverse("admin:moderation_accountappeal_change", args=[appeal_id])

    # --- the appeal page ---------------------------------------------------------------------------

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            appeal = get_object_or_404(AccountAppeal.objects.select_related(
                "author__client", "author__restriction", "action__moderator", "action__policy", "resolved_by",
                "notification"), pk=object_id)
        except ValidationError:
            raise Http404 from None  # not a UUID
        action = appeal.action
        can_decide = self.has_decide_permission(request)
        own_action = action.moderator_id is not None and action.moderator_id == request.user.pk
        return review_page.workplace_page(
            self, request, "admin/moderation/accountappeal/appeal_page.html",
            f"Account appeal of {appeal.author.author_id}",
            appeal=appeal, action=action, author=appeal.author, contested=action_words(action),
            strikes=strikes_with_content(action, request.user),
            in_force=appeal.author.restriction_id == action.pk,
            own_action=own_action,
            form=AppealDecisionForm() if appeal.is_open and can_decide and not own_action else None,
            waited=timesince(appeal.created_at, appeal.resolved_at or timezone.now()),
            notification=getattr(appeal, "notification", None),
        )

    def decide_view(self, request, appeal_id):
        if request.method != "POST" or not self.has_decide_permission(request):
            raise PermissionDenied
        appeal = get_object_or_404(AccountAppeal.objects.select_related("author"), pk=appeal_id)
        form = AppealDecisionForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
            self.message_user(request, f"Not decided: {errors}", messages.ERROR)
            return HttpResponseRedirect(self._page_url(appeal.pk))
        in_force = appeal.author.restriction_id == appeal.action_id
        try:
            decided = services.account_appeal_resolve(appeal_id=appeal.pk, moderator=request.user,
                                                      outcome=form.cleaned_data["outcome"],
                                                      reason=form.cleaned_data["reason"])
        except ModerationError as exc:  # four eyes, decided by another moderator meanwhile
            self.message_user(request, f"Not decided: {refusal_words(exc, me=str(request.user))}", messages.ERROR)
            return HttpResponseRedirect(self._page_url(appeal.pk))
        self.message_user(request, decided_words(decided, lifted=in_force), messages.SUCCESS)
        return HttpResponseRedirect(self._page_url(appeal.pk))


def decided_words(appeal: AccountAppeal, *, lifted: bool) -> str:
    """What the decision did, truthfully: an overturn lifts the restriction only if it was still
    the one in force (it may have expired or been replaced meanwhile)."""
    if appeal.status == AccountAppealStatus.UPHELD:
        return "Appeal upheld: the action stays in force. The client is told the outcome."
    if lifted:
        return "Appeal overturned: the restriction is lifted. The client is told the outcome and that it was lifted."
    return ("Appeal overturned. The restriction was no longer in force (it had ended or been replaced), so nothing "
            "was lifted. The client is told the outcome.")


def strikes_with_content(action, user) -> list[dict]:
    """The strikes the action rested on (its record of them), each with its review and content
    when `user` may see that review; `hidden` otherwise (nothing of it is read)."""
    ids = [strike.get("review_id") for strike in action.strikes or () if strike.get("review_id")]
    visible = {str(review.pk): review for review in with_excerpts(
        reviews_visible_to(user, ContentReview.objects.filter(pk__in=ids))
        .select_related("content", "decision__moderator").defer("content__text", "content__metadata"))}
    rows = []
    for strike in action.strikes or ():
        review = visible.get(strike.get("review_id", ""))
        rows.append({"category": strike.get("category", ""), "points": strike.get("points", 0), "review": review,
                     "excerpt": excerpt_html(review) if review is not None else "",
                     "decided": review_words.decision_words(review.decision) if review is not None else ""})
    return rows

