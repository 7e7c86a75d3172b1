"""The supervisor `run_platform` becomes once the platform is prepared (`make run`).

    python -m moderation.management.supervise '<spec as JSON>'

`run_platform` needs Django to collect the static files and to read the settings; supervising
does not, and a process that has set Django up holds about 90 MiB for the whole run. So it
replaces itself (exec: the same process id, signals and terminal) with this module, which
imports nothing but the standard library (moderation/__init__.py and management/__init__.py are
empty) and holds about 10 MiB (docs/operations.md, "Sizing").

The spec: {"banner": str, "children": [{"name", "argv", "env"}, ...]}, each child's `env` what
it adds to this process's environment. Each child runs in a process group of its own and is
stopped as a group (moderation/management/processes.py). Ctrl-C (or SIGTERM) stops everything;
if any child exits on its own (a cluster master killed), the others are stopped too.
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
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    children = {child["name"]: start(child["argv"], {**os.environ, **child["env"]}) for child in spec["children"]}
    print(spec["banner"], flush=True)
    while not stopping and all(p.poll() is None for p in children.values()):
        time.sleep(0.2)
    exited = [name for name, p in children.items() if p.poll() is not None]
    if exited and not stopping:
        print(f"{', '.join(exited)} exited; stopping the rest", file=sys.stderr, flush=True)
    stop_groups(children, log=lambda message: print(message, file=sys.stderr, flush=True))
    print(f"Stopped ({', '.join(f'{n} exit {p.returncode}' for n, p in children.items())}).", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(supervise(json.loads(sys.argv[1])))
