"""The zero-configuration database (config/embedded_db.py): what `make test` and `make run` use
without DATABASE_URL, in every checkout of the project on a machine at once."""

from __future__ import annotations

from psycopg import connect


def test_two_checkouts_each_get_a_server_of_their_own_with_nothing_shared_to_collide_on(embedded_server):
    """A CI clone and a developer's checkout on one machine: each data directory gets its own
    server, reached on a unix socket inside that directory, and neither takes a TCP port."""
    servers = [embedded_server("ci-clone"), embedded_server("developer")]

    for data_dir, url in servers:
        with connect(url, autocommit=True) as conn:
            assert conn.execute("SHOW data_directory").fetchone() == (str(data_dir),)
            assert conn.execute("SHOW unix_socket_directories").fetchone() == (str(data_dir),)
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
