"""`make run`'s process (`manage.py run_platform`) as a user starts it, for the e2e tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import uuid

import pytest
from django.conf import settings

from lab.race_lab import database_url, free_port, wait_until_serving


@contextlib.contextmanager
def run_platform(**extra_env: str):
    """`manage.py run_platform` on a free port with production settings, on the test database;
    yields (process, port) once it answers, and stops it with SIGTERM as Ctrl-C would."""
    port = free_port()
    env = {
        **os.environ, "DATABASE_URL": database_url(), "DEBUG": "0", "SECRET_KEY": "k" * 60,
        "ALLOWED_HOSTS": "127.0.0.1", "SECURE_SSL_REDIRECT": "0", "Q_NAME": f"e2e-{uuid.uuid4().hex[:8]}",
        "LOG_LEVEL": "WARNING", **extra_env,
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
