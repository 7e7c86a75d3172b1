"""The platform as it ships (issue 51): `manage.py run_platform`, exactly what `make run` starts
(granian with its workers and flags, the moderation cluster and the notification cluster, the
worker counts the machine gets: docs/operations.md "Sizing"; the local model), on a fresh
database, driven only through the public API and the callback endpoint. One command prints
every acceptance figure:

    python -m bench.shipped [--reviews 3000] [--connections 4] [--callbacks 3000] [--levels 4,8,16]
                            [--idle-s 20] [--pgbench-seconds 10] [--profile DIR]
                            [--model-texts 20000] [--model-rounds 3]
                            [--before REF_OR_DIR] [--env NAME=VALUE ...]

- idle: RSS summed over run_platform's processes (and PSS), with a table of every process,
  `--idle-s` seconds after /readyz first answers; and again after the run. With the embedded
  PostgreSQL (DATABASE_URL unset, as `make run`), its processes are listed apart.
- end to end: `--reviews` submitted by wrk from `--connections` connections (POST
  /api/v1/reviews/), until every review is final; reviews/s = reviews / (last completed_at - first
  created_at), with the submissions' req/s and p99 during that load. Beside it: the CPU seconds per
  review of each tier (web, each cluster, the database's backends, wrk), transactions and rows
  written per review, and pgbench running the path's SQL (bench.e2e.PGBENCH_SCRIPT).
- callbacks: signed provider callbacks, 30% re-deliveries, at each of `--levels` connections (the
  best counts), to reviews in `processing` with a live webhook request (seeded as the pipeline
  leaves them: bench.common.seed_processing; a set-up, not a path of the platform's).
- the framework ceiling: bench.ceiling_asgi (the same SQL in a bare view, inside the same ASGI
  stack) under the same granian command line (moderation.management.web.web_command), for the
  submissions and the callbacks; and pgbench on the submissions' and the callbacks' SQL.
- invariant violations (moderation.invariants) over every review the run submitted or named.
- the model (the local provider's), before the platform starts: texts/s on one core and the RSS a
  process gains by loading it (bench.local_model.measure, `--model-texts`, `--model-rounds`; 0
  texts skips it); and the memory of a moderation worker with it loaded: the RSS and PSS of each
  django-q2 worker of the moderation cluster (the cluster loads the model before it forks them),
  read at idle and right after the end-to-end load.

The environment is make run's defaults but for what production and the load need: DEBUG=0 with
a secret key and the loopback host, plain HTTP (SECURE_SSL_REDIRECT=0), the provider's webhook
secret (callbacks are signed), and the per-client and callback rate limits lifted (1,200 and
12,000 a minute by default: an operator expecting this traffic raises them). LOG_LEVEL stays
INFO, the worker counts the machine's. `--profile DIR` also runs py-spy on every Python process
during the end-to-end load (flame data and the top frames per tier in DIR) and counts the SQL
statements and commits of each process (bench/sqlcount): those make the run slower, so its
figures are for the budget, not the headline. `--before` first runs another checkout (a
directory, or a git ref exported to one) idle, end to end and its model, for a ratio in the same
run (the code before a change; on a virtualenv built from its own requirements.txt when that
differs from this checkout's: bench.checkout.interpreter); `--env NAME=VALUE` changes a setting in this checkout's run only (a
lever against make run's settings: `--before . --env WEB_ACCESS_LOG=1`). Figures are printed;
nothing here asserts them.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import checkout, common, e2e, footprint, ingest, local_model, submit, wrk
from bench.submit import TEXTS

MIB = 1024 * 1024
GOALS = {"e2e": 200.0, "submissions": 400.0, "callbacks": 600.0, "p99_ms": 100.0, "idle_mib": 800.0}
# make run's defaults, set to what they are: footprint.RunPlatform lowers them for its own runs.
SHIPPED_DEFAULTS = {"LOG_LEVEL": "INFO", "BREAKER_MIN_CALLS": "10"}
SQLCOUNT = Path(__file__).resolve().parent / "sqlcount"


# --- processes ------------------------------------------------------------------------------------


def role(process) -> str:
    """A process's part within its kind: django-q2 names its own (setproctitle), granian's master
    and workers differ by parent."""
    try:
        title = " ".join(process.cmdline())
    except Exception:  # noqa: BLE001 - gone
        return "?"
    for name in ("Sentinel", "Monitor", "Pusher", "Worker", "Guard", "Scheduler", "Timer"):
        if name.lower() in title.lower():
            return name.lower()
    parent = " ".join(process.parent().cmdline())
    if "granian" in title:
        return "worker" if "granian" in parent else "master"
    if "run_platform" in parent or "supervise" in parent:
        return "master"
    return "worker"  # a django-q2 worker keeps its master's title


def processes(pid: int) -> list[dict]:
    """Every process of run_platform's tree: pid, kind, role, RSS and PSS (bytes)."""
    import psutil

    # run_platform starts its children in this order, each the leader of its process group
    # (moderation/management/commands/run_platform.py); django-q2 retitles a cluster's processes,
    # so which cluster a process belongs to is its group leader's place in that order.
    root = psutil.Process(pid)
    started = sorted(root.children(), key=lambda child: (child.create_time(), child.pid))
    leaders = dict(zip((child.pid for child in started), ("granian", "moderation cluster", "notification cluster"), strict=False))
    rows = []
    for process in footprint.tree(pid):
        try:
            kind = leaders.get(os.getpgid(process.pid)) if process.pid != pid else None
            rows.append({"pid": process.pid, "kind": kind or footprint.kind(process), "role": role(process),
                         "rss": process.memory_info().rss, "pss": footprint.pss(process.pid)})
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    return rows


