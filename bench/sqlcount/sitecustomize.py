"""Counts the SQL statements each process of the platform sends (bench.shipped --profile), without
changing the product: bench.shipped puts this directory first on PYTHONPATH, so Python imports it
at start-up in every process run_platform starts. Each new database connection gets an execute
wrapper that counts statements (`execute` and `executemany` calls, each one round trip) and the
transactions that committed; the counts go to `<BENCH_SQL_COUNT_DIR>/<pid>.json` at most every
half second, and at exit."""

import os

_DIR = os.environ.get("BENCH_SQL_COUNT_DIR")

if _DIR:
    import atexit
    import json
    import time

    _counts = {"statements": 0, "commits": 0}
    _written = [0.0]

    def _write(force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - _written[0] < 0.5:
            return
        _written[0] = now
        path = os.path.join(_DIR, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(_counts, f)
        os.replace(path + ".tmp", path)

    def _counter(execute, sql, params, many, context):
        _counts["statements"] += 1
        try:
            return execute(sql, params, many, context)
        finally:
            _write()

    def _on_connection(sender, connection, **kwargs):
        if _counter not in connection.execute_wrappers:
            connection.execute_wrappers.append(_counter)
            original = connection._commit

            def _commit():
                _counts["commits"] += 1
                _write()
                return original()

            connection._commit = _commit

    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection, weak=False)
    atexit.register(_write, True)
