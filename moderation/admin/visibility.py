"""The admin's one queue-access check (docs/workplace.md, "Routing rules and queue access"): a
review of a queue only its groups' members may see (moderation.selectors.visible_to) is left out
of every list, count and search of the rows of it, and its pages, and theirs, answer 404 as a
row that does not exist does, so that a moderator outside the groups cannot tell it exists.

Every ModelAdmin whose rows are of a review takes `ReviewScoped` and names the lookup from its
rows to their review; Django's own views (changelist, search, actions, change, history, delete)
all read `get_queryset` and `get_object`. A page of our own that shows a review or rows of one
reads them through `visible_review_or_404` or the selectors.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from moderation.models import ContentReview
from moderation.selectors import reviews_visible_to, visible_to

NOT_FOUND = "No such row."


class ReviewScoped:
    """A ModelAdmin mixin: only the rows of reviews the user may see, and 404 for any other."""

    review_path = "review"  # the lookup from a row to its review ("" for the reviews themselves)

    def visible_rows(self, user, rows: QuerySet) -> QuerySet:
        return visible_to(user, rows, through=self.review_path)

    def get_queryset(self, request):
        return self.visible_rows(request.user, super().get_queryset(request))

    def get_object(self, request, object_id, from_field=None):
        # Django redirects to the index for a row it cannot find, with a message naming the id;
        # one of a review the user may not see is not found either: both answer 404, the same.
        found = super().get_object(request, object_id, from_field)
        if found is None:
            raise Http404(NOT_FOUND)
        return found


def visible_review_or_404(request, object_id, reviews: QuerySet[ContentReview] | None = None) -> ContentReview:
    """The review `object_id` (of `reviews`, e.g. with related rows selected), if the user may see
    it; else 404, as for an id that names no review."""
    return get_object_or_404(reviews_visible_to(request.user, reviews), pk=object_id)
