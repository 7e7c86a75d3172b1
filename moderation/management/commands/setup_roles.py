from django.core.management.base import BaseCommand

from moderation.roles import ensure_roles


class Command(BaseCommand):
    help = "Create or update the moderator, supervisor, auditor and legal groups (also done by migrate)."

    def handle(self, *args, **options):
        for name, count in ensure_roles().items():
            self.stdout.write(f"{name}: {count} permissions")
