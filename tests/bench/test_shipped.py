"""bench.shipped's instruments: what a py-spy sample was doing, and the SQL counter its processes
load (bench/sqlcount) counting the statements and commits a connection sends."""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from django.db import connection, transaction

from bench import shipped


def test_a_sample_is_put_down_to_its_innermost_known_part():
    stack = ["<module> (manage.py:14)", "worker (django_q/worker.py:90)",
             "moderate_review (/work/x/moderation/tasks.py:40)", "execute (django/db/models/sql/compiler.py:1)",
             "wait (site-packages/psycopg/connection.py:495)"]
    assert shipped.category(stack) == "database driver"
    assert shipped.category(stack[:4]) == "ORM"
    assert shipped.category(stack[:3]) == "project"
    assert shipped.category(stack[:2] + ["predict (/work/x/moderation/providers/local_model.py:3)"]) == "the model"
    assert shipped.category(["<module> (<frozen runpy>:1)", "select (selectors.py:1)"]) == "other (standard library)"
    assert shipped._frame("wait (/x/.venv/lib/python3.11/site-packages/psycopg/connection.py:495)") == \
        "wait (psycopg/connection.py)"


@pytest.mark.django_db(transaction=True)
def test_the_sql_counter_counts_each_statement_and_commit_of_a_new_connection(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_SQL_COUNT_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(shipped.SQLCOUNT))
    sys.modules.pop("sitecustomize", None)
    counter = importlib.import_module("sitecustomize")
    try:
        connection.close()
        with connection.cursor() as cursor:  # a new connection: the counter is on it
            cursor.execute("SELECT 1")
            cursor.execute("SELECT 2")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 3")
        counter._write(True)
        counts = json.loads((tmp_path / f"{__import__('os').getpid()}.json").read_text())
        assert counts == {"statements": 3, "commits": 1}
    finally:
        from django.db.backends.signals import connection_created

        connection_created.disconnect(counter._on_connection)
        sys.modules.pop("sitecustomize", None)
        connection.close()  # its wrapper goes with the connection
