"""The web server as production starts it (web_command: granian serving config/asgi.py): every
client sees its 413, also one that writes its whole body before it reads; each path reads only
its own bound; and the workers do not outlive a master that was killed (docs/operations.md,
"Request bodies" and "Slow clients")."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import subprocess

import psutil
import pytest
from django.conf import settings

from lab.race_lab import database_url, free_port, wait_until_serving
from moderation.management.web import web_command
from tests.e2e.conftest import still_running

pytestmark = [pytest.mark.e2e, pytest.mark.django_db]

DEADLINE_S = 30  # generous: a worker stops within a second or two of its master's death


@contextlib.contextmanager
def web_server(workers: int = 1):
    """web_command on a free port with production settings; yields (master, port) once it answers.
    Whatever is left of it (the master's group, and any worker that outlived the master) is
    killed at the end."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "DEBUG": "0", "SECRET_KEY": "k" * 60,
           "ALLOWED_HOSTS": "127.0.0.1", "SECURE_SSL_REDIRECT": "0", "LOG_LEVEL": "WARNING"}
    master = subprocess.Popen(web_command("127.0.0.1", port, workers=workers), cwd=settings.BASE_DIR, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until_serving(port, timeout_s=60)
        yield master, port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(master.pid, signal.SIGKILL)  # the workers share the master's session
        master.wait()


def post(port: int, path: str, body: bytes, headers: dict | None = None) -> int:
    """POST with Python's http.client, which sends the whole body before it reads a byte."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        return connection.getresponse().status
    finally:
        connection.close()


def test_every_client_sees_its_413_also_one_that_writes_its_whole_body_first():
    with web_server() as (_, port):
        probe = post(port, "/healthz", b"x" * (5 * 1024 * 1024))
        login = post(port, "/admin/login/", b"x" * (200 * 1024))
        submission = post(port, "/api/v1/reviews/", b"x" * (settings.SUBMISSION_MAX_BODY_BYTES + 1))
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            body = b"x" * (2 * 1024 * 1024)
            raw.sendall(b"POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            raw_status = raw.recv(64).split(b"\r\n", 1)[0]

    assert (probe, login, submission) == (413, 413, 413)
    assert raw_status == b"HTTP/1.1 413 Payload Too Large"


def test_a_submission_may_send_more_than_the_small_bound_and_reaches_the_api():
    with web_server() as (_, port):
        status = post(port, "/api/v1/reviews/", b"{" + b" " * (1024 * 1024) + b"}")

    assert status == 401  # read whole and handed to the API, which wants a token first


def test_the_workers_exit_and_free_the_port_when_their_master_is_killed():
    with web_server(workers=2) as (master, port):
        workers = psutil.Process(master.pid).children()
        assert len(workers) == 2

        master.send_signal(signal.SIGKILL)
        master.wait()
        alive = still_running(workers, DEADLINE_S)

    assert alive == [], f"workers still running after their master was killed: {[p.pid for p in alive]}"
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # nobody holds the port
