from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from moderation.services import api_client_create


class Command(BaseCommand):
    help = "Create an API client. Its bearer token is the last line printed; it is never shown again."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--webhook-url", default="", help="Where decision notifications are sent.")

    def handle(self, *args, name, webhook_url, **options):
        try:
            client, token = api_client_create(name=name, webhook_url=webhook_url)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"Created API client {client.name!r} (id {client.pk}).")
        self.stdout.write(f"Decision notifications are signed (Standard Webhooks) with: {client.webhook_secret}")
        self.stdout.write("Its token follows; only a hash is stored, so keep it now:")
        self.stdout.write(token)
