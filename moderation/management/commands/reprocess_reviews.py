"""Send decided reviews through the provider again. Dry run unless --for-real."""

from __future__ import annotations

import argparse
import signal
import uuid
from collections import Counter
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from audit.models import Actor
from moderation import services
from moderation.errors import ModerationError
from moderation.models import FINAL_STATUSES, ContentReview


def _date(value: str) -> datetime:
    """An argparse type: a bad value is an argument error (usage and a message, exit 2), not a
    traceback."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO date or datetime (e.g. 2026-11-29 or 2026-11-29T18:00)"
        ) from None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


class Command(BaseCommand):
    help = "Reprocess reviews chosen by id, status and creation date range (dry run unless --for-real)."

    def add_arguments(self, parser):
        parser.add_argument("ids", nargs="*", help="review ids")
        parser.add_argument("--status", choices=[str(s) for s in FINAL_STATUSES])
        parser.add_argument("--since", type=_date, help="created at or after (ISO date/datetime, UTC)")
        parser.add_argument("--until", type=_date, help="created before")
        parser.add_argument("--reason", default="reprocessed by an operator")
        parser.add_argument("--for-real", action="store_true")

    def handle(self, *args, ids, status, since, until, reason, for_real, **options):
        if not (ids or status or since or until):
            raise CommandError("choose reviews: ids, --status, --since/--until")
        # Only decided reviews can be reprocessed: pending and processing ones are not selected.
        reviews = ContentReview.objects.filter(status__in=FINAL_STATUSES).order_by("created_at")
        if ids:
            try:
                wanted = {uuid.UUID(i) for i in ids}
            except ValueError:
                raise CommandError("review ids are UUIDs") from None
            known = dict(ContentReview.objects.filter(pk__in=wanted).values_list("pk", "status"))
            for missing in sorted(wanted - set(known), key=str):
                self.stderr.write(f"no review {missing}")
            for pk, current in known.items():
                if current not in FINAL_STATUSES:
                    self.stderr.write(f"not reprocessing {pk}: it is {current}, not decided yet")
            reviews = reviews.filter(pk__in=wanted)
        if status:
            reviews = reviews.filter(status=status)
        if since:
            reviews = reviews.filter(created_at__gte=since)
        if until:
            reviews = reviews.filter(created_at__lt=until)
        chosen = list(reviews.values_list("pk", "status"))
        if not for_real:
            for pk, current in chosen:
                self.stdout.write(f"would reprocess {pk} ({current})")
            self.stdout.write(f"dry run: {len(chosen)} reviews selected; add --for-real to reprocess them")
            return
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # finish the current review, then stop
        done, skipped = 0, Counter()
        for pk, _ in chosen:
            if stop:
                break
            try:
                services.review_reprocess(review_id=pk, actor=Actor.COMMAND, actor_id="reprocess_reviews", reason=reason)
                done += 1
            except ModerationError as exc:
                skipped[str(exc).split(": ", 1)[-1]] += 1
        parts = [f"{done} reprocessed"] + [f"{n} skipped: {why}" for why, n in skipped.items()]
        if stop:
            parts.append(f"stopped by SIGTERM with {len(chosen) - done - sum(skipped.values())} left")
        self.stdout.write(", ".join(parts))
