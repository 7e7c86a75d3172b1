from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from moderation.services import api_client_revoke


class Command(BaseCommand):
    help = "Revoke an API client's token: every request with it is refused (401) from now on."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name, **options):
        try:
            client = api_client_revoke(name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"API client {client.name!r} revoked at {client.revoked_at:%Y-%m-%d %H:%M:%S} UTC.")
