"""The supervisor `run_platform` becomes once the platform is prepared (`make run`).

    python -m moderation.management.supervise '<spec as JSON>'

`run_platform` needs Django to collect the static files and to read the settings; supervising
does not, and a process that has set Django up holds about 90 MiB for the whole run. So it
replaces itself (exec: the same process id, signals and terminal) with this module, which
imports nothing but the standard library (moderation/__init__.py and management/__init__.py are
empty) and holds about 10 MiB (docs/operations.md, "Sizing").

The spec: {"banner": str, "children": [{"name", "argv", "env"}, ...]}, each child's `env` what
it adds to this process's environment. Each child runs in a process group of its own and is
stopped as a group (moderation/management/processes.py). Ctrl-C (or SIGTERM, or SIGHUP when
the terminal closes) stops everything. A child that exits on its own (a cluster master or the web
server's master killed) is started again, after what is left of its process group is stopped (a
killed master's workers must not go on beside the new ones): a process inside a cluster is the
cluster's own to replace (moderation/management/cluster.py), the cluster as a whole is this
supervisor's, as systemd's `Restart=always` does in production. A child that exits
RESTART_LIMIT times within RESTART_WINDOW_S is not started again: everything is stopped and the
supervisor exits with 1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from moderation.management.processes import start, stop_groups

# A child that exits more often than this within the window is not started again.
RESTART_LIMIT = 5
RESTART_WINDOW_S = 60
# How long what is left of a dead child's process group gets before it is killed.
RESTART_GRACE_S = 5


def supervise(spec: dict) -> int:
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    # Before any child starts: a signal from now on stops them all, never this process alone.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
        signal.signal(signum, stop)
    children: dict = {}
    exited: list[str] = []
    commands = {child["name"]: (child["argv"], {**os.environ, **child["env"]}) for child in spec["children"]}
    restarts: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for name, (argv, env) in commands.items():
            children[name] = start(argv, env)
        print(spec["banner"], flush=True)
        while not stopping and not exited:
            time.sleep(0.2)
            for name, process in list(children.items()):
                if not stopping and process.poll() is not None and not _restart(name, children, commands, restarts):
                    exited.append(name)
                    break
    finally:  # whatever went wrong here (a child that could not start, a closed pipe), none is left behind
        stop_groups(children, log=_say)
    print(f"Stopped ({', '.join(f'{n} exit {p.returncode}' for n, p in children.items())}).", flush=True)
    return 1 if exited and not stopping else 0


def _restart(name: str, children: dict, commands: dict, restarts: dict) -> bool:
    """Start child `name`, which exited on its own, again, once what is left of its process group
    is stopped; False (and nothing started) past RESTART_LIMIT exits within RESTART_WINDOW_S."""
    now = time.monotonic()
    restarts[name] = [t for t in restarts[name] if now - t < RESTART_WINDOW_S] + [now]
    if len(restarts[name]) > RESTART_LIMIT:
        _say(f"{name} exited {len(restarts[name])} times within {RESTART_WINDOW_S} s; stopping the rest")
        return False
    _say(f"{name} exited ({children[name].returncode}); starting it again")
    stop_groups({name: children[name]}, grace_s=RESTART_GRACE_S, log=_say)  # its orphans
    children[name] = start(*commands[name])
    return True


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:  # nobody reads the terminal any more: stopping the children matters more
        pass


if __name__ == "__main__":
    sys.exit(supervise(json.loads(sys.argv[1])))
