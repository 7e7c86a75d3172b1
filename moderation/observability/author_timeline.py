"""One author's history on one timeline, newest first: the content they submitted, the reports
on it, their strikes, the actions taken on their account and their appeals of those
(docs/workplace.md, "Authors").

A page is read in two steps. First the (time, id) of the first `offset + limit` rows of each
kind, each from its own index on the author (review_author_idx, strike_author_idx,
account_action_author_idx, account_appeal_author_idx; the reports through the author's
reviews), merged here; then the rows of the page shown, by id, with what they show. Nothing is
counted but the rows a moderator may not see.

What a user may not see (a review of a queue only its groups' members may open, its reports and
its strike: moderation/selectors.py) is left out of the items and only counted
(`author_timeline_hidden`), as the review list leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.db.models import QuerySet

from moderation.models import AccountAction, AccountAppeal, Author, ContentReview, Report, Strike
from moderation.selectors import hidden_from, visible_to


class TimelineKind(StrEnum):
    CONTENT = "content"
    REPORT = "report"
    STRIKE = "strike"
    ACTION = "action"
    APPEAL = "appeal"


@dataclass(frozen=True)
class TimelineItem:
    at: datetime
    kind: TimelineKind
    row: object  # a ContentReview, Report, Strike, AccountAction or AccountAppeal


def _sources(author: Author, user) -> dict[TimelineKind, QuerySet]:
    """Each kind's rows of `author` that `user` may see, unordered."""
    return {
        TimelineKind.CONTENT: visible_to(user, ContentReview.objects.filter(author=author)),
        TimelineKind.REPORT: visible_to(user, Report.objects.filter(review__author=author), through="review"),
        TimelineKind.STRIKE: visible_to(user, Strike.objects.filter(author=author), through="review"),
        TimelineKind.ACTION: AccountAction.objects.filter(author=author),
        TimelineKind.APPEAL: AccountAppeal.objects.filter(author=author),
    }


# What each kind's page rows are read with: what the timeline shows of them.
_SHOWN = {
    TimelineKind.CONTENT: lambda rows: rows.select_related("content", "decision").defer("content__text",
                                                                                       "content__metadata"),
    TimelineKind.REPORT: lambda rows: rows.select_related("review"),
    TimelineKind.STRIKE: lambda rows: rows.select_related("review"),
    TimelineKind.ACTION: lambda rows: rows.select_related("moderator"),
    TimelineKind.APPEAL: lambda rows: rows.select_related("action"),
}
# Of two items at the same instant, the later in this order is shown first (above): the content,
# then what was said of it, then what it cost the author.
_RANK = {kind: rank for rank, kind in enumerate(TimelineKind)}


def author_timeline(author: Author, user, *, offset: int, limit: int) -> list[TimelineItem]:
    """Items `offset` to `offset + limit` of `author`'s timeline as `user` may see it, newest first
    (ties: the same order on every page, so no item is shown twice or skipped)."""
    first = offset + limit
    keys = []
    for kind, rows in _sources(author, user).items():
        read = rows.order_by("-created_at", "-pk").values_list("created_at", "pk")[:first]
        keys += [(at, _RANK[kind], pk, kind) for at, pk in read]
    keys.sort(key=lambda key: key[:3], reverse=True)
    page = keys[offset:first]
    wanted: dict[TimelineKind, list] = {}
    for _, _, pk, kind in page:
        wanted.setdefault(kind, []).append(pk)
    rows = {(kind, row.pk): row for kind, pks in wanted.items()
            for row in _SHOWN[kind](_sources(author, user)[kind].filter(pk__in=pks))}
    # A row gone between the two reads (retention) is left out rather than shown half.
    return [TimelineItem(at, kind, rows[kind, pk]) for at, _, pk, kind in page if (kind, pk) in rows]


def author_timeline_hidden(author: Author, user) -> int:
    """How many items of `author`'s timeline `user` may not see: the author's reviews in queues
    only other groups may open, their reports and their strikes. 0 (no query) when the user may
    see every review."""
    hidden = hidden_from(user)
    if hidden is None:
        return 0
    through = hidden_from(user, through="review")
    return (ContentReview.objects.filter(hidden, author=author).count()
            + Report.objects.filter(through, review__author=author).count()
            + Strike.objects.filter(through, author=author).count())
