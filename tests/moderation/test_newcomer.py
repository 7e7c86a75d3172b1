"""What a newcomer following the README hit (issue 23): every refusal says how to get past it,
and the README's commands run as written."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from moderation.models import ApiClient

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_metrics_refused_says_how_to_get_in(client, settings):
    settings.METRICS_TOKEN = "scrape-me"

    response = client.get("/metrics")

    assert response.status_code == 401
    said = response.content.decode()
    assert "/admin/" in said and "Authorization: Bearer" in said and "METRICS_TOKEN" in said, said


@pytest.mark.django_db
def test_another_authorization_scheme_is_told_to_send_bearer(api_client):
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION="Token abc")

    response = http.get("/api/v1/reviews/")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    error = response.json()
    assert error["error"] == "not_authenticated"  # docs/design.md's error list
    assert "Token" in error["detail"] and "Bearer <token>" in error["detail"], error


@pytest.mark.django_db
def test_admin_has_no_view_site_link_to_a_page_that_does_not_exist(admin_client):
    page = admin_client.get("/admin/").content.decode()

    assert "View site" not in page


@pytest.fixture
def production_webhook_rules(settings, monkeypatch):
    """The address check on, and a resolver that knows one name (nothing is connected to)."""
    settings.WEBHOOK_ALLOW_PRIVATE, settings.DEBUG = False, True
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "hooks.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "said"), [
    ("http://127.0.0.1:8765/hook", "127.0.0.1 is in 127.0.0.0/8 (loopback)"),
    ("http://hooks.example/hook", "hooks.example resolves to 10.1.2.3, which is in 10.0.0.0/8 (private-use)"),
])
def test_a_refused_webhook_url_names_the_address_and_the_setting_for_local_trials(production_webhook_rules, url, said):
    with pytest.raises(CommandError) as refused:
        call_command("create_api_client", "probe", "--webhook-url", url)

    message = str(refused.value)
    assert said in message and "WEBHOOK_ALLOW_PRIVATE=1" in message, message
    assert not ApiClient.objects.filter(name="probe").exists()


@pytest.mark.django_db
def test_plain_http_refused_outside_debug_names_the_setting_too(production_webhook_rules, settings):
    settings.DEBUG = False

    with pytest.raises(CommandError, match=r"https.*WEBHOOK_ALLOW_PRIVATE=1"):
        call_command("create_api_client", "probe", "--webhook-url", "http://127.0.0.1:8765/hook")


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_documented_python_commands_name_the_virtualenvs_python(doc):
    """`python manage.py ...` fails outside the virtualenv (No module named 'django')."""
    bare = [line.strip() for line in doc.read_text().splitlines()
            if re.search(r"(?<![\w/.])python (manage\.py|-m )", line)]

    assert not bare, bare


def test_readme_writes_its_files_under_var_which_git_ignores():
    readme = (ROOT / "README.md").read_text()
    written = re.findall(r"(?:^|\s)>\s*([\w./-]+)", "\n".join(
        line for line in readme.splitlines() if not line.lstrip().startswith(("#", "|", "-", ">"))))

    assert written and all(path.startswith("var/") for path in written), written
    assert len(readme.encode()) < 15_000
