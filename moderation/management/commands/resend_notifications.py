"""Send decision notifications again (same webhook-id and body, the client's current URL)."""

from django.core.management.base import BaseCommand, CommandError

from moderation.services import notifications_resend, notifications_resendable


class Command(BaseCommand):
    help = "Resend failed (or never-sendable) decision notifications. Dry run unless --for-real."

    def add_arguments(self, parser):
        parser.add_argument("--failed", action="store_true", help="every notification that gave up")
        parser.add_argument("--id", type=int, nargs="+", dest="ids", default=[], help="notification ids")
        parser.add_argument("--for-real", action="store_true")

    def handle(self, *args, failed, ids, for_real, **options):
        if not failed and not ids:
            raise CommandError("say which: --failed or --id ID [ID ...]")
        rows = notifications_resendable(ids=ids, failed=failed)
        if not for_real:
            for pk, event_id, status in rows.values_list("pk", "event_id", "status"):
                self.stdout.write(f"would resend #{pk} {event_id} ({status})")
            self.stdout.write(f"dry run: {rows.count()} notifications; add --for-real to resend")
            return
        queued = notifications_resend(ids=ids or None, failed=failed)
        self.stdout.write(f"{len(queued)} notifications queued again (clients without a webhook URL skipped)")
