"""Take over reviews stuck in processing (the sweeper's reconcile, on demand). Dry run unless --for-real."""

from __future__ import annotations

from collections import Counter

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from moderation import services
from moderation.selectors import stuck_review_ids


class Command(BaseCommand):
    help = "Reconcile reviews in processing with no progress for --older-than seconds (default MODERATION_STUCK_AFTER_S)."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, default=None, help="seconds without progress")
        parser.add_argument("--for-real", action="store_true")

    def handle(self, *args, older_than, for_real, **options):
        stuck_after = older_than if older_than is not None else settings.MODERATION_STUCK_AFTER_S
        if stuck_after < 0:
            raise CommandError("--older-than must not be negative")
        now = timezone.now()
        stuck = stuck_review_ids(now=now, limit=100_000, stuck_after=stuck_after)
        if not for_real:
            for pk in stuck:
                self.stdout.write(f"would reconcile {pk}")
            self.stdout.write(f"dry run: {len(stuck)} reviews in processing without progress for {stuck_after:g}s")
            return
        actions = Counter(
            services.review_reconcile(review_id=pk, now=now, stuck_after=stuck_after) or "left alone (progress or locked)"
            for pk in stuck
        )
        summary = ", ".join(f"{n} {action}" for action, n in actions.items()) or "nothing stuck"
        self.stdout.write(f"reconciled {len(stuck)} reviews: {summary}")
