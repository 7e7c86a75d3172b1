"""Send every pending statement of reasons to the DSA Transparency Database now (docs/transparency.md)."""

import signal

from django.core.management.base import BaseCommand, CommandError

from moderation.services import statements_submit


class Command(BaseCommand):
    help = ("Send every pending statement of reasons to the DSA Transparency Database now, whatever its backoff, "
            "and print 'submitted N, rejected N, pending N'.")

    def handle(self, *args, **options):
        # SIGTERM ends the run after the batch under way (its answer is recorded, nothing is lost).
        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
        sent = statements_submit(force=True, should_stop=lambda: bool(stopping))
        self.stdout.write(sent.line())
        if sent.error:
            raise CommandError(sent.error)
