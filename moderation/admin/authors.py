"""Authors in the admin: the list (filters by standing, points, open cases and client; search by
author id, or by any id of one of the author's reviews), the author page (one timeline of its
content, reports, strikes, account actions and appeals, then each list by itself), the moderator's
actions on the account, and "act on all of this author's content matching ...", which is a bulk job
by query over the review list with the author's filter (moderation/admin/bulk_jobs.py)
(docs/workplace.md, "Authors").

Like the review page, every action goes through its service (moderation/services/account_actions.py),
posting the author's version the page was rendered with: an author changed since (a strike, the
ladder, another moderator) is refused, and the message says what changed.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.contrib.admin.views.main import ChangeList
from django.db.models import BooleanField, Count, ExpressionWrapper, Q, Value
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.http import urlencode

from audit.admin_base import ReadOnlyPermissionsMixin
from moderation import services
from moderation.admin.paginator import ClientKeyedListMixin, rows_page
from moderation.admin import review_page
from moderation.admin.filters import AUTHOR_PK, AUTHOR_POINTS, SubmittedFilter
from moderation.admin.reviews import excerpt_html, refuse_nul, with_excerpts
from moderation.errors import ModerationError, StaleAuthor
from moderation.models import (
    ACCOUNT_REASON_MAX,
    AccountAction,
    AccountAppeal,
    AccountAppealStatus,
    ActionKind,
    AUTHOR_ID_MAX,
    Author,
    BulkAction,
    ContentReview,
    ReviewStatus,
    Standing,
    StandingTransition,
    Strike,
)
from moderation.observability.author_timeline import TimelineKind, author_timeline, author_timeline_hidden
from moderation.observability.search import SEARCH_MAX_CHARS, review_ids_matching
from moderation.selectors import hidden_from, reviews_visible_to
from moderation.services.account_actions import SUSPEND_DAYS_MAX
from moderation.services.bulk import PERMISSION as BULK_PERMISSION

ACT_PERMISSION = "moderation.act_on_author"
PAGE_ROWS = 25  # each list of the author page, and its timeline
SEARCH_ROWS = 200  # authors a search finds by each rule, at most (as the review search's ids)
SEARCH_HELP = ("The author's id, exactly as the client sends it; or any id of one of the author's reviews "
               "(review id or its first characters, content id, external id, idempotency key, provider ids).")
# The buttons: the service each calls, and what the message says was done.
ACTIONS = {ActionKind.WARN: "warned", ActionKind.SUSPEND: "suspended", ActionKind.BAN: "banned", "lift": "lifted"}


class PointsFilter(admin.SimpleListFilter):
    """Authors by active strike points. Every range but "0" is served by the index of authors
    with a record (author_standing_idx): most authors have none."""

    title = "active strike points"
    parameter_name = "points"
    RANGES = AUTHOR_POINTS

    def lookups(self, request, model_admin):
        return [(key, key) for key in self.RANGES]

    def queryset(self, request, queryset):
        return queryset.filter(self.RANGES[self.value()]) if self.value() in self.RANGES else queryset


def open_case_authors():
    """The authors with an open case: a review waiting for a human (a content appeal puts its
    review there too), or an account appeal not yet resolved. Both are read from partial indexes
    of what is open (review_any_queue_order_idx, account_appeal_open_idx), never the authors'."""
    waiting = ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, author__isnull=False).values("author_id")
    appealing = AccountAppeal.objects.filter(status=AccountAppealStatus.OPEN).values("author_id")
    return Q(pk__in=waiting) | Q(pk__in=appealing)


