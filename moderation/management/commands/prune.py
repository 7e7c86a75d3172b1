"""Delete what has outlived its retention setting (moderation/privacy/retention.py). Dry run unless --for-real."""

from __future__ import annotations

import signal

from django.conf import settings
from django.core.management.base import BaseCommand

from moderation.privacy.retention import TARGETS, prune


class Command(BaseCommand):
    help = (
        "Delete processed callbacks, django-q2 results, expired idempotency records, delivered notifications' "
        "attempts and pipeline events older than their retention settings, and images' bytes of reviews final for "
        "longer than MEDIA_RETENTION_DAYS (their hashes stay). Never transitions or decisions. "
        "Dry run unless --for-real (the same runs daily on the cluster)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--for-real", action="store_true")
        parser.add_argument("--batch", type=int, default=None, help=f"rows per transaction (default PRUNE_BATCH, {settings.PRUNE_BATCH})")

    def handle(self, *args, for_real, batch, **options):
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # finish the current batch, then stop
        counts = prune(for_real=for_real, batch=batch, should_stop=lambda: bool(stop))
        verb = "deleted" if for_real else "would delete"
        for target in TARGETS:
            limit = getattr(settings, target.setting)
            self.stdout.write(f"{verb} {counts[target.name]:>9}  {target.name} ({target.age} {target.setting}={limit:g})")
        if stop:
            self.stdout.write("stopped by SIGTERM; run again to finish")
        if not for_real:
            self.stdout.write("dry run: nothing was deleted; add --for-real to delete")