EMBEDDED = not os.environ.get("DATABASE_URL")  # (read before setup_driver sets it to the embedded server's)


def embedded_postgres() -> list[dict]:
    """The embedded PostgreSQL's processes (when the bench runs on it, as make run does)."""
    import psutil

    if not EMBEDDED:
        return []
    from config.embedded_db import DATA_DIR

    try:
        master = int((DATA_DIR / "postmaster.pid").read_text().split()[0])
        tree = [psutil.Process(master), *psutil.Process(master).children()]
    except (OSError, ValueError, psutil.NoSuchProcess):
        return []
    return [{"pid": p.pid, "kind": "embedded PostgreSQL", "role": " ".join(p.cmdline())[:40],
             "rss": p.memory_info().rss, "pss": footprint.pss(p.pid)} for p in tree]


def memory_lines(title: str, rows: list[dict]) -> list[str]:
    by = collections.OrderedDict()
    for row in sorted(rows, key=lambda r: (r["kind"], r["role"], r["pid"])):
        by.setdefault((row["kind"], row["role"]), []).append(row)
    table = [[kind, part, len(group), sum(r["rss"] for r in group) / MIB, max(r["rss"] for r in group) / MIB,
              sum(r["pss"] for r in group) / MIB] for (kind, part), group in by.items()]
    table.append(["all", "", len(rows), sum(r["rss"] for r in rows) / MIB, max((r["rss"] for r in rows), default=0) / MIB,
                  sum(r["pss"] for r in rows) / MIB])
    return [title, common.table(["processes of", "role", "n", "RSS MiB", "largest", "PSS MiB"], table)]


def cpu_by_pid(labels: dict[int, str]) -> dict[int, tuple[str, float, float]]:
    """pid -> (its label, its CPU seconds so far, those of its children that ended and it reaped)."""
    import psutil

    seen = {}
    for pid, label in labels.items():
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        seen[pid] = (label, times.user + times.system, times.children_user + times.children_system)
    return seen


