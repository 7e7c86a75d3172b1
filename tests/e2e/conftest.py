"""`make run`'s process (`manage.py run_platform`) as a user starts it, for the e2e tests."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from lab.race_lab import database_url, free_port, wait_until_serving


def make_run_env() -> dict[str, str]:
    """The settings `make run` serves with: the Makefile's RUN_ENV, as make passes it to
    run_platform (tests/e2e/test_run_platform.py checks that the recipe does)."""
    makefile = (Path(settings.BASE_DIR) / "Makefile").read_text()
    line = re.search(r"^RUN_ENV := (.*)$", makefile, re.MULTILINE)
    assert line, "the Makefile has no RUN_ENV line"
    return dict(word.split("=", 1) for word in shlex.split(line.group(1)))


@contextlib.contextmanager
def run_platform(**extra_env: str):
    """`manage.py run_platform` on a free port with `make run`'s settings (make_run_env), on the
    test database; yields (process, port) once it answers, and stops it with SIGTERM as Ctrl-C
    would."""
    port = free_port()
    env = {
        **os.environ, "DATABASE_URL": database_url(), **make_run_env(), "SECRET_KEY": "k" * 60,
        "Q_NAME": f"e2e-{uuid.uuid4().hex[:8]}", "LOG_LEVEL": "WARNING", **extra_env,
    }
    env.pop("PUBLIC_BASE_URL", None)
    # The output goes to a file, not a pipe: a pipe nobody reads until the end fills up (64 KiB of
    # access and log lines), and then every process of the platform blocks on its next log line.
    output = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_platform", "--port", str(port)], cwd=settings.BASE_DIR, env=env,
        stdout=output, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    process.output = lambda: (output.seek(0), output.read())[1]  # what it printed so far
    try:
        wait_until_serving(port, timeout_s=90)
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        print(process.output())
        output.close()


@pytest.fixture
def platform():
    with run_platform() as running:
        yield running


def running(process: psutil.Process) -> bool:
    """Whether `process` still runs. A zombie does not: it has exited, and only waits to be
    reaped by a parent, which for a killed master's orphans may be an init that never does."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def still_running(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of `processes` still running once they have all stopped, or `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while (alive := [p for p in processes if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive
