"""Demo credentials for a local run: a superuser and an API client, printed once.

Idempotent: a second run changes nothing and says where the first run's credentials were saved.
"""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from moderation.models import ApiClient
from moderation.services import api_client_create

CREDENTIALS_FILE = settings.BASE_DIR / "var" / "demo-credentials.txt"
DEMO_USER = "admin"
DEMO_CLIENT = "demo"


class Command(BaseCommand):
    help = "Create the demo superuser and API client for a local run (refused when DEBUG is off)."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("bootstrap_demo is for local runs only (DEBUG is off)")
        User = get_user_model()
        if User.objects.filter(username=DEMO_USER).exists() or ApiClient.objects.filter(name=DEMO_CLIENT).exists():
            self.stdout.write(f"Demo credentials already exist; see {CREDENTIALS_FILE} (or create_api_client NAME).")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(DEMO_USER, email="", password=password)
        _, token = api_client_create(name=DEMO_CLIENT)
        text = (
            f"Admin:     http://127.0.0.1:{settings.PORT}/admin/  user {DEMO_USER}  password {password}\n"
            f"API token: {token}\n"
        )
        CREDENTIALS_FILE.parent.mkdir(parents=True, exist_ok=True)
        CREDENTIALS_FILE.touch(mode=0o600)
        CREDENTIALS_FILE.write_text(text)
        self.stdout.write(f"Demo credentials (also saved to {CREDENTIALS_FILE}):\n{text}")