def cpu_spent(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds by label between two `cpu_by_pid` readings. A process that started meanwhile
    counts whole; one that ended counts through its parent's reaped children (django-q2 recycles
    a worker after 500 tasks: the sentinel reaps it), under the label of the parent's workers. A
    PostgreSQL backend that ended meanwhile (its worker recycled) is not counted."""
    spent: dict[str, float] = collections.Counter()
    for pid, (label, own, reaped) in after.items():
        _, own_before, reaped_before = before.get(pid, (label, 0.0, 0.0))
        spent[label] += own - own_before
        if reaped > reaped_before:
            spent[label.replace("(master, sentinel, monitor, pusher)", "workers")] += reaped - reaped_before
    return spent


def backends(url: str) -> list[int]:
    """The PostgreSQL backends connected to this run's database (same machine: their CPU is read)."""
    name = checkout.database_name(url)
    return [row[0] for row in checkout.query(
        url, "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [name])]


def moderation_workers(rows: list[dict]) -> dict:
    """The django-q2 workers of the moderation cluster (each with the model loaded): how many,
    and the median and largest of their RSS and PSS (bytes)."""
    workers = [row for row in rows if row["kind"] == "moderation cluster" and row["role"] == "worker"]
    if not workers:
        return {"n": 0, "rss": 0, "rss_max": 0, "pss": 0, "pss_max": 0}
    return {"n": len(workers), "rss": statistics.median(r["rss"] for r in workers), "rss_max": max(r["rss"] for r in workers),
            "pss": statistics.median(r["pss"] for r in workers), "pss_max": max(r["pss"] for r in workers)}


def tier(row: dict) -> str:
    if row["kind"] == "granian":
        return "web (granian)"
    if row["kind"].endswith("cluster"):
        return f"{row['kind']} {'workers' if row['role'] == 'worker' else '(master, sentinel, monitor, pusher)'}"
    return row["kind"]


class Ceiling:
    """bench.ceiling_asgi under web_command's granian, the platform's worker count and env."""

    def __init__(self, code: checkout.Checkout, env: dict, workers: int):
        from lab.race_lab import free_port

        self.port = free_port()
        self.code, self.env, self.workers = code, env, workers
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Ceiling:
        from lab.race_lab import wait_until_serving

        # The command line as the platform's settings make it (its environment, not the driver's).
        argv = self.code.python(self.env["DATABASE_URL"], (
            "from moderation.management.web import web_command\n"
            "print(json.dumps(web_command('127.0.0.1', data[0], workers=data[1], app='bench.ceiling_asgi:application')))"
        ), [self.port, self.workers], env={k: v for k, v in self.env.items() if k != "DATABASE_URL"})
        self.process = subprocess.Popen(argv, cwd=self.code.path, env={**self.env, "PORT": str(self.port)},
                                        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_serving(self.port)
        return self

    def __exit__(self, *exc) -> None:
        from moderation.management.processes import stop_groups

        stop_groups({"ceiling": self.process}, grace_s=30)


# --- profiling --------------------------------------------------------------------------------------


class Profiler:
    """py-spy record on every Python process of the tree (on-CPU samples), stopped with SIGINT."""

    RATE = 50

    def __init__(self, directory: Path, rows: list[dict]):
        self.directory, self.rows, self.spies = directory, rows, []

    def __enter__(self) -> Profiler:
        binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(binary).exists():
            raise SystemExit("py-spy is not installed: pip install py-spy")
        self.directory.mkdir(parents=True, exist_ok=True)
        for row in self.rows:
            out = self.directory / f"{tier(row).split(' (')[0].replace(' ', '-')}-{row['role']}-{row['pid']}.txt"
            self.spies.append((row, out, subprocess.Popen(
                [binary, "record", "--pid", str(row["pid"]), "--rate", str(self.RATE), "--format", "raw",
                 "--nonblocking", "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        return self

    def __exit__(self, *exc) -> None:
        for _, _, spy in self.spies:
            spy.send_signal(signal.SIGINT)
        for _, _, spy in self.spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()

    def summary(self, top: int = 8) -> list[str]:
        """Per tier: on-CPU seconds sampled, their share by what runs (the innermost frame that
        belongs to a known part: CATEGORIES) and the leaf functions with the most samples."""
        lines = []
        by_tier: dict[str, list[Path]] = collections.defaultdict(list)
        for row, out, _ in self.spies:
            by_tier[tier(row)].append(out)
        for name, files in sorted(by_tier.items()):
            total, parts, leaves = 0, collections.Counter(), collections.Counter()
            for file in files:
                if not file.exists():
                    continue
                for line in file.read_text().splitlines():
                    stack, _, count = line.rpartition(" ")
                    if not count.isdigit():
                        continue
                    frames = stack.split(";")
                    total += int(count)
                    parts[category(frames)] += int(count)
                    leaves[_frame(frames[-1])] += int(count)
            if not total:
                continue
            lines.append(f"py-spy, {name}: {total / self.RATE:.1f} s on CPU sampled; "
                         + ", ".join(f"{part} {100 * n / total:.0f}%" for part, n in parts.most_common()))
            lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in leaves.most_common(top)]
        return lines


# What a sample was doing: the innermost frame that matches, in this order of precedence.
CATEGORIES = [
    ("the model", ("moderation/providers/local", "numpy/", "moderation/text/")),
    ("database driver", ("psycopg/", "psycopg_pool/")),
    ("ORM", ("django/db/",)),
    ("logging", ("logging/", "audit/logging")),
    ("django-q2", ("django_q/",)),
    ("DRF", ("rest_framework/",)),
    ("Django", ("django/",)),
    ("the web stack", ("config/asgi", "config/fair_queue", "granian/", "asyncio/")),
    ("project", ("moderation/", "audit/", "callbacks/", "config/")),
]


def category(frames: list[str]) -> str:
    for frame in reversed(frames):
        where = frame.partition(" (")[2]
        for name, markers in CATEGORIES:
            if any(marker in where for marker in markers):
                return name
    return "other (standard library)"


def _frame(frame: str) -> str:
    """`function (path/to/file.py:line)` -> `function (file path from its package)`."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", str(common.ROOT) + "/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


def sql_counts(directory: Path, kinds: dict[int, str]) -> dict[str, collections.Counter]:
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for file in directory.glob("*.json"):
        counts = json.loads(file.read_text())
        out[kinds.get(int(file.stem), "other")].update(counts)
    return out


# --- the run ----------------------------------------------------------------------------------------


def run(args, code: checkout.Checkout, *, full: bool = True) -> dict:
    """One checkout's run: everything (`full`), or (another checkout, --before) its model, idle and end to end."""
    model = (local_model.measure(code, texts=args.model_texts, rounds=args.model_rounds)  # the machine quiet
             if args.model_texts > 0 else None)
    url = code.database("shipped")
    client_id, token = code.create_client(url, "bench-shipped")
    count_dir = Path(tempfile.mkdtemp(prefix="bench-sqlcount-")) if args.profile and full else None
    env = {"THROTTLE_CLIENT_RATE": "10000000/min", "THROTTLE_CALLBACK_RATE": "10000000/min", **SHIPPED_DEFAULTS,
           **(dict(pair.split("=", 1) for pair in args.env) if full else {})}  # --env: this checkout's run only
    if count_dir:
        env.update(BENCH_SQL_COUNT_DIR=str(count_dir),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(SQLCOUNT), os.environ.get("PYTHONPATH")])))
    sizes = code.python(url, "from django.conf import settings\nprint(json.dumps([settings.WEB_CONCURRENCY, "
                             "settings.Q_WORKERS, settings.NOTIFY_WORKERS]))", None)
    result: dict = {"sizes": sizes, "client": client_id, "model": model}
    log = open(Path(tempfile.gettempdir()) / f"bench-shipped-{os.getpid()}.log", "w")
    result["log"] = log.name
    with footprint.RunPlatform(code, url, env=env, log=log) as platform:
        # run_platform's output (INFO logs, as shipped) goes to a file, not the bench's report.
        time.sleep(args.idle_s)
        result["idle"] = processes(platform.process.pid)
        result["postgres_idle"] = embedded_postgres()

        # End to end, with the CPU of every tier read before and after.
        warm = wrk.submissions(platform.port, token, tag="warm", count=4 * (sizes[0] + sizes[1]), texts=TEXTS,
                               connections=args.connections)
        e2e.wait_final(url, None, args.timeout, warm.requests)
        rows = processes(platform.process.pid)
        labels = {row["pid"]: tier(row) for row in rows}
        kinds = dict(labels)
        labels.update({pid: "PostgreSQL backends" for pid in backends(url)})
        before_cpu, before_db = cpu_by_pid(labels), _db_counters(url)
        started = checkout.query(url, "SELECT now()")[0][0]
        spy = Profiler(Path(args.profile), rows) if args.profile and full else None
        sql_before = sql_counts(count_dir, kinds) if count_dir else None
        if spy:
            spy.__enter__()
        wall = time.monotonic()
        wrk_cpu = _children_cpu()
        load = wrk.submissions(platform.port, token, tag="run", count=args.reviews, texts=TEXTS,
                               connections=args.connections, max_seconds=args.timeout)
        ids, waited = e2e.wait_final(url, started, args.timeout, load.ok)
        wrk_cpu = _children_cpu() - wrk_cpu
        if spy:
            spy.__exit__()
        result["after_e2e"] = processes(platform.process.pid)
        kinds.update({row["pid"]: tier(row) for row in result["after_e2e"]})  # and the new ones
        labels.update(kinds)
        labels.update({pid: "PostgreSQL backends" for pid in backends(url)})
        after_cpu, after_db = cpu_by_pid(labels), _db_counters(url)
        final, window = e2e.finished(url, started)
        result["e2e"] = {
            "reviews": len(ids), "final": final, "window_s": window, "wall_s": time.monotonic() - wall,
            "rate": final / window if window and final == len(ids) else 0.0, "rate_final": final / window if window else 0.0,
            "submit_rate": load.rate, "submit_p99": load.p99_ms, "submit_errors": load.describe_errors(),
            "cpu": cpu_spent(before_cpu, after_cpu) | {"wrk (the load)": wrk_cpu},
            "db": {k: after_db[k] - before_db.get(k, 0) for k in after_db},
        }
        if spy:
            result["profile"] = spy.summary()
        if count_dir:
            after_sql = sql_counts(count_dir, kinds)
            result["sql"] = {k: {m: v[m] - sql_before.get(k, collections.Counter())[m] for m in v}
                             for k, v in after_sql.items()}
        named = list(ids)

        if full:
            # Callbacks at each level, then the ceiling under the same server.
            result["callbacks"], result["ceiling"] = [], {}
            rng = random.Random(1)
            per_level = int(args.callbacks * 0.7 * 1.2) + 10
            levels = [int(x) for x in args.levels.split(",")]
            seeded = code.seed_processing(url, client_id, per_level * (len(levels) * 2 + 1), "shipped-")
            checkout.query(url, "UPDATE moderation_content SET language = 'en', language_candidates = '[[\"en\", 1.0]]' "
                                "WHERE language_candidates IS NULL")
            checkout.query(url, "ANALYZE")
            with tempfile.TemporaryDirectory() as tmp:
                file = Path(tmp) / "requests"
                warm_cb, used = ingest.signed_requests(seeded[:per_level][:50], 50, 0, rng, tag="warm")
                named += used
                wrk.write_requests(warm_cb, file)
                wrk.requests_file(platform.port, file, connections=max(levels))
                for n, level in enumerate(levels):
                    mine = seeded[per_level * (n + 1):per_level * (n + 2)]
                    prepared, used = ingest.signed_requests(mine, args.callbacks, 0.3, rng, tag=f"c{level}")
                    named += used
                    wrk.write_requests(prepared, file)
                    cb = wrk.requests_file(platform.port, file, connections=level, max_seconds=120)
                    result["callbacks"].append({"connections": level, "rate": cb.rate, "p50": cb.p50_ms, "p99": cb.p99_ms,
                                                "errors": cb.describe_errors()})
                    print(f"  callbacks at {level} connections: {cb.rate:.1f} req/s, p99 {cb.p99_ms:.1f} ms", flush=True)
                finalized = checkout.query(url, "SELECT count(*) FROM moderation_contentreview WHERE id = ANY(%s::uuid[]) "
                                                "AND status = ANY(%s)", [named[len(ids):], list(common.FINAL)])[0][0]
                result["callbacks_finalized"] = (finalized, len(named) - len(ids))

                ceiling_env = {k: v for k, v in platform.env.items() if k not in ("BENCH_SQL_COUNT_DIR", "PYTHONPATH")}
                with Ceiling(code, ceiling_env, sizes[0]) as ceiling:
                    path = f"/bench/ceiling/reviews/?client={client_id}"
                    wrk.submissions(ceiling.port, token, tag="ceiling-warm", count=8 * sizes[0], texts=TEXTS,
                                    connections=args.connections, path=path)
                    top = wrk.submissions(ceiling.port, token, tag="ceiling", count=args.reviews, texts=TEXTS,
                                          connections=args.connections, path=path)
                    result["ceiling"]["submissions"] = {"rate": top.rate, "p99": top.p99_ms, "errors": top.describe_errors()}
                    result["ceiling"]["callbacks"] = []
                    offset = per_level * (len(levels) + 1)
                    for n, level in enumerate(levels):
                        theirs = seeded[offset + per_level * n:offset + per_level * (n + 1)]
                        prepared, _ = ingest.signed_requests(theirs, args.callbacks, 0.3, rng, tag=f"top{level}",
                                                             path="/bench/ceiling/callback/")
                        wrk.write_requests(prepared, file)
                        cb = wrk.requests_file(ceiling.port, file, connections=level, max_seconds=120)
                        result["ceiling"]["callbacks"].append({"connections": level, "rate": cb.rate, "p99": cb.p99_ms,
                                                               "errors": cb.describe_errors()})
        time.sleep(args.idle_s)
        result["after"] = processes(platform.process.pid)
    log.close()
    result["violations"] = code.violations(url, named)
    if not full:
        checkout.drop(url)
        return result

    # pgbench on the paths' SQL, the platform stopped.
    policy = checkout.query(url, "SELECT id FROM moderation_moderationpolicy ORDER BY version DESC LIMIT 1")[0][0]
    result["pgbench"] = {
        "e2e": common.pgbench(url, e2e.PGBENCH_SCRIPT, clients=args.connections, seconds=args.pgbench_seconds,
                              defines={"client": client_id, "policy": policy})[0],
        "submissions": common.pgbench(url, submit.PGBENCH_SCRIPT, clients=args.connections,
                                      seconds=args.pgbench_seconds, defines={"client": client_id})[0],
    }
    pg_reviews = code.seed_processing(url, client_id, 20_000, "pgbench-")
    checkout.query(url, "CREATE TABLE bench_pgbench_review (n integer PRIMARY KEY, id uuid NOT NULL)")
    checkout.query(url, "INSERT INTO bench_pgbench_review SELECT ordinality, id FROM unnest(%s::uuid[]) "
                        "WITH ORDINALITY AS t(id)", [[r for r, _ in pg_reviews]])
    best = max(result["callbacks"], key=lambda level: level["rate"])
    result["pgbench"]["callbacks"] = ingest._pgbench(url, best["connections"], args.pgbench_seconds,
                                                     len(pg_reviews), 0.3)[0]
    if count_dir:
        shutil.rmtree(count_dir, ignore_errors=True)
    if not args.keep:
        checkout.drop(url)
    return result


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _db_counters(url: str) -> collections.Counter:
    """Transactions of the run's database and the rows written to each of its tables."""
    name = checkout.database_name(url)
    counters = collections.Counter()
    (commits,) = checkout.query(url, "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name])[0]
    counters["transactions"] = commits
    for table, written in checkout.query(url, "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del "
                                              "FROM pg_stat_user_tables"):
        counters[f"rows written: {table}"] = written
    return counters


# --- the report -------------------------------------------------------------------------------------


def describe(result: dict, args) -> list[str]:
    e, pg, top = result["e2e"], result["pgbench"], result["ceiling"]
    best = max(result["callbacks"], key=lambda level: level["rate"])
    top_cb = next(c for c in top["callbacks"] if c["connections"] == best["connections"])
    idle = sum(r["rss"] for r in result["idle"]) / MIB
    n = max(e["final"], 1)
    rate = f"{e['rate']:.1f}" if e["rate"] else f"incomplete ({e['rate_final']:.1f} for the final ones)"
    lines = [
        f"The platform as shipped (run_platform: {result['sizes'][0]} web, {result['sizes'][1]} moderation and "
        f"{result['sizes'][2]} notification workers), {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}",
        "",
        common.table(["figure", "measured", "p99 ms", "goal", "beside it, same run", "ratio"], [
            ["end to end, reviews/s", rate, "", f">= {GOALS['e2e']:.0f}", f"pgbench, the path's SQL: {pg['e2e']:.0f}",
             common.ratio(e["rate"], pg["e2e"])],
            ["submissions during e2e, req/s", e["submit_rate"], e["submit_p99"],
             f">= {GOALS['submissions']:.0f}, p99 < 100", f"ceiling {top['submissions']['rate']:.0f} "
             f"(p99 {top['submissions']['p99']:.0f}); pgbench {pg['submissions']:.0f}",
             common.ratio(e["submit_rate"], top["submissions"]["rate"])],
            [f"callbacks, req/s (best: {best['connections']} conn.)", best["rate"], best["p99"],
             f">= {GOALS['callbacks']:.0f}, p99 < 100", f"ceiling {top_cb['rate']:.0f} (p99 {top_cb['p99']:.0f}); "
             f"pgbench {pg['callbacks']:.0f}", common.ratio(best["rate"], top_cb["rate"])],
            ["make run idle, RSS MiB", idle, "", f"<= {GOALS['idle_mib']:.0f}",
             f"PSS {sum(r['pss'] for r in result['idle']) / MIB:.0f} MiB, {len(result['idle'])} processes", ""],
            ["invariant violations", len(result["violations"]), "", "0", "", ""],
        ]),
        "",
        f"end to end: {e['reviews']} reviews from {args.connections} connections, {e['final']} final, "
        f"{e['window_s']:.1f} s first submitted -> last final; submissions non-2xx/errors {e['submit_errors']}",
        "callbacks: " + "; ".join(f"{c['connections']} conn. {c['rate']:.0f} req/s p99 {c['p99']:.0f} ms "
                                  f"(ceiling {t['rate']:.0f}, errors {c['errors']})"
                                  for c, t in zip(result["callbacks"], top["callbacks"], strict=True))
        + f"; reviews finalized {result['callbacks_finalized'][0]} of {result['callbacks_finalized'][1]} named",
        "",
        f"CPU per review during the end-to-end load ({e['wall_s']:.1f} s wall, {os.cpu_count()} CPUs = "
        f"{1000 * e['wall_s'] * (os.cpu_count() or 1) / n:.2f} ms of CPU per review available):",
        common.table(["tier", "CPU s", "ms per review", "share"], [
            [k, v, 1000 * v / n, f"{100 * v / max(sum(e['cpu'].values()), 1e-9):.0f}%"]
            for k, v in sorted(e["cpu"].items(), key=lambda kv: -kv[1])]),
        "database per review: " + ", ".join(
            f"{k.removeprefix('rows written: ')} {v / n:.2f}" for k, v in sorted(e["db"].items(), key=lambda kv: -kv[1])
            if v / n >= 0.05),
    ]
    if "sql" in result:
        lines.append("SQL per review (statements, commits; bench/sqlcount): " + "; ".join(
            f"{k}: {v.get('statements', 0) / n:.1f}, {v.get('commits', 0) / n:.1f}"
            for k, v in sorted(result["sql"].items())))
    lines += ["", *memory_lines("make run at idle, fresh (every process of run_platform's tree):", result["idle"])]
    if result["postgres_idle"]:
        lines += memory_lines("the embedded PostgreSQL at idle (make run's database, not in the sum above):",
                              result["postgres_idle"])
    after = sum(r["rss"] for r in result["after"]) / MIB
    lines.append(f"after the run, idle again: RSS {after:.0f} MiB summed over {len(result['after'])} processes "
                 f"(largest {max(r['rss'] for r in result['after']) / MIB:.0f} MiB)")
    lines += model_lines(result)
    lines += result.get("profile", [])
    lines += [f"  violation: {v}" for v in result["violations"][:10]]
    lines.append(f"(run_platform's output: {result['log']})")
    return lines


def _workers_mib(rows: list[dict]) -> str:
    w = moderation_workers(rows)
    return (f"RSS {w['rss'] / MIB:.0f} (largest {w['rss_max'] / MIB:.0f}), PSS {w['pss'] / MIB:.0f} "
            f"(largest {w['pss_max'] / MIB:.0f}) MiB, {w['n']} workers") if w["n"] else "no moderation worker seen"


def model_lines(result: dict) -> list[str]:
    """The model's figures and the moderation workers' memory, for one checkout."""
    lines = []
    if result.get("model"):
        lines.append("the model: " + local_model.describe(result["model"]))
    lines.append(f"a moderation worker (the model loaded), median over the cluster's workers: at idle "
                 f"{_workers_mib(result['idle'])}; right after the end-to-end load {_workers_mib(result['after_e2e'])}")
    return lines


def before_after(before: dict, after: dict, commits: tuple[str, str]) -> list[str]:
    """The figures of the two checkouts of one run side by side (issue 47: the model change)."""
    def per_worker(result: dict, key: str, when: str) -> float:
        return moderation_workers(result[when])[key] / MIB

    def model(result: dict, key: str) -> float | str:
        return result["model"][key] if result.get("model") else "-"

    rows = [
        ["end to end, reviews/s", before["e2e"]["rate"], after["e2e"]["rate"]],
        ["the model: short texts/s, one core", model(before, "texts_per_s"), model(after, "texts_per_s")],
        ["the model: RSS a process gains loading it, MiB", model(before, "grown_mib"), model(after, "grown_mib")],
        ["moderation worker RSS MiB (median), after the load", per_worker(before, "rss", "after_e2e"),
         per_worker(after, "rss", "after_e2e")],
        ["moderation worker PSS MiB (median), after the load", per_worker(before, "pss", "after_e2e"),
         per_worker(after, "pss", "after_e2e")],
        ["moderation worker RSS MiB (median), idle", per_worker(before, "rss", "idle"), per_worker(after, "rss", "idle")],
        ["moderation worker PSS MiB (median), idle", per_worker(before, "pss", "idle"), per_worker(after, "pss", "idle")],
        ["make run idle, RSS MiB (all processes)", sum(r["rss"] for r in before["idle"]) / MIB,
         sum(r["rss"] for r in after["idle"]) / MIB],
        ["make run idle, PSS MiB (all processes)", sum(r["pss"] for r in before["idle"]) / MIB,
         sum(r["pss"] for r in after["idle"]) / MIB],
    ]
    table = [[name, b, a, common.ratio(a, b) if isinstance(a, float) and isinstance(b, float) else ""]
             for name, b, a in rows]
    models = " -> ".join(r["model"]["model"] if r.get("model") else "?" for r in (before, after))
    return [f"before ({commits[0]}) and after ({commits[1]}), same run ({models}):",
            common.table(["figure", f"before {commits[0]}", f"after {commits[1]}", "after / before"], table)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=3000, help="reviews submitted in the end-to-end run")
    parser.add_argument("--connections", type=int, default=4, help="wrk connections for the submissions")
    parser.add_argument("--callbacks", type=int, default=3000, help="callbacks per level")
    parser.add_argument("--levels", default="4,8,16", help="callback concurrencies (the best counts)")
    parser.add_argument("--idle-s", type=float, default=20, help="seconds after ready before idle is read")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for the reviews to be final")
    parser.add_argument("--profile", metavar="DIR", help="py-spy every process and count SQL during the e2e load")
    parser.add_argument("--keep", action="store_true", help="keep the run's database")
    parser.add_argument("--model-texts", type=int, default=20000,
                        help="texts the model scores per round for its texts/s on one core (0: not measured)")
    parser.add_argument("--model-rounds", type=int, default=3, help="rounds of the model's speed and memory (median)")
    parser.add_argument("--before", metavar="REF_OR_DIR",
                        help="first measure idle and end to end of another checkout (a directory, or a git ref "
                             "exported to a temporary one) in the same run, e.g. the commit before a change")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting changed from make run's, in this checkout's run (not --before's): to measure a "
                             "lever, e.g. --before . --env WEB_ACCESS_LOG=1")
    args = parser.parse_args()
    if any("=" not in pair for pair in args.env):
        parser.error("--env takes NAME=VALUE")
    common.setup_driver()
    wrk.ensure()
    print(f"bench.shipped: {checkout.this().commit}, database server "
          f"{'embedded (pgserver, as make run without DATABASE_URL)' if EMBEDDED else 'DATABASE_URL'}"
          + (f", changed: {' '.join(args.env)}" if args.env else ""), flush=True)
    began = time.monotonic()
    before = None
    if args.before:
        other, why = (checkout.now(directory=args.before) if Path(args.before).is_dir()
                      else checkout.now(ref=args.before))
        if other is None:
            parser.error(f"--before: {why}")
        try:
            print(f"--before {args.before} ({other.commit}) runs on {other.executable}", flush=True)
        except checkout.VenvError as error:
            parser.error(f"--before: {error}")
        before = run(args, other, full=False)
    result = run(args, checkout.this())
    print("\n".join(describe(result, args)))
    if before:
        e, b = result["e2e"], before["e2e"]
        print(f"\nbefore ({other.commit}), same run: end to end {b['rate']:.1f} reviews/s (this checkout "
              f"{e['rate']:.1f}: ratio {common.ratio(e['rate'], b['rate'])}), submissions {b['submit_rate']:.1f} req/s "
              f"p99 {b['submit_p99']:.0f} ms, idle RSS {sum(r['rss'] for r in before['idle']) / MIB:.0f} MiB over "
              f"{len(before['idle'])} processes, {len(before['violations'])} invariant violations")
        print("\n".join(["", *model_lines(before), "", *before_after(before, result, (other.commit, checkout.this().commit))]))
    print(f"({(time.monotonic() - began) / 60:.1f} min)")


if __name__ == "__main__":
    main()
