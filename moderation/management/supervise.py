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
the terminal closes) stops everything; if any child exits on its own (a cluster master killed),
the others are stopped too and the supervisor exits with 1.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from moderation.management.processes import start, stop_groups


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
    try:
        for child in spec["children"]:
            children[child["name"]] = start(child["argv"], {**os.environ, **child["env"]})
        print(spec["banner"], flush=True)
        while not stopping and all(p.poll() is None for p in children.values()):
            time.sleep(0.2)
        exited = [name for name, p in children.items() if p.poll() is not None]
        if exited and not stopping:
            _say(f"{', '.join(exited)} exited; stopping the rest")
    finally:  # whatever went wrong here (a child that could not start, a closed pipe), none is left behind
        stop_groups(children, log=_say)
    print(f"Stopped ({', '.join(f'{n} exit {p.returncode}' for n, p in children.items())}).", flush=True)
    return 1 if exited and not stopping else 0


def _say(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:  # nobody reads the terminal any more: stopping the children matters more
        pass


if __name__ == "__main__":
    sys.exit(supervise(json.loads(sys.argv[1])))
