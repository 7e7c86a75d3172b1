from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from hypothesis import settings as hypothesis_settings
from rest_framework.test import APIClient

from config import embedded_db
from moderation import providers, services
from moderation.db.transactions import in_transaction
from tests.helpers import ScriptedProvider

# Hypothesis profiles (docs/operations.md, "Tests"): `make test` and `make test-fast` run the
# `ci` one, every property test with a quarter of its examples (tests/helpers.py, `examples`,
# scales the counts tests name); `make test-deep` and a bare `pytest` run Hypothesis' default,
# the full counts.
hypothesis_settings.register_profile("ci", max_examples=25)
hypothesis_settings.register_profile("deep", max_examples=100)


# Tests that start processes (the platform, clusters, PgBouncer, promtool, wrk and apt-get), kill them,
# or drive Chromium, each on one pytest-xdist worker at a time (`--dist loadgroup`, make test;
# docs/operations.md, "Tests"): their time-outs assume the machine is not busy with another
# such test, and apt-get takes a lock. Every worker has a database of its own (test_<name>_gw<n>).
PROCESSES = ("tests/e2e/", "tests/deploy/", "tests/lab/test_pgbouncer.py", "tests/bench/test_instruments.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    for item in items:
        path = item.nodeid
        if path.startswith("tests/browser/") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group("browser"))
        elif path.startswith(PROCESSES) or item.get_closest_marker("e2e") or item.get_closest_marker("chaos"):
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database commits without waiting for its WAL to reach the disk
    (synchronous_commit off, on that database only: every connection to it, the processes the
    tests start included). A crash could lose the last commits of a database that is dropped
    anyway; the transactional tests' commits and truncations stop waiting for fsync. Their
    teardowns empty the tables by DELETE (`_flush_by_delete`)."""
    with django_db_blocker.unblock():
        connection = connections[DEFAULT_DB_ALIAS]
        with connection.cursor() as cursor:
            name = connection.ops.quote_name(connection.settings_dict["NAME"])
            cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
            cursor.execute("SET synchronous_commit = off")  # (this session was opened before)
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            superuser = cursor.fetchone()[0]
    if superuser:
        PostgresOperations.sql_flush = _flush_by_delete


_flush_by_truncate = PostgresOperations.sql_flush


def _flush_by_delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    """How a transactional test's teardown empties the database (Django's `flush`): DELETE
    instead of TRUNCATE. TRUNCATE gives each of the ~60 tables and their indexes new files, about
    a second a teardown here; DELETE of the few rows a test wrote takes a few milliseconds. The
    rows go all the same, and the post_migrate defaults are written again as before. Foreign keys
    and the append-only triggers (which refuse DELETE, not TRUNCATE) are set aside for that one
    transaction (`session_replication_role`, hence a superuser: the embedded server's and the
    README's user are; any other keeps TRUNCATE). A flush that resets sequences or cascades to
    tables left out keeps Django's own statements."""
    if reset_sequences or allow_cascade or not tables:
        return _flush_by_truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return ["SET LOCAL session_replication_role = replica",
            *(f"DELETE FROM {self.quote_name(table)}" for table in tables)]


@pytest.fixture
def on_commit_callbacks_run(db, monkeypatch):
    """On-commit callbacks run where production runs them, though the test case's transaction
    stays open around the test (`db`): when the program's outermost atomic block ends (its
    commit), or at once when one is registered outside every block of the program (autocommit).
    A block rolled back drops its callbacks, as Django does. What the test case's transaction
    is, moderation/db/transactions.py says. Tests whose jobs, notifications and other on-commit
    work must happen use it instead of committing for real (`transaction=True`): django-q2's
    ORM broker then has the jobs queued, in the test's transaction."""
    connection = connections[DEFAULT_DB_ALIAS]
    if not connection.in_atomic_block:  # a transactional test (a race, of a module that uses this): Django runs them
        return
    pending_from = len(connection.run_on_commit)  # (the test case's own, if any, are not the test's)
    running = False

    def run_committed() -> None:
        nonlocal running
        if running or in_transaction():
            return
        running = True
        try:
            while len(connection.run_on_commit) > pending_from:
                _, callback, robust = connection.run_on_commit.pop(pending_from)
                if not robust:
                    callback()
                    continue
                try:
                    callback()
                except Exception:  # (as Django runs a robust callback)
                    logging.getLogger("django.db.backends.base").exception("on-commit callback failed")
        finally:
            running = False

    real_exit, real_on_commit = transaction.Atomic.__exit__, BaseDatabaseWrapper.on_commit

    def exit_then_run(self, exc_type, exc_value, traceback):
        real_exit(self, exc_type, exc_value, traceback)
        if (self.using or DEFAULT_DB_ALIAS) == DEFAULT_DB_ALIAS:
            run_committed()

    def on_commit_then_run(self, func, robust=False):
        real_on_commit(self, func, robust)
        if self is connection:
            run_committed()

    monkeypatch.setattr(transaction.Atomic, "__exit__", exit_then_run)
    monkeypatch.setattr(BaseDatabaseWrapper, "on_commit", on_commit_then_run)


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
def fresh_throttles(db):
    """Rate-limit counts start from zero and are not left behind for the next test."""
    from moderation.web.throttles import rate_limits_forget

    rate_limits_forget()
    yield
    rate_limits_forget()


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
