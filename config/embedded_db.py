"""The zero-configuration database: an embedded PostgreSQL (pgserver) under ./var.

Used only when DATABASE_URL is unset. The server keeps running after the process that started it
exits (several processes share it: the web server, the django-q2 cluster, management commands);
`make clean-db` or `python -m config.embedded_db stop` stops it. Its data stays in ./var/pgdata.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "var" / "pgdata"


def _server(data_dir: Path):
    """A handle on the embedded server, started if it is not running (idempotent, cheap).

    pgserver serialises start-up with an inter-process lock, so processes starting together
    share one server instead of racing to initialise the data directory.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # pgserver keeps its lock file in the user runtime dir; without XDG_RUNTIME_DIR
        # platformdirs falls back to /tmp/runtime-<uid> and says so on every start.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        try:
            import pgserver
        except ImportError as exc:  # pragma: no cover - only without the pinned requirements
            raise RuntimeError(
                "DATABASE_URL is unset and pgserver is not installed: run `make run` or set DATABASE_URL"
            ) from exc
        return pgserver.get_server(data_dir, cleanup_mode=None)


def database_url(data_dir: Path = DATA_DIR) -> str:
    return _server(data_dir).get_uri()


def stop(data_dir: Path = DATA_DIR) -> None:
    if not (data_dir / "postmaster.pid").exists():
        print("embedded PostgreSQL is not running")
        return
    server = _server(data_dir)
    from pgserver import pg_ctl  # (pgserver's public wrapper) after _server(): importing pgserver warns

    pg_ctl(["-w", "stop"], pgdata=server.pgdata, user=server.system_user)
    print(f"embedded PostgreSQL stopped (data kept in {data_dir})")


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "url"
    if command == "stop":
        stop()
    elif command == "url":
        print(database_url())
    else:
        sys.exit("usage: python -m config.embedded_db [url|stop]")
