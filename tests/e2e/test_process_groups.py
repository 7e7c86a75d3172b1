"""Stopping a child's process group (moderation/management/processes.py): what `run_platform`
does before it starts a killed cluster again. Real processes, no database."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import psutil
import pytest

from moderation.management.processes import group_alive, start, stop_groups


def _members(pgid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return members


def test_a_group_whose_leader_died_is_stopped_with_its_orphans_before_stop_groups_returns():
    """The cluster master killed: its workers are orphans that ignore SIGTERM, as a sentinel
    whose master is gone may. `run_platform` starts the new cluster when stop_groups returns,
    so none of them may still run then (a SIGKILL is sent at once, an exit takes a moment)."""
    leader = start(["sh", "-c", "trap '' TERM; for i in 1 2 3 4; do sleep 60 & done; exit 0"], env=dict(os.environ))
    leader.wait(timeout=10)
    deadline = time.monotonic() + 10
    while len(_members(leader.pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = _members(leader.pid)
    assert len(orphans) == 4

    said: list[str] = []
    stop_groups({"cluster": leader}, grace_s=0.5, log=said.append)

    assert said == ["cluster did not stop in time; killing its process group"]
    assert _members(leader.pid) == []
    assert not group_alive(leader)


def test_a_group_left_with_only_a_zombie_is_not_alive():
    """A killed orphan stays a zombie until its new parent reaps it, which an init that does not
    reap never does: waiting for such a group to end would wait out every grace."""
    pid = os.fork()
    if pid == 0:  # the child: a group of its own, then exit unreaped
        os.setsid()
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
        os.killpg(pid, 0)  # the kernel still counts the zombie in its group

        assert not group_alive(SimpleNamespace(pid=pid))
    finally:
        os.waitpid(pid, 0)


def test_a_group_with_a_running_member_is_alive_until_it_is_stopped():
    leader = start(["sleep", "60"], env=dict(os.environ))
    try:
        assert group_alive(leader)
    finally:
        stop_groups({"sleeper": leader}, grace_s=5)
    assert not group_alive(leader)
    assert leader.returncode == -signal.SIGTERM


def test_under_make_test_this_test_runs_in_the_processes_group(request):
    """`make test` runs the tests that start processes one at a time, on one pytest-xdist worker
    (tests/conftest.py): pytest-xdist names the group in the test's id. Under pytest 9.2 with
    pytest-xdist 3.8.0 the group was ignored, and the race labs ran beside the cluster chaos."""
    if getattr(request.config.option, "dist", "no") != "loadgroup" and not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run with --dist loadgroup (make test runs it so)")
    assert request.node.nodeid.endswith("@processes"), request.node.nodeid
