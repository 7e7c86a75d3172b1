from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from moderation import services
from moderation.models import ApiClient


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
class TestCreateApiClient:
    def test_the_token_is_the_last_line_and_authenticates(self):
        output = run("create_api_client", "shop", "--webhook-url", "https://shop.example.com/hooks")

        token = output.strip().splitlines()[-1]
        client = services.api_client_authenticate(token)
        assert client.name == "shop" and client.webhook_url == "https://shop.example.com/hooks"
        assert token not in ApiClient.objects.values_list("token_hash", flat=True)

    def test_a_taken_name_is_refused(self):
        run("create_api_client", "shop")
        with pytest.raises(CommandError, match="already exists"):
            run("create_api_client", "shop")
        assert ApiClient.objects.count() == 1

    def test_a_bad_webhook_url_is_refused(self):
        with pytest.raises(CommandError, match="valid URL"):
            run("create_api_client", "shop", "--webhook-url", "javascript:alert(1)")
        assert not ApiClient.objects.exists()


@pytest.mark.django_db
class TestBootstrapDemo:
    def test_creates_credentials_once_and_saves_them(self, tmp_path, monkeypatch, django_user_model, settings):
        from moderation.management.commands import bootstrap_demo

        settings.DEBUG = True  # a local run (pytest-django turns DEBUG off)
        saved = tmp_path / "creds.txt"
        monkeypatch.setattr(bootstrap_demo, "CREDENTIALS_FILE", saved)

        first = run("bootstrap_demo")
        second = run("bootstrap_demo")

        token = first.split("API token: ")[1].split()[0]
        assert services.api_client_authenticate(token).name == "demo"
        assert django_user_model.objects.get(username="admin").is_superuser
        assert token in saved.read_text() and oct(saved.stat().st_mode)[-3:] == "600"
        assert "already exist" in second
        assert ApiClient.objects.count() == 1

    def test_refused_outside_debug(self, settings):
        settings.DEBUG = False
        with pytest.raises(CommandError, match="local runs only"):
            run("bootstrap_demo")
