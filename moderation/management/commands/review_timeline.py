"""Print a review's causal timeline (the admin's timeline page, as text or JSON)."""

from __future__ import annotations

import json
import uuid

from django.core.management.base import BaseCommand, CommandError

from moderation.observability.timeline import review_timeline
from moderation.models import SHORT_ID_LENGTH, ContentReview
from moderation.observability.search import by_short_id


class Command(BaseCommand):
    help = "Print the causal timeline of a review: by review id, or --content-id (or an external id)."

    def add_arguments(self, parser):
        parser.add_argument("review_id", nargs="?")
        parser.add_argument("--content-id", help="a content id, or a client's external id")
        parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
        parser.add_argument("--payloads", action="store_true", help="include raw callback bodies in the text output")

    def handle(self, *args, review_id, content_id, json: bool, payloads: bool, **options):
        review = self._find(review_id, content_id)
        entries = review_timeline(review, notes=True)  # operators see moderators' notes
        if json:
            self.stdout.write(_dumps({"review_id": str(review.pk), "status": review.status,
                                      "entries": [e.as_json() for e in entries]}))
            return
        self.stdout.write(f"review {review.pk}  status {review.status}  version {review.version}")
        for entry in entries:
            ids = " ".join(f"{k}={v}" for k, v in entry.ids.items())
            detail = "; ".join(f"{k}: {v}" for k, v in entry.detail.items() if v not in (None, "", {}))
            self.stdout.write(f"{entry.at:%Y-%m-%d %H:%M:%S.%f}  {entry.kind:<16} {entry.title}")
            if detail:
                self.stdout.write(f"{'':44}{detail}")
            if ids:
                self.stdout.write(f"{'':44}[{ids}]")
            if payloads and entry.payload:
                self.stdout.write(f"{'':44}payload: {entry.payload}")

    def _find(self, review_id, content_id) -> ContentReview:
        if bool(review_id) == bool(content_id):
            raise CommandError("give a review id or --content-id, not both")
        reviews = ContentReview.objects.select_related("content", "client")
        if review_id:
            return _by_id_or_prefix(reviews, review_id)
        try:
            found = reviews.filter(content_id=uuid.UUID(content_id)).first()
        except ValueError:
            found = None
        if found:
            return found
        matches = list(reviews.filter(content__external_id=content_id)[:2])  # an external id, then
        if len(matches) > 1:
            raise CommandError(f"external id {content_id!r} is used by several clients: give the content id")
        if not matches:
            raise CommandError(f"no content {content_id}")
        return matches[0]


def _by_id_or_prefix(reviews, review_id: str) -> ContentReview:
    """A whole review id, its short id (the admin shows it), or at least its first 8 characters."""
    digits = review_id.strip().lower().replace("-", "")
    if not 8 <= len(digits) <= 32 or any(c not in "0123456789abcdef" for c in digits):
        raise CommandError(f"{review_id!r} is not a review id (a UUID, its short id, or at least its first 8 "
                           "characters)")
    # The ids that start with these digits form one range of the primary key: an index scan.
    low, high = uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))
    matches = list(reviews.filter(pk__gte=low, pk__lte=high).order_by("pk")[:3])
    if len(digits) == SHORT_ID_LENGTH:
        matches += [m for m in by_short_id(reviews, digits).order_by("pk")[:3] if m not in matches]
    if not matches:
        raise CommandError(f"no review {review_id}")
    if len(matches) > 1:
        shown = ", ".join(str(m.pk) for m in matches[:2]) + (", ..." if len(matches) > 2 else "")
        raise CommandError(f"{review_id!r} is the start of several review ids ({shown}): give more of it")
    return matches[0]


def _dumps(data) -> str:
    return json.dumps(data, indent=2, default=str)
