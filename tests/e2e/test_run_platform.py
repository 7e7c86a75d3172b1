"""`make run`'s process as a user gets it: the web server with a styled admin and no DEBUG, and a
cluster master killed with SIGKILL leaving no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import psutil
import pytest
from django.conf import settings

from moderation import services
from moderation.models import ContentReview
from tests.e2e.conftest import make_run_env, running

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_make_run_serves_with_its_web_server_and_a_styled_admin_without_debug(platform):
    process, port = platform
    base = f"http://127.0.0.1:{port}"
    children = [" ".join(p.cmdline()) for p in psutil.Process(process.pid).children()]
    # Beside the web server: the moderation cluster and the notification cluster (notifications
    # never run on the moderation workers).
    clusters = _cluster_masters(process)
    for master in clusters:
        _wait_until_running(master)
    # (setproctitle, which names the processes by role, overwrites what /proc shows of their
    # environment: the sentinel's title names the queue it serves.)
    titles = [" ".join(s.cmdline()).strip() for m in clusters for s in m.children()]
    queues = sorted(t.removeprefix("qcluster sentinel [").removesuffix("]") for t in titles)
    assert len(queues) == 2 and queues[1] == f"{queues[0]}-notify", titles  # <Q_NAME> and <Q_NAME>-notify

    login = httpx.get(f"{base}/admin/login/", timeout=10)
    css = httpx.get(f"{base}/static/admin/css/base.css", timeout=10)

    # (granian names its processes "granian asgi <address> <application>" when setproctitle is installed)
    assert any(c.startswith("granian asgi") and "config.asgi:application" in c for c in children), children
    # run_platform became the supervisor, which never set Django up (moderation/management/supervise.py):
    # none of the stack's compiled libraries is mapped in it, as they are in every child.
    supervisor = psutil.Process(process.pid)
    assert "moderation.management.supervise" in " ".join(supervisor.cmdline())
    assert "psycopg" not in _mapped(supervisor) and "psycopg" in _mapped(clusters[0])
    assert login.status_code == 200
    assert "admin/css/base.css" in login.text
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_make_run_passes_its_run_env_with_debug_off_to_the_platform():
    """Issue 49: `make run` served with DEBUG on, and its 404 listed every URL pattern. The recipe
    `make -n run` prints starts run_platform with RUN_ENV, the settings the platform fixture uses."""
    recipe = subprocess.run(["make", "-n", "run"], cwd=settings.BASE_DIR, capture_output=True, text=True, check=True)
    line = next(line for line in recipe.stdout.splitlines() if "manage.py run_platform" in line)
    run_env = make_run_env()

    assert run_env["DEBUG"] == "0"
    assert line.startswith(" ".join(f"{name}={value}" for name, value in run_env.items()) + " SECRET_KEY="), line


def test_make_run_answers_without_debug_pages_and_signs_a_moderator_in_over_plain_http(platform, django_user_model):
    _, port = platform
    base = f"http://127.0.0.1:{port}"
    django_user_model.objects.create_superuser("ada", password="a long passphrase 49")

    missing = httpx.get(f"{base}/no-such-page/", timeout=10)
    root = httpx.get(f"{base}/", timeout=10)
    with httpx.Client(base_url=base, timeout=10) as browser:
        browser.get("/admin/login/")
        signed_in = browser.post("/admin/login/?next=/admin/", data={
            "username": "ada", "password": "a long passphrase 49",
            "csrfmiddlewaretoken": browser.cookies["csrftoken"]}, headers={"Referer": f"{base}/admin/login/"})
        index = browser.get("/admin/")

    assert missing.status_code == 404
    assert "URLconf" not in missing.text and "urlpatterns" not in missing.text and "admin/" not in missing.text
    assert root.status_code == 302 and root.headers["location"] == "/admin/"
    assert signed_in.status_code == 302 and index.status_code == 200 and "Log out" in index.text


def test_make_run_hands_a_request_body_to_the_api_whole(platform):
    """The body config/asgi.py buffered reaches Django as the client sent it."""
    _, port = platform
    _, token = services.api_client_create(name="run-platform")
    text = "🙂 " * 20_000  # 100 KB: more than one read on the way

    created = httpx.post(f"http://127.0.0.1:{port}/api/v1/reviews/", headers={"Authorization": f"Bearer {token}"},
                         json={"external_id": "whole", "content_type": "text", "text": text}, timeout=30)

    assert created.status_code == 201, created.text
    assert ContentReview.objects.get(pk=created.json()["id"]).content.text == text


def test_stopping_the_platform_stops_every_process_gracefully(platform):
    """SIGTERM (or Ctrl-C) reaches each master alone: both clusters finish and exit on their own,
    nothing is killed at the grace (SIGTERM to a cluster's whole group made its master hang)."""
    process, _ = platform
    for master in _cluster_masters(process):
        _wait_until_running(master)  # (a master stopped while it boots dies by the signal, -15)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    output = process.output()

    assert "did not stop in time" not in output, output
    assert "Stopped (web exit 0, moderation cluster exit 0, notification cluster exit 0)" in output, output
    assert time.monotonic() - started < 10


def test_a_cluster_master_killed_is_started_again_and_leaves_no_worker_behind(platform):
    process, _ = platform
    masters = _cluster_masters(process)
    assert len(masters) >= 1
    master = masters[0]
    _wait_until_running(master)
    descendants = master.children(recursive=True)
    assert descendants

    master.send_signal(signal.SIGKILL)

    killed_at = time.monotonic()
    deadline = killed_at + 60  # run_platform stops what is left of its group and starts it again
    while time.monotonic() < deadline and not (
        len(_cluster_masters(process)) == len(masters) and master.pid not in [m.pid for m in _cluster_masters(process)]
    ):
        time.sleep(0.2)
    restarted = [m for m in _cluster_masters(process) if m.pid != master.pid]
    left = [p for p in descendants if running(p)]
    seen = [_described(p) for p in left]  # (read while they run: a failure says where they were)
    for p in left:  # do not leave them running for the next test
        os.kill(p.pid, signal.SIGKILL)
    assert left == [], (f"orphaned cluster processes still running {time.monotonic() - killed_at:.1f} s after the "
                        f"kill: {seen}; the masters now: {[_described(m) for m in _cluster_masters(process)]}; "
                        f"run_platform is {process.pid}")
    assert len(restarted) == len(masters), "the killed cluster was not started again"
    _wait_until_running(restarted[0])
    assert process.poll() is None, "run_platform stopped instead of starting the cluster again"


def _mapped(process: psutil.Process) -> str:
    with open(f"/proc/{process.pid}/maps") as maps:
        return maps.read()


def _cluster_masters(process) -> list[psutil.Process]:
    masters = []
    for child in psutil.Process(process.pid).children():
        try:
            if "qcluster" in " ".join(child.cmdline()):
                masters.append(child)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue  # a master killed and not yet reaped: no longer a running master
    return masters


def _described(process: psutil.Process) -> str:
    """pid, parent, process group, state and title: what tells an orphan from a restarted cluster."""
    try:
        return f"{process.pid} (parent {process.ppid()}, group {os.getpgid(process.pid)}, {process.status()}, " \
               f"{' '.join(process.cmdline())[:60]!r})"
    except (psutil.Error, ProcessLookupError) as exc:
        return f"{process.pid} ({type(exc).__name__})"


def _wait_until_running(master: psutil.Process) -> None:
    deadline = time.monotonic() + 30
    while len(master.children(recursive=True)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)  # the sentinel, its pusher, monitor and workers