class OpenCasesFilter(admin.SimpleListFilter):
    """Authors with an open case (`open_case_authors`), or with none."""

    title = "open cases"
    parameter_name = "open_cases"

    def lookups(self, request, model_admin):
        return [("yes", "With an open case"), ("no", "None open")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(open_case_authors())
        if self.value() == "no":
            return queryset.exclude(open_case_authors())
        return queryset


class AuthorChangeList(ChangeList):
    """Each author of the page shown with its open cases counted: one grouped query each over
    the page's authors (the reviews waiting for a human, the open account appeals), never per row.
    Reviews in a queue the viewer may not open are counted too (a number, never the review)."""

    def get_results(self, request):
        super().get_results(request)
        pks = [author.pk for author in self.result_list]
        waiting = dict(ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, author_id__in=pks)
                       .values_list("author_id").annotate(n=Count("pk")).values_list("author_id", "n"))
        appealing = dict(AccountAppeal.objects.filter(status=AccountAppealStatus.OPEN, author_id__in=pks)
                         .values_list("author_id").annotate(n=Count("pk")).values_list("author_id", "n"))
        for author in self.result_list:
            author.waiting_count, author.appeal_count = waiting.get(author.pk, 0), appealing.get(author.pk, 0)


class _Timeline:
    """The author's timeline as a sliceable list, for `rows_page` (which asks for one slice)."""

    def __init__(self, author: Author, user):
        self.author, self.user = author, user

    def __getitem__(self, cut: slice):
        return author_timeline(self.author, self.user, offset=cut.start, limit=cut.stop - cut.start)


# "Act on all of this author's content matching ...": each bulk action's button.
BULK_WORDS = {BulkAction.OVERRIDE: "Approve or reject all matching…", BulkAction.ESCALATE: "Escalate all matching…",
              BulkAction.REPROCESS: "Reprocess all matching…"}


class AuthorBulkForm(forms.Form):
    """The author page's "act on all of this author's content matching ..." choices."""

    action = forms.ChoiceField(choices=BulkAction.choices)
    submitted = forms.ChoiceField(required=False, choices=[("", "at any time"), *[
        (key, label) for key, (label, _) in SubmittedFilter.SINCE.items()]])
    status__exact = forms.ChoiceField(required=False, choices=[("", "any"), *ReviewStatus.choices])
    q = forms.CharField(required=False, max_length=SEARCH_MAX_CHARS)


