"""`make run`'s memory, idle and under the end-to-end load: `manage.py run_platform` itself (the
web server, the moderation cluster and the notification cluster, with the worker counts the
machine gets: docs/operations.md, "Sizing") on a database of its own, production settings and
the local model.

    python -m bench.footprint [--reviews 3000] [--idle-s 30] [--connections 8]

Every process of run_platform's tree is read: RSS (its resident pages, the shared ones counted
in every process that maps them, so a sum counts the libraries a forked cluster shares once per
process) and PSS (each shared page divided among the processes that map it: summed, what the
tree holds in all). Idle: after /readyz answers and `--idle-s` more; under load: the peak of
both sums, sampled every half second while wrk submits `--reviews` reviews from
`--connections` connections and until every review is final. reviews/s as bench.e2e counts
them. Figures are printed; nothing here asserts a size.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import threading
import time
import urllib.request
import uuid

from bench import checkout, common, e2e, wrk
from bench.submit import TEXTS

MIB = 1024 * 1024


def tree(pid: int) -> list:
    import psutil

    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def pss(pid: int) -> int:
    """Bytes; 0 for a process that has gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def kind(process) -> str:
    """What a process of the tree is: run_platform, granian's master or a worker, or a cluster's."""
    import psutil

    try:
        command = " ".join(process.cmdline())
        environ = process.environ()
    except Exception:  # gone, or not ours to read
        return "gone"
    if "run_platform" in command or "moderation.management.supervise" in command:
        return "run_platform"  # the command, then the supervisor it becomes (its argv names granian)
    if "granian" in command:
        return "granian"
    # django-q2 retitles its processes (setproctitle), which can hide the environment: the
    # cluster's master, the leader of the process group, names its cluster in its title.
    try:
        leader = " ".join(psutil.Process(os.getpgid(process.pid)).cmdline())
    except (OSError, psutil.Error):
        leader = ""
    notify = environ.get("Q_CLUSTER_NAME", "").endswith("-notify") or "-notify" in leader
    return f"{'notification' if notify else 'moderation'} cluster"


def snapshot(pid: int) -> dict:
    import psutil

    rows = []
    for process in tree(pid):
        try:
            rows.append((kind(process), process.memory_info().rss, pss(process.pid)))
        except psutil.NoSuchProcess:
            continue
    by_kind = collections.defaultdict(lambda: [0, 0, 0, 0])  # processes, RSS, PSS, largest RSS
    for name, rss, held in rows:
        entry = by_kind[name]
        entry[0] += 1
        entry[1] += rss
        entry[2] += held
        entry[3] = max(entry[3], rss)
    return {"processes": len(rows), "rss": sum(r for _, r, _ in rows), "pss": sum(p for _, _, p in rows),
            "by_kind": {name: tuple(values) for name, values in sorted(by_kind.items())}}


class RunPlatform:
    """`manage.py run_platform` in a process group of its own, stopped as `make run`'s Ctrl-C does."""

    def __init__(self, code: checkout.Checkout, database_url: str, *, env: dict | None = None, log=None):
        from lab.race_lab import free_port

        self.port = free_port()
        self.env = code.env(database_url, **{
            "MODERATION_PROVIDER": "local", "LOG_LEVEL": "WARNING", "Q_NAME": f"footprint-{uuid.uuid4().hex[:8]}",
            "THROTTLE_CLIENT_RATE": "10000000/min", "THROTTLE_CALLBACK_RATE": "10000000/min",
            "BREAKER_MIN_CALLS": "1000000", "REDIS_URL": "", **(env or {})})
        for name in ("WEB_CONCURRENCY", "Q_WORKERS", "NOTIFY_WORKERS"):  # the machine's counts, as make run
            if name not in (env or {}):
                self.env.pop(name, None)
        self.code, self.log = code, log  # log: a file for run_platform's output (default: stdout dropped)
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> RunPlatform:
        self.process = subprocess.Popen(
            # the checkout's Python (its own virtualenv when its requirements differ: bench.checkout);
            # run_platform starts granian and the clusters with it (sys.executable)
            [self.code.executable, "manage.py", "run_platform", "--port", str(self.port)], cwd=self.code.path,
            env=self.env, start_new_session=True, stdout=self.log or subprocess.DEVNULL,
            stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"run_platform exited with {self.process.returncode} before it was ready")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError("run_platform was not ready within 120 s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def measure(code: checkout.Checkout, *, reviews: int, idle_s: float, connections: int, timeout: float,
            env: dict | None = None) -> dict:
    """Idle and under load: the snapshots, the peak sums, reviews/s and the violations."""
    url = code.database("footprint")
    client_id, token = code.create_client(url, "bench-footprint")
    with RunPlatform(code, url, env=env) as platform:
        time.sleep(idle_s)
        idle = snapshot(platform.process.pid)
        peak = {"rss": 0, "pss": 0, "processes": 0}
        sampling = True

        def sample():
            while sampling:
                now = snapshot(platform.process.pid)
                for key in peak:
                    peak[key] = max(peak[key], now[key])
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = checkout.query(url, "SELECT now()")[0][0]
        load = wrk.submissions(platform.port, token, tag="footprint", count=reviews, texts=TEXTS,
                               connections=connections, max_seconds=timeout)
        ids, waited = e2e.wait_final(url, started, timeout, load.ok)
        sampling = False
        sampler.join()
        after = snapshot(platform.process.pid)
    final, window = e2e.finished(url, started)
    return {"code": code.label, "path": "footprint", "idle": idle, "peak": peak, "after": after, "reviews": len(ids), "final": final,
            "rate": final / window if window and final == len(ids) else 0.0, "waited_s": waited,
            "submit_errors": load.describe_errors(), "violations": code.violations(url, ids), "client": client_id}


def describe(result: dict) -> list[str]:
    idle, peak = result["idle"], result["peak"]
    lines = [f"make run ({result['code']}), idle: {idle['processes']} processes, RSS summed "
             f"{idle['rss'] / MIB:.0f} MiB, PSS summed {idle['pss'] / MIB:.0f} MiB; under the e2e load (peak): "
             f"RSS {peak['rss'] / MIB:.0f} MiB, PSS {peak['pss'] / MIB:.0f} MiB; "
             f"{result['rate']:.1f} reviews/s over {result['reviews']} reviews ({result['final']} final), "
             f"non-2xx/errors {result['submit_errors']}, {len(result['violations'])} invariant violations"]
    for name, (count, rss, held, largest) in idle["by_kind"].items():
        lines.append(f"  idle {name}: {count} processes, RSS {rss / MIB:.0f} MiB (largest {largest / MIB:.0f}), "
                     f"PSS {held / MIB:.0f} MiB")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=3000)
    parser.add_argument("--idle-s", type=float, default=30)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    common.setup_driver()
    wrk.ensure()
    result = measure(checkout.this(), reviews=args.reviews, idle_s=args.idle_s, connections=args.connections,
                     timeout=args.timeout)
    print("\n".join(describe(result)))


if __name__ == "__main__":
    main()
