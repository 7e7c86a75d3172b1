"""Changelist filters for reviews (and the content filters the queue page shares), and
`happened_filter` for any list."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from callbacks.models import ProviderCallback
from moderation import services
from moderation.text.language import configured_languages
from moderation.models import Author, ModerationRequest, Report, ReportKind, Standing
from moderation.selectors import stuck_requests


def happened_filter(field: str, title: str, *, yes: str, no: str) -> type[admin.SimpleListFilter]:
    """A yes/no filter on whether the moment `field` records is set (a statement overturned, a
    bank entry removed)."""

    class HappenedFilter(admin.SimpleListFilter):
        parameter_name = title.replace(" ", "_")

        def lookups(self, request, model_admin):
            return [("yes", yes), ("no", no)]

        def queryset(self, request, queryset):
            if self.value() in ("yes", "no"):
                return queryset.filter(**{f"{field}__isnull": self.value() == "no"})
            return queryset

    HappenedFilter.title = title
    return HappenedFilter


class DecisionSourceFilter(admin.SimpleListFilter):
    title = "decision source"
    parameter_name = "decided_by"

    def lookups(self, request, model_admin):
        return [("provider", "Provider"), ("moderator", "Moderator"), ("system", "System"), ("none", "No decision")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(decision__isnull=True)
        if self.value():
            return queryset.filter(decision__source=self.value())
        return queryset


class CallbackTroubleFilter(admin.SimpleListFilter):
    """Reviews that saw what this platform exists to survive: stale or duplicate results."""

    title = "callbacks seen"
    parameter_name = "callbacks"

    def lookups(self, request, model_admin):
        return [("stale", "Stale results"), ("duplicate", "Duplicate deliveries or results")]

    def queryset(self, request, queryset):
        if self.value() == "stale":
            return queryset.filter(
                Exists(PipelineEvent.objects.filter(review=OuterRef("pk"), kind=EventKind.STALE_RESULT))
            )
        if self.value() == "duplicate":
            keys = ModerationRequest.objects.filter(review=OuterRef(OuterRef("pk"))).values("idempotency_key")
            redelivered = ProviderCallback.objects.filter(idempotency_key__in=keys, duplicate_count__gt=0)
            duplicate_result = PipelineEvent.objects.filter(review=OuterRef("pk"), kind=EventKind.DUPLICATE_RESULT)
            return queryset.filter(Exists(duplicate_result) | Exists(redelivered))
        return queryset


class StuckFilter(admin.SimpleListFilter):
    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("processing", f"Operation silent for over {settings.MODERATION_STUCK_AFTER_S:g}s")]

    def queryset(self, request, queryset):
        if self.value() == "processing":
            return queryset.filter(pk__in=stuck_requests().values("review_id"))
        return queryset


class QueueFilter(admin.SimpleListFilter):
    """The review's queue, its choices the queues known (built-in and custom: services.
    review_queues), not the distinct values of a million rows (Django's default for a field:
    a scan of the table on every list page, docs/benchmarks.md "Content search at 1M reviews")."""

    title = "queue"
    parameter_name = "queue__exact"  # the parameter Django's field filter took

    def lookups(self, request, model_admin):
        return [(q.slug, q.label) for q in services.review_queues(request.user)]  # those the user may see

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(queue=self.value())
        return queryset


# An author's number as a URL carries it: digits that fit the column.
AUTHOR_PK = re.compile(r"[0-9]{1,18}")


class AuthorFilter(admin.SimpleListFilter):
    """One author's reviews (`?author=<the author's number>`, as the author page links it): read
    from the index of an author's reviews (review_author_idx). The sidebar, and a bulk job's
    words (moderation/admin/bulk_jobs.py), name the author and its client. A value that names no
    author matches nothing, never everything."""

    title = "author"
    parameter_name = "author"

    def lookups(self, request, model_admin):
        # Only the author chosen (the list is not a list of a million authors). Django applies a
        # filter only when it offers a choice: one that names no author is offered as such.
        value = self.value()
        if value is None:
            return []
        author = (Author.objects.select_related("client").filter(pk=value).first()
                  if AUTHOR_PK.fullmatch(value) else None)
        return [(value, f"{author.author_id} ({author.client})" if author else "no such author")]

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        if not AUTHOR_PK.fullmatch(self.value()):
            return queryset.none()
        return queryset.filter(author_id=int(self.value()))


def _since_midnight(now):
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


class SubmittedFilter(admin.SimpleListFilter):
    """When the content was submitted, counted back from now ("today" from midnight UTC): "reject
    everything this account posted today". Served by the index of the list's order
    (review_created_idx) or, with an author, by the author's (review_author_idx)."""

    title = "submitted"
    parameter_name = "submitted"
    SINCE = {
        "hour": ("in the past hour", lambda now: now - timedelta(hours=1)),
        "today": ("today (UTC)", _since_midnight),
        "24h": ("in the past 24 hours", lambda now: now - timedelta(hours=24)),
        "7d": ("in the past 7 days", lambda now: now - timedelta(days=7)),
        "30d": ("in the past 30 days", lambda now: now - timedelta(days=30)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.SINCE.items()]

    def queryset(self, request, queryset):
        if self.value() in self.SINCE:
            return queryset.filter(created_at__gte=self.SINCE[self.value()][1](timezone.now()))
        return queryset


# --- the content filters of the review list and the queues (docs/workplace.md, "Search") -------

UNSURE = "unsure"
NO_AUTHOR = "none"


@dataclass(frozen=True)
class ReviewFilter:
    """One filter both the review list (as a list filter) and the queue page (as a select) offer:
    its query parameter, title, choices and condition, written once."""

    param: str
    title: str
    choices: Callable[[], list[tuple[str, str]]]
    condition: Callable[[str], Q | Exists]

    def apply(self, reviews, value: str):
        """`reviews` narrowed to `value`; a value not among the choices narrows nothing."""
        if value in dict(self.choices()):
            return reviews.filter(self.condition(value))
        return reviews


def _languages() -> list[tuple[str, str]]:
    return [*[(code, code) for code in configured_languages()], (UNSURE, "unsure or not detected")]


def _language(value: str) -> Q:
    return Q(content__language="" if value == UNSURE else value)


def _standings() -> list[tuple[str, str]]:
    return [*Standing.choices, (NO_AUTHOR, "No author")]


def _standing(value: str) -> Q:
    return Q(author__isnull=True) if value == NO_AUTHOR else Q(author__standing=value)


# An author's active strike points, in the ranges the author list and the review list offer. Every
# range but "0" is served by the index of authors with a record (author_standing_idx).
AUTHOR_POINTS = {"0": Q(strike_points=0), "1-4": Q(strike_points__gte=1, strike_points__lte=4),
                 "5-9": Q(strike_points__gte=5, strike_points__lte=9), "10+": Q(strike_points__gte=10)}


def _author_points(value: str) -> Q:
    # Most authors have no points: "0" is a condition on the joined author; the others read the few
    # authors with points from their index first.
    if value == "0":
        return Q(author__strike_points=0)
    return Q(author__in=Author.objects.filter(AUTHOR_POINTS[value]).values("pk"))


def _report_kind(value: str) -> Exists:
    return Exists(Report.objects.filter(review=OuterRef("pk"), kind=value))


REVIEW_FILTERS = (
    ReviewFilter("language", "language", _languages, _language),
    ReviewFilter("standing", "author standing", _standings, _standing),
    ReviewFilter("author_points", "author's strike points", lambda: [(k, k) for k in AUTHOR_POINTS], _author_points),
    ReviewFilter("report_kind", "reported as", lambda: list(ReportKind.choices), _report_kind),
)


def filtered_reviews(reviews, params):
    """`reviews` narrowed by every filter of REVIEW_FILTERS that `params` (a QueryDict) sets."""
    for review_filter in REVIEW_FILTERS:
        reviews = review_filter.apply(reviews, params.get(review_filter.param, ""))
    return reviews


def list_filter(review_filter: ReviewFilter) -> type[admin.SimpleListFilter]:
    """The review list's filter of `review_filter`."""

    class ContentFilter(admin.SimpleListFilter):
        title = review_filter.title
        parameter_name = review_filter.param

        def lookups(self, request, model_admin):
            return review_filter.choices()

        def queryset(self, request, queryset):
            return review_filter.apply(queryset, self.value() or "")

    ContentFilter.__name__ = f"{review_filter.param.title().replace('_', '')}Filter"
    return ContentFilter


CONTENT_LIST_FILTERS = [list_filter(f) for f in REVIEW_FILTERS]
