"""Re-run callback processing: dry run by default, `--for-real` to act."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from callbacks.models import ProviderCallback
from callbacks.services import callback_replay


class Command(BaseCommand):
    help = "Re-run the processing of stored callbacks (unprocessed ones, or given ids). Dry run unless --for-real."

    def add_arguments(self, parser):
        parser.add_argument("--unprocessed", action="store_true", help="every callback stored but not processed")
        parser.add_argument("--id", type=int, nargs="+", dest="ids", default=[], help="inbox row ids")
        parser.add_argument("--for-real", action="store_true", help="act (default: only say what would be replayed)")

    def handle(self, *args, unprocessed, ids, for_real, **options):
        if not unprocessed and not ids:
            raise CommandError("say which callbacks: --unprocessed or --id ID [ID ...]")
        selected = ProviderCallback.objects.none()
        if unprocessed:
            selected |= ProviderCallback.objects.filter(processed_at__isnull=True)
        if ids:
            selected |= ProviderCallback.objects.filter(pk__in=ids)
            missing = set(ids) - set(ProviderCallback.objects.filter(pk__in=ids).values_list("pk", flat=True))
            if missing:
                raise CommandError(f"no callback with id {', '.join(map(str, sorted(missing)))}")
        rows = list(selected.order_by("received_at").values_list("pk", "provider_event_id", "outcome"))
        noun = "callback" if len(rows) == 1 else "callbacks"
        if not for_real:
            for pk, event_id, outcome in rows:
                self.stdout.write(f"would replay #{pk} {event_id} ({outcome or 'unprocessed'})")
            self.stdout.write(f"dry run: {len(rows)} {noun} selected; add --for-real to replay")
            return
        outcomes = Counter()
        for pk, event_id, _ in rows:
            outcome = callback_replay(callback_id=pk)
            outcomes[outcome] += 1
            self.stdout.write(f"#{pk} {event_id}: {outcome}")
        summary = ", ".join(f"{outcome}: {count}" for outcome, count in sorted(outcomes.items())) or "nothing"
        self.stdout.write(f"replayed {len(rows)} {noun} ({summary})")
