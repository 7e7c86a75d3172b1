from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from config import embedded_db
from moderation import providers, services
from tests.helpers import ScriptedProvider


@pytest.fixture(autouse=True)
def compiled_statements_forgotten():
    """A test that replaces what a compiled statement is built from (a lock taken out, to show
    that the guard matters) gets it compiled from the replacement, and no later test keeps it:
    every compiled statement is forgotten before and after each test (moderation/db/compiled.py),
    so a test that pins what a warm path compiles warms it itself."""
    from moderation.db.compiled import compiled_forget

    compiled_forget()
    yield
    compiled_forget()


@pytest.fixture(autouse=True)
def webhooks_may_reach_loopback(settings):
    """Tests deliver webhooks to receivers on loopback (WEBHOOK_ALLOW_PRIVATE, as in development).
    The SSRF tests turn it off and patch the resolver: no test connects beyond loopback."""
    settings.WEBHOOK_ALLOW_PRIVATE = True


@pytest.fixture(autouse=True)
def operations_of_the_webhook_provider(settings):
    """Operations belong to the webhook provider unless a test picks another (`scripted`): its
    callbacks come to /api/v1/callbacks/webhook/, and another provider's are not applied."""
    settings.MODERATION_PROVIDER = "webhook"


@pytest.fixture
def api_client(db):
    client, token = services.api_client_create(name="acme")
    client.token = token
    return client


@pytest.fixture
def other_client(db):
    client, token = services.api_client_create(name="globex")
    client.token = token
    return client


@pytest.fixture
def http(api_client):
    """A DRF test client authenticated as `api_client`."""
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    return http


@pytest.fixture
def fresh_throttles():
    """Rate-limit counts start from zero and are not left behind for the next test."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def scripted(settings):
    """Route moderation to a ScriptedProvider for the test."""
    provider = ScriptedProvider()
    providers.register("scripted", lambda: provider)
    settings.MODERATION_PROVIDER = "scripted"
    yield provider
    providers.unregister("scripted")


@pytest.fixture
def embedded_server():
    """Starts embedded PostgreSQLs of the test's own (config/embedded_db.py), as a checkout without
    DATABASE_URL does: `embedded_server(name)` -> (data directory, URL). Stopped and deleted after.
    Not under pytest's tmp_path: pgserver opens the directories above a data directory to its
    system user, and pytest closes its own again."""
    with tempfile.TemporaryDirectory(prefix="embedded-pg-") as directory:
        started = []

        def start(name: str) -> tuple[Path, str]:
            data_dir = Path(directory).resolve() / name
            started.append(data_dir)
            return data_dir, embedded_db.database_url(data_dir)

        try:
            yield start
        finally:
            for data_dir in started:
                embedded_db.stop(data_dir)
