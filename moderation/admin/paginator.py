"""Paginators that never count a large table row by row.

Django's changelist asks its paginator for `count`, which is `SELECT count(*)` over the filtered
list: a scan of every matching row, hundreds of milliseconds at a million reviews. This one asks
the planner first (EXPLAIN: the statistics PostgreSQL keeps in pg_class and pg_statistic, no rows
read) and counts exactly only when the planner expects few rows. `rows_page` pages the lists
of one review (its reports, notes, timeline and the change page's inlines) without a count.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib import admin
from django.core.paginator import Paginator
from django.http import QueryDict
from django.utils.functional import cached_property

from moderation.selectors import estimated_rows

# Below this many rows (the planner's estimate) an exact count is cheap enough to run.
EXACT_COUNT_BELOW = 10_000


class EstimatedCountPaginator(Paginator):
    """`count` is the planner's estimate when it expects at least EXACT_COUNT_BELOW rows, else
    exact; `estimated` says which, for the page to show "about"."""

    estimated = False

    @cached_property
    def count(self) -> int:
        if hasattr(self.object_list, "query"):
            rows = estimated_rows(self.object_list.order_by())
            if rows is not None and rows >= EXACT_COUNT_BELOW:
                self.estimated = True
                return rows
        return super().count


# A page number as a link carries it: digits, and few enough that the offset stays a number
# PostgreSQL takes. Anything else ("²", "-1", 10^30) is the first page.
PAGE_NUMBER = re.compile(r"[0-9]{1,6}")


@dataclass(frozen=True)
class RowsPage:
    """One page of a list that may be long, read without counting it: `per_page + 1` rows are
    asked for, and the extra one only says that a next page exists."""

    rows: list
    number: int
    has_next: bool
    param: str
    query: QueryDict

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def _url(self, number: int) -> str:
        query = self.query.copy()
        query[self.param] = str(number)
        return "?" + query.urlencode()

    @property
    def previous_url(self) -> str:
        return self._url(self.number - 1) if self.number > 1 else ""

    @property
    def next_url(self) -> str:
        return self._url(self.number + 1) if self.has_next else ""


def rows_page(query: QueryDict, param: str, per_page: int, fetch: Callable[[int, int], list]) -> RowsPage:
    """The page `query[param]` (1 when missing or not a page number) of the rows
    `fetch(offset, limit)` returns."""
    raw = query.get(param, "")
    number = max(int(raw), 1) if PAGE_NUMBER.fullmatch(raw) else 1
    rows = fetch((number - 1) * per_page, per_page + 1)
    return RowsPage(rows[:per_page], number, len(rows) > per_page, param, query)


class ClientKeyedListMixin:
    """A ModelAdmin list of rows keyed by (client, `client_key`), which may run to millions
    (authors, reporters): pages without a count(*) of the table or facet counts, and a search for
    the key exactly as the client sends it, one descent of the (client, key) index per client
    where `key = ...` alone would read the whole index."""

    client_key = ""  # the key's field name
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    ordering = ["-id"]

    def get_search_results(self, request, queryset, search_term):
        if not search_term:
            return queryset, False
        from moderation.models import ApiClient

        clients = list(ApiClient.objects.values_list("pk", flat=True))
        return queryset.filter(client_id__in=clients, **{self.client_key: search_term}), False
