"""The web tier's command line, one definition for `run_platform`, `serve_web` (deploy/systemd)
and the benchmarks (docs/operations.md, "Slow clients").

granian reads each request's head on its event loop (at most REQUEST_HEADER_TIMEOUT_S) and
serves config.asgi, which reads the whole body there too before Django runs it in a worker
thread: a client that sends slowly holds a socket, never a worker.
"""

from __future__ import annotations

import sys

from django.conf import settings

# A worker still answering when the server stops gets this long before it is killed.
STOP_GRACE_S = 30


APPLICATION = "config.asgi:application"


def web_command(host: str, port: int | str, *, workers: int, app: str = APPLICATION) -> list[str]:
    """granian's command line; `app` is what it serves (the benchmarks' framework ceiling serves
    bench.ceiling_asgi under the same command line, docs/benchmarks.md)."""
    return [
        sys.executable, "-m", "granian", "--interface", "asgi", app,
        "--host", host, "--port", str(port), "--workers", str(workers),
        "--http", "1", "--no-ws", "--respawn-failed-workers",
        "--http1-header-read-timeout", str(max(1, round(settings.REQUEST_HEADER_TIMEOUT_S * 1000))),
        "--workers-kill-timeout", str(STOP_GRACE_S), *(["--access-log"] if settings.WEB_ACCESS_LOG else []),
    ]