class ActForm(forms.Form):
    """A warn, suspend, ban or lift button: the reason, the days of a suspension, and the
    author's version the page showed."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=ACCOUNT_REASON_MAX)
    days = forms.IntegerField(required=False, min_value=1, max_value=SUSPEND_DAYS_MAX, initial=7)
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class AppealResolveForm(forms.Form):
    outcome = forms.ChoiceField(choices=[(AccountAppealStatus.UPHELD, "Uphold"),
                                         (AccountAppealStatus.OVERTURNED, "Overturn (lifts the restriction)")],
                                widget=forms.RadioSelect)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=ACCOUNT_REASON_MAX)


def applicable(author: Author) -> list[str]:
    """The buttons the author's standing allows (the state machine's sources; lift: a restriction
    in force). A stale page may still post another: the service refuses it."""
    shown = [ActionKind.WARN] if author.standing in (Standing.GOOD, Standing.WARNED) else []
    if author.standing != Standing.BANNED:
        shown += [ActionKind.SUSPEND, ActionKind.BAN]
    return shown + (["lift"] if author.restriction_id else [])


class AuthorAdmin(ClientKeyedListMixin, ReadOnlyPermissionsMixin, admin.ModelAdmin):
    list_display = ["author_id", "client", "standing", "strike_points", "open_cases", "restricted_until", "created_at"]
    list_filter = ["standing", PointsFilter, OpenCasesFilter, "client"]
    list_select_related = ["client"]
    search_fields = ["author_id"]
    search_help_text = SEARCH_HELP
    client_key = "author_id"

    def changelist_view(self, request, extra_context=None):
        return refuse_nul(request) or super().changelist_view(request, extra_context)

    def get_changelist(self, request, **kwargs):
        return AuthorChangeList

    @admin.display(description="open cases")
    def open_cases(self, author):
        words = [f"{author.waiting_count} waiting for a human"] if author.waiting_count else []
        words += [f"{author.appeal_count} account appeal{'s' if author.appeal_count > 1 else ''} open"] \
            if author.appeal_count else []
        return ", ".join(words) or "—"

    def get_search_results(self, request, queryset, search_term):
        """The author whose id the term is, exactly (one descent of the (client, author_id) index
        per client: ClientKeyedListMixin), and the authors of the reviews the term names by any id
        the review list's search takes (moderation/observability/search.py, each an indexed
        look-up) among those the user may see. No text search: an author is not its words."""
        term = search_term.strip()
        if not term:
            return queryset, False
        by_id, _ = super().get_search_results(request, queryset, term)
        if len(term) > AUTHOR_ID_MAX:  # longer than any id a client sends or a column holds
            return by_id, False
        # Read as ids first: an OR of two IN (subquery) conditions would be planned as a scan of
        # every author with hashed subplans.
        pks = set(by_id.values_list("pk", flat=True)[:SEARCH_ROWS])
        reviews = reviews_visible_to(request.user, ContentReview.objects.filter(pk__in=review_ids_matching(term)))
        pks |= set(reviews.filter(author__isnull=False).values_list("author_id", flat=True)[:SEARCH_ROWS])
        return queryset.filter(pk__in=sorted(pks)), False

    def has_act_permission(self, request) -> bool:
        return request.user.has_perm(ACT_PERMISSION)

    def get_urls(self):
        own = [
            path("<int:object_id>/act/<str:action>/", self.admin_site.admin_view(self.act_view),
                 name="moderation_author_act"),
            path("<int:object_id>/bulk/", self.admin_site.admin_view(self.bulk_view), name="moderation_author_bulk"),
            path("<int:object_id>/appeal/<uuid:appeal_id>/resolve/", self.admin_site.admin_view(self.resolve_view),
                 name="moderation_author_resolve"),
        ]
        return own + super().get_urls()

    def _author_url(self, author_pk) -> str:
        return reverse("admin:moderation_author_change", args=[author_pk])

    # --- the author page ----------------------------------------------------------------------

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The author page: its facts, the buttons, then each list a page at a time (an author
        may have thousands of reviews)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if not AUTHOR_PK.fullmatch(str(object_id)):
            raise Http404  # the change URL takes any string: only an author's number is one
        author = get_object_or_404(Author.objects.select_related("client", "restriction"), pk=object_id)
        can_act = self.has_act_permission(request)
        query = request.GET

        def page(param, queryset):
            return rows_page(query, param, PAGE_ROWS, lambda offset, limit: list(queryset[offset:offset + limit]))

        # Its reviews a queue's groups keep to themselves are not listed; a strike of one stays (it
        # counts in the author's points) without naming its review (moderation/admin/visibility.py).
        reviews = page("reviews_page", reviews_visible_to(request.user, ContentReview.objects.filter(author=author))
                       .select_related("content", "decision").defer("content__text", "content__metadata")
                       .order_by("-created_at", "-id"))
        with_excerpts(reviews.rows)
        hidden = hidden_from(request.user, through="review")
        strikes = (Strike.objects.filter(author=author).select_related("review").order_by("-created_at", "-id")
                   .annotate(review_hidden=Value(False) if hidden is None
                             else ExpressionWrapper(hidden, output_field=BooleanField())))
        timeline = page("timeline_page", _Timeline(author, request.user))
        with_excerpts([item.row for item in timeline.rows if item.kind == TimelineKind.CONTENT])
        return review_page.workplace_page(
            self, request, "admin/moderation/author/author_page.html", f"Author {author.author_id}",
            author=author,
            timeline=timeline,
            timeline_items=[(item, excerpt_html(item.row) if item.kind == TimelineKind.CONTENT else "")
                            for item in timeline.rows],
            timeline_hidden=author_timeline_hidden(author, request.user),
            bulk_actions=[(action.value, BULK_WORDS[action]) for action in BulkAction
                          if request.user.has_perm(BULK_PERMISSION[action])],
            bulk_form=AuthorBulkForm(auto_id="author-bulk-%s"),
            reviews=reviews,
            excerpts=[(review, excerpt_html(review)) for review in reviews],
            active_strikes=page("strikes_page", strikes.filter(ended_at__isnull=True)),
            ended_strikes=page("ended_page", strikes.filter(ended_at__isnull=False)),
            actions=page("actions_page", AccountAction.objects.filter(author=author)
                         .select_related("moderator", "appeal").order_by("-created_at", "-id")),
            appeals=page("appeals_page", AccountAppeal.objects.filter(author=author)
                         .select_related("action__moderator", "resolved_by").order_by("-created_at", "-id")),
            transitions=page("transitions_page", StandingTransition.objects.filter(author=author).order_by("-id")),
            buttons=[(action, ActForm(initial={"version": author.version}, auto_id=f"id_{action}_%s"))
                     for action in applicable(author)] if can_act else [],
            resolve_form=AppealResolveForm() if can_act else None,
        )

    # --- actions --------------------------------------------------------------------------------

    def act_view(self, request, object_id, action):
        if request.method != "POST" or action not in ACTIONS or not self.has_act_permission(request):
            raise PermissionDenied
        author = get_object_or_404(Author, pk=object_id)
        form = ActForm(request.POST)
        if not form.is_valid():
            return self._refused(request, author, action, "; ".join(
                f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
        data = form.cleaned_data
        try:
            if action == "lift":
                services.author_lift(author_pk=author.pk, moderator=request.user, reason=data["reason"],
                                     expected_version=data["version"])
            else:
                services.author_act(author_pk=author.pk, moderator=request.user, action=action, reason=data["reason"],
                                    days=data["days"], expected_version=data["version"])
        except StaleAuthor as exc:  # what changed since the moderator looked, and that nothing was applied
            return self._refused(request, author, action,
                                 f"{exc.reason}. Nothing was applied: look again at the author as it is now")
        except ModerationError as exc:
            return self._refused(request, author, action, getattr(exc, "reason", None) or str(exc))
        self.message_user(request, f"Author {ACTIONS[action]}.", messages.SUCCESS)
        return HttpResponseRedirect(self._author_url(author.pk))

    def bulk_view(self, request, object_id):
        """"Act on all of this author's content matching ...": the review list's bulk job by query
        (moderation/admin/bulk_jobs.py) with the author's filter and the narrowing chosen, so the
        job is that one, with its count, decision form, confirmation, frozen targets and per-item
        guard. Only the fields chosen go into the query: an empty `status__exact` would match the
        reviews whose status is "", none."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        author = get_object_or_404(Author, pk=object_id)
        form = AuthorBulkForm(request.GET)
        if not form.is_valid():
            errors = "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
            self.message_user(request, f"No job prepared: {errors}", messages.ERROR)
            return HttpResponseRedirect(self._author_url(author.pk))
        data = form.cleaned_data
        if not request.user.has_perm(BULK_PERMISSION[data["action"]]):
            raise PermissionDenied
        query = {"author": author.pk, **{key: data[key] for key in ("submitted", "status__exact", "q") if data[key]}}
        return HttpResponseRedirect(reverse("admin:moderation_bulkjob_new", args=[data["action"]]) + "?" + urlencode(query))

    def _refused(self, request, author: Author, action: str, why: str):
        self.message_user(request, f"Not {ACTIONS[action]}: {why}", messages.ERROR)
        return HttpResponseRedirect(self._author_url(author.pk))

    def resolve_view(self, request, object_id, appeal_id):
        if request.method != "POST" or not self.has_act_permission(request):
            raise PermissionDenied
        appeal = get_object_or_404(AccountAppeal, pk=appeal_id, author_id=object_id)
        form = AppealResolveForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{field}: {' '.join(e)}" for field, e in form.errors.items())
            self.message_user(request, f"Appeal not resolved: {errors}", messages.ERROR)
            return HttpResponseRedirect(self._author_url(object_id))
        try:
            services.account_appeal_resolve(appeal_id=appeal.pk, moderator=request.user,
                                            outcome=form.cleaned_data["outcome"], reason=form.cleaned_data["reason"])
        except ModerationError as exc:  # four eyes, an appeal resolved meanwhile
            self.message_user(request, f"Appeal not resolved: {getattr(exc, 'reason', None) or exc}", messages.ERROR)
            return HttpResponseRedirect(self._author_url(object_id))
        self.message_user(request, f"Appeal {form.cleaned_data['outcome']}.", messages.SUCCESS)
        return HttpResponseRedirect(self._author_url(object_id))

