"""The API fails safely: revoked tokens, other clients' data, oversized bodies, floods, and
never an HTML error page."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from moderation.models import Content

URL = "/api/v1/reviews/"


@pytest.fixture(autouse=True)
def fresh_counts():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
def test_a_revoked_token_is_401_at_once(http, api_client):
    assert http.get(URL).status_code == 200
    out = StringIO()
    call_command("revoke_api_client", api_client.name, stdout=out)
    response = http.get(URL)
    assert "revoked" in out.getvalue()
    assert response.status_code == 401 and response.json()["error"] == "authentication_failed"
    with pytest.raises(CommandError, match="no API client"):
        call_command("revoke_api_client", "nobody")


@pytest.mark.django_db
def test_an_oversized_body_is_413_without_being_read(http, settings):
    settings.API_MAX_BODY_BYTES = 10_000
    response = http.post(URL, {"external_id": "big", "content_type": "text", "text": "x" * 20_000}, format="json")
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    assert not Content.objects.exists()


@pytest.mark.django_db
def test_a_client_over_its_rate_is_429_with_retry_after(http, other_client, settings):
    settings.THROTTLE_CLIENT_RATE = "3/min"
    answers = [http.get(URL).status_code for _ in range(4)]
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {other_client.token}")
    assert answers == [200, 200, 200, 429]
    throttled = http.get(URL)
    assert throttled.json()["error"] == "throttled" and int(throttled["Retry-After"]) > 0
    assert theirs.get(URL).status_code == 200  # per client


@pytest.mark.django_db
def test_the_callback_endpoint_is_rate_limited_too(settings):
    settings.THROTTLE_CALLBACK_RATE = "2/min"
    client = APIClient()
    answers = [client.post("/api/v1/callbacks/webhook/", {}, format="json").status_code for _ in range(3)]
    assert answers[-1] == 429


@pytest.mark.django_db
def test_a_spoofed_forwarded_for_does_not_escape_the_callback_limit(settings):
    settings.THROTTLE_CALLBACK_RATE = "2/min"
    client = APIClient()
    answers = [
        client.post("/api/v1/callbacks/webhook/", {}, format="json", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}").status_code
        for i in range(4)
    ]
    assert answers[2:] == [429, 429]


@pytest.mark.django_db
def test_the_schema_and_docs_are_rate_limited_per_address(settings):
    settings.THROTTLE_ADDRESS_RATE = "2/min"
    from django.test import Client

    answers = [Client().get("/api/schema/").status_code for _ in range(3)]
    assert answers == [200, 200, 429]


@pytest.mark.django_db
def test_unknown_api_urls_and_crashes_answer_json_not_html(http, monkeypatch):
    missing = http.get("/api/v1/nothing-here/")
    assert missing.status_code == 404 and missing.json() == {"error": "not_found", "detail": "Not Found"}
    from moderation.api import views

    monkeypatch.setattr(views.ReviewListCreateView, "get", lambda *a, **k: 1 / 0)
    crash = APIClient(raise_request_exception=False)
    crash.credentials(HTTP_AUTHORIZATION=http._credentials["HTTP_AUTHORIZATION"])
    response = crash.get(URL)
    assert response.status_code == 500 and response.json()["error"] == "server_error"
    assert "ZeroDivisionError" not in response.content.decode()


def test_production_settings_pass_check_deploy_with_no_warnings():
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "s3cr3t-" * 10, "ALLOWED_HOSTS": "moderation.example.com",
           "REDIS_URL": "redis://127.0.0.1:6379/0",
           "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x")}
    run = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                         env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no issues" in run.stdout


def test_production_without_redis_is_warned_about():
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "s3cr3t-" * 10, "ALLOWED_HOSTS": "moderation.example.com",
           "REDIS_URL": "", "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x")}
    run = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                         env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "moderation.W002" in run.stderr + run.stdout
