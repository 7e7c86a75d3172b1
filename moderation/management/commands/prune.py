"""Delete what has outlived its retention setting (moderation/privacy/retention.py). Dry run unless --for-real."""

from __future__ import annotations

import signal

from django.conf import settings
from django.core.management.base import BaseCommand

from moderation.privacy.retention import TARGETS, prune, prune_held


class Command(BaseCommand):
    help = (
        "Delete processed callbacks, django-q2 results, expired idempotency records, delivered notifications' "
        "attempts and pipeline events older than their retention settings, images' bytes of reviews final for "
        "longer than MEDIA_RETENTION_DAYS (their hashes stay), and preservation snapshots past their expiry. "
        "Never transitions or decisions, nor anything a legal hold keeps (counted as held). "
        "Dry run unless --for-real (the same runs daily on the cluster)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--for-real", action="store_true")
        parser.add_argument("--batch", type=int, default=None, help=f"rows per transaction (default PRUNE_BATCH, {settings.PRUNE_BATCH})")

    def handle(self, *args, for_real, batch, **options):
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # finish the current batch, then stop
        counts = prune(for_real=for_real, batch=batch, should_stop=lambda: bool(stop))
        held = prune_held()
        verb = "deleted" if for_real else "would delete"
        for target in TARGETS:
            limit = f" {target.setting}={getattr(settings, target.setting):g}" if target.setting else ""
            kept = f"; {held[target.name]} held by a legal hold, kept" if target.name in held else ""
            self.stdout.write(f"{verb} {counts[target.name]:>9}  {target.name} ({target.age}{limit}){kept}")
        if stop:
            self.stdout.write("stopped by SIGTERM; run again to finish")
        if not for_real:
            self.stdout.write("dry run: nothing was deleted; add --for-real to delete")
