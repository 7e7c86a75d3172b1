"""The web tier's command line, one definition for `run_platform` and the benchmarks."""

from __future__ import annotations

import sys


def web_command(host: str, port: int | str, *, workers: int) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"{host}:{port}",
            "--workers", str(workers), "--access-logfile", "-"]
