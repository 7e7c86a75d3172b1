"""What the platform relies on still holds through a real PgBouncer in transaction pooling
(docs/operations.md, "PgBouncer"): row locks, SKIP LOCKED, transaction-scoped advisory locks and
SET LOCAL timeouts. And why the code never uses session state: a plain SET leaks to other clients."""

from __future__ import annotations

import environ
import pytest
from django.db import connection
from psycopg import connect, errors

from lab.pgbouncer import PgBouncer, ensure_installed
from moderation import services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def installed():
    try:
        ensure_installed()
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def bouncer(installed):
    # At most two server connections, whatever the clients (each test opens two or three).
    with PgBouncer.for_database(connection.settings_dict, pool_size=2) as bouncer:
        yield bouncer


def client(bouncer):
    return connect(bouncer.url(connection.settings_dict["NAME"]), autocommit=True)


def test_row_locks_and_skip_locked_hold_through_transaction_pooling(bouncer):
    api_client, _ = services.api_client_create(name="acme")
    row = "SELECT id FROM moderation_apiclient WHERE id = %s FOR UPDATE"
    with client(bouncer) as a, client(bouncer) as b:
        with a.transaction():
            a.execute(row, [api_client.pk])
            with pytest.raises(errors.LockNotAvailable), b.transaction():
                b.execute("SET LOCAL lock_timeout = '300ms'")
                b.execute(row, [api_client.pk])
            with b.transaction():
                assert b.execute(row.replace("FOR UPDATE", "FOR UPDATE SKIP LOCKED"), [api_client.pk]).fetchall() == []
        with b.transaction():
            assert b.execute(row.replace("FOR UPDATE", "FOR UPDATE NOWAIT"), [api_client.pk]).fetchall() == [(api_client.pk,)]


def test_transaction_scoped_advisory_locks_hold_through_transaction_pooling(bouncer):
    with client(bouncer) as a, client(bouncer) as b:
        with a.transaction():
            a.execute("SELECT pg_advisory_xact_lock(4242)")
            with b.transaction():
                assert b.execute("SELECT pg_try_advisory_xact_lock(4242)").fetchone() == (False,)
        with b.transaction():
            assert b.execute("SELECT pg_try_advisory_xact_lock(4242)").fetchone() == (True,)


def test_a_set_local_timeout_applies_to_its_transaction_only_while_a_plain_set_leaks(bouncer):
    with client(bouncer) as a, client(bouncer) as b:
        default = a.execute("SHOW statement_timeout").fetchone()[0]
        with pytest.raises(errors.QueryCanceled), a.transaction():
            a.execute("SET LOCAL statement_timeout = '100ms'")
            a.execute("SELECT pg_sleep(2)")
        assert a.execute("SHOW statement_timeout").fetchone()[0] == default
        assert b.execute("SHOW statement_timeout").fetchone()[0] == default
        # A session-level SET stays on the server connection, which the next client gets.
        with PgBouncer.for_database(connection.settings_dict, pool_size=1) as single:
            with client(single) as c, client(single) as d:
                c.execute("SET statement_timeout = '1234ms'")
                assert d.execute("SHOW statement_timeout").fetchone()[0] == "1234ms"


def test_pgbouncer_reaches_the_embedded_server_through_its_unix_socket(installed, embedded_server):
    """The README's path (no DATABASE_URL), whatever DATABASE_URL says here: the embedded server
    listens on no TCP port, only on a unix socket in its data directory, which only the server's
    own system user may enter."""
    data_dir, url = embedded_server("pgdata")
    with PgBouncer.for_database(environ.Env.db_url_config(url), pool_size=1) as bouncer, \
            connect(bouncer.url("postgres"), autocommit=True) as conn:
        assert conn.execute("SHOW data_directory").fetchone() == (str(data_dir),)
