"""Running the platform's processes, for `run_platform` and the tools beside the product.

Each child runs in a process group of its own and is stopped as a group: a django-q2 cluster
is a master with a sentinel and workers under it, and a master that dies (even by `kill -9`)
must not leave workers behind that go on claiming reviews beside the cluster that replaces it.
Supervisors in production do the same (docs/operations.md, systemd `KillMode=control-group`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

STOP_GRACE_S = 15
KILL_WAIT_S = 5


def start(argv: list[str], env: dict, **popen) -> subprocess.Popen:
    """`argv` in a new session: its process group holds everything it forks."""
    return subprocess.Popen(argv, env=env, start_new_session=True, **popen)


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """Signal the process's whole group, even when its leader has exited already (orphaned
    workers keep the group alive)."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass  # nothing left in the group


def group_alive(process: subprocess.Popen) -> bool:
    """Whether a process of the group still runs. Zombies do not count: a killed orphan is one
    until its new parent reaps it, which may be never in a container whose init does not."""
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    try:
        pids = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return True  # no /proc to tell zombies apart: the group is alive
    return any(_runs_in_group(pid, process.pid) for pid in pids)


def _runs_in_group(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after "pid (comm)"
    except OSError:
        return False  # exited meanwhile
    return int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")


def stop_groups(children: dict, *, grace_s: float = STOP_GRACE_S, log=lambda message: None) -> None:
    """SIGTERM every child's leader, SIGKILL the groups still alive after `grace_s`, reap them.

    The leader alone, as systemd's `KillMode=mixed` does (deploy/systemd): a django-q2 master
    stops its own workers after their running tasks, in about a second, but a cluster whose
    workers get SIGTERM themselves loses them at once and its master then waits forever (it
    was killed at the grace every time). gunicorn's master stops its workers the same way. A
    group whose leader has exited already (a cluster master killed) gets SIGTERM as a group:
    nothing else would stop its orphans."""
    for process in children.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        else:
            signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for name, process in children.items():
        while group_alive(process) and time.monotonic() < deadline:
            process.poll()  # reap the leader, so only a live group counts
            time.sleep(0.1)
        if group_alive(process):
            log(f"{name} did not stop in time; killing its process group")
            signal_group(process, signal.SIGKILL)
            killed = time.monotonic() + KILL_WAIT_S  # SIGKILL is delivered at once, exiting takes a moment
            while group_alive(process) and time.monotonic() < killed:
                time.sleep(0.05)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass



def notification_cluster_env(env: dict) -> dict:
    """The environment that makes `manage.py qcluster` the notification cluster of a platform run
    with `env`: config/settings.py names it `<Q_NAME>-notify`."""
    return {**env, "Q_CLUSTER_NAME": f"{env.get('Q_NAME', 'moderation')}-notify"}


def manage(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]
