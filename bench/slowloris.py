"""Slow clients against the web tier: how promptly the API answers while K slowloris connections
are open, and what a plain request loop gets through (issue 22, docs/operations.md "Slow
clients").

Each server is started on the benchmark database with production settings and the same number
of processes. First a plain loop: wrk sends `--loop-requests` authenticated GETs over
`--loop-connections` connections (requests/s). Then `--headers` connections trickle a header
block and `--bodies` trickle a callback body, one byte every `--interval-s` (a connection the server
drops is reopened, as an attacker would), and `--probes` requests (/healthz and an authenticated
GET, in turn, each given `--probe-timeout-s`) are timed; last, how long the server let the first
slow connections hold on (up to `--hold-s`) and what it answered them. Prints one row per
server; `run_platform` is the command `make run` and deploy/systemd use.

    .venv/bin/python -m bench.slowloris                      # today's default and the alternatives
    .venv/bin/python -m bench.slowloris --servers run_platform
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.common import bench_client, percentile, setup, table


def _servers(workers: int, threads: int) -> dict[str, list[str]]:
    """The candidates, each a command line serving the project on {port}."""
    from moderation.management.web import web_command

    wsgi = "config.wsgi:application"
    return {
        "gunicorn sync": ["-m", "gunicorn", "config.wsgi", "--bind", "127.0.0.1:{port}", "--workers", str(workers)],
        f"gunicorn gthread x{threads}": ["-m", "gunicorn", "config.wsgi", "--bind", "127.0.0.1:{port}",
                                         "--workers", str(workers), "-k", "gthread", "--threads", str(threads)],
        "waitress": ["-m", "waitress", "--listen", "127.0.0.1:{port}", "--threads", str(workers * threads),
                     "--channel-timeout", "10", wsgi],
        "granian wsgi": ["-m", "granian", "--interface", "wsgi", "--host", "127.0.0.1", "--port", "{port}",
                         "--workers", str(workers), "--blocking-threads", str(threads),
                         "--http1-header-read-timeout", "10000", "--no-log", wsgi],
        # config.asgi under gunicorn's own asyncio worker: the same buffering, no header deadline.
        "gunicorn asgi": ["-m", "gunicorn", "config.asgi:application", "--bind", "127.0.0.1:{port}",
                          "--workers", str(workers), "-k", "asgi"],
        # granian serving config.asgi (moderation/management/web.py): make run, deploy/systemd.
        "run_platform": web_command("127.0.0.1", "{port}", workers=workers)[1:],
    }


def _available(argv: list[str]) -> bool:
    module = argv[1]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _loop(port: int, token: str, connections: int, count: int) -> float:
    """2xx responses a second to `count` authenticated GETs from wrk (bench/wrk.py)."""
    from bench import wrk

    raw = f"GET /api/v1/reviews/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "requests"
        wrk.write_requests([raw] * count, path)
        return wrk.requests_file(port, path, connections=connections, max_seconds=60).rate


def _probe(base: str, token: str, n: int, timeout_s: float) -> tuple[list[float], int]:
    latencies, failed = [], 0
    for i in range(n):
        path, headers = ("/healthz", {}) if i % 2 == 0 else ("/api/v1/reviews/", {"Authorization": f"Bearer {token}"})
        started = time.monotonic()
        try:
            ok = httpx.get(base + path, headers=headers, timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            ok = False
        latencies.append(time.monotonic() - started)
        failed += not ok
    return latencies, failed


class _Persistent:
    """Slowloris that reopens every connection the server drops, as an attacker would."""

    def __init__(self, port: int, headers: int, bodies: int, interval_s: float):
        from lab.slowloris import Slowloris

        self.make = lambda h, b: Slowloris(port, headers=h, body=b, interval_s=interval_s)
        self.waves = [self.make(headers, bodies)]
        self._replaced: set[int] = set()  # ids of the dropped connections reopened already
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.waves[0].__enter__()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            dropped = [c for w in self.waves for c in w.released() if id(c) not in self._replaced]
            if not dropped:
                continue
            headers = sum(c.kind == "headers" for c in dropped)
            try:
                self.waves.append(self.make(headers, len(dropped) - headers).__enter__())
            except OSError:
                continue  # the server refuses connections: the next round tries again
            self._replaced.update(id(c) for c in dropped)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        for wave in self.waves:
            wave.__exit__()


def _answers(wave) -> dict:
    statuses: dict = {}
    for c in wave.connections:
        statuses.setdefault(c.kind, []).append((c.status, None if c.held_s is None else round(c.held_s, 1)))
    return statuses


def measure(name: str, argv: list[str], args, token: str) -> list:
    from lab.race_lab import free_port, spawn, stop, wait_until_serving

    port = free_port()
    env = {**os.environ, "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}", "THROTTLE_CLIENT_RATE": "10000000/min",
           "THROTTLE_CALLBACK_RATE": "10000000/min"}
    server = spawn(env, *[part.format(port=port) for part in argv])
    try:
        wait_until_serving(port, timeout_s=60)
        base = f"http://127.0.0.1:{port}"
        rate = _loop(port, token, args.loop_connections, args.loop_requests)
        with _Persistent(port, args.headers, args.bodies, args.interval_s) as slow:
            time.sleep(2 * args.interval_s)  # the slow connections are in
            latencies, failed = _probe(base, token, args.probes, args.probe_timeout_s)
            first = slow.waves[0]  # how long the server let them hold on, and what it answered
            while len(first.released()) < len(first.connections) and time.monotonic() - first.opened_at < args.hold_s:
                time.sleep(0.2)
            answers = _answers(first)
    finally:
        stop([server])
    return [name, rate, percentile(latencies, 50), max(latencies), f"{failed}/{args.probes}",
            _summary(answers.get("headers", [])), _summary(answers.get("body", []))]


def _summary(connections: list) -> str:
    """What the server answered the slow connections of one kind (closed: none) and after how
    long, or `held` when it still had them when the benchmark stopped waiting."""
    released = [(status, held) for status, held in connections if held is not None]
    if len(released) < len(connections):
        return "held"
    statuses = sorted({str(status or "closed") for status, _ in released})
    return f"{'/'.join(statuses)} after {min(h for _, h in released)}-{max(h for _, h in released)} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="", help="comma-separated names (default: every one installed)")
    parser.add_argument("--workers", type=int, default=2, help="processes per server")
    parser.add_argument("--threads", type=int, default=4, help="threads per process, where the server has them")
    # 6 + 6 slow connections: more than the 2 x 4 threads of the threaded servers.
    parser.add_argument("--headers", type=int, default=6, help="connections trickling a header block")
    parser.add_argument("--bodies", type=int, default=6, help="connections trickling a callback body")
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument("--probe-timeout-s", type=float, default=8.0)
    parser.add_argument("--loop-connections", type=int, default=4)
    parser.add_argument("--loop-requests", type=int, default=2000)
    parser.add_argument("--hold-s", type=float, default=15.0, help="how long to wait for the slow ones to be let go")
    args = parser.parse_args()
    setup()
    _, token = bench_client("slowloris")
    servers = _servers(args.workers, args.threads)
    chosen = [s.strip() for s in args.servers.split(",") if s.strip()] or list(servers)
    print(f"{args.headers} header + {args.bodies} body slowloris connections, a byte every {args.interval_s} s; "
          f"{args.workers} processes; {os.cpu_count()} CPUs", flush=True)
    rows = []
    for name in chosen:
        if not _available(servers[name]):
            print(f"{name}: not installed, skipped", file=sys.stderr)
            continue
        rows.append(measure(name, servers[name], args, token))
    print(table(["server", "loop req/s", "probe p50 s", "probe max s", "probes failed", "header trickle",
                 "body trickle"], rows))


if __name__ == "__main__":
    main()
