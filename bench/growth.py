"""Growth: the hot paths timed as the tables grow to 10k, 100k and 1M existing reviews, with
their query counts and the plan of every statement they run.

    python -m bench.growth [--sizes 10000,100000,1000000] [--ops 200] [--rounds 5] [--reuse]
                           [--keys v7] [--database moderation_bench]

The existing reviews are what the pipeline leaves behind for each decided review: content,
review, its completed request, the decision and its outbox row, the applied callback, two
transitions and three history rows (bench/common.py `seed_decided`, in SQL). At each size:

- claim: `review_claim` on a pending review (row lock, new request, transition, history);
- finalize: `review_finalize` of the live result (lock by key, decision, outbox, transition...);
- callback: the callback endpoint in-process (Django's test client: verify, store, process).

`--keys v4,v7` runs the same with random (version 4) and with time-ordered (version 7,
moderation/db/ids.py) keys for contents, reviews and idempotency keys, both in the seeded rows and in
the rows the paths insert, and prints each kind's growth ratio and the ratio of the two.

Each size and kind of key has a database of its own (<database>_<keys>_<size>). The measurements
then alternate between them, `--rounds` times, each in a fresh process, so that a noisy machine's drift hits
every size alike; each round times `--ops` operations per path after a warm-up, and the figures
are the medians over the rounds. Every SELECT, UPDATE and DELETE a path ran is EXPLAINed: a
sequential scan of a table holding more than 10k rows is reported as a missing index. (INSERTs
are not scans; an upsert's arbiter is its unique index.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench import common

BIG_TABLE_ROWS = 10_000
PATHS = ("claim", "finalize", "callback")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="existing reviews, one database each")
    parser.add_argument("--ops", type=int, default=200, help="timed operations per path, size and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prepare", type=int, help=argparse.SUPPRESS)  # internal: seed one size's database
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # internal: one round on one size
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--reuse", action="store_true", help="measure the databases an earlier run seeded")
    parser.add_argument("--keys", default="v7", help="v4, v7 or v4,v7: the kind of UUID keys (see above)")
    parser.add_argument("--database", default=common.BENCH_DB, help="prefix of the databases this run (re)creates")
    args = parser.parse_args()
    kinds = args.keys.split(",")
    if not kinds or any(kind not in KEYS for kind in kinds):
        parser.error(f"--keys: a comma-separated list of {', '.join(KEYS)}")
    if args.prepare:
        return _prepare(args.database, kinds[0], args.prepare)
    if args.measure:
        return _measure_round(args.database, kinds[0], args.measure, args.ops, args.round)
    sizes = [int(x) for x in args.sizes.split(",")]
    common_args = ("--database", args.database)

    for kind in [] if args.reuse else kinds:
        for size in sizes:
            print(child("--prepare", size, "--keys", kind, *common_args).strip(), flush=True)
    results: dict[tuple[str, int, str], list[dict]] = {}
    cells = [(kind, size) for kind in kinds for size in sizes]
    for round_no in range(args.rounds):
        for kind, size in cells[round_no % len(cells):] + cells[:round_no % len(cells)]:
            measured = json.loads(child("--measure", size, "--ops", args.ops, "--round", round_no, "--keys", kind,
                                         *common_args))
            for path, figures in measured.items():
                results.setdefault((kind, size, path), []).append(figures)
        print(f"round {round_no + 1} of {args.rounds} done", flush=True)

    ratios = {}
    for kind in kinds:
        rows = report(f"Hot paths as the tables grow, {kind} keys (in-process; ms per operation; medians of "
                      f"{args.rounds} alternating rounds of {args.ops} operations)", sizes, PATHS,
                      {(size, path): rounds for (k, size, path), rounds in results.items() if k == kind})
        for path in PATHS:
            small = next(r[3] for r in rows if r[0] == f"{sizes[0]:,}" and r[1] == path)
            large = next(r[3] for r in rows if r[0] == f"{sizes[-1]:,}" and r[1] == path)
            ratios[kind, path] = large / small
            print(f"{kind} {path}: p50 at {sizes[-1]:,} / p50 at {sizes[0]:,} = {large / small:.2f} (target <= 1.25)")
    if len(kinds) == 2:
        for path in PATHS:
            print(f"{path}: growth with {kinds[1]} keys / growth with {kinds[0]} keys = "
                  f"{ratios[kinds[1], path] / ratios[kinds[0], path]:.2f}")


def report(title: str, sizes: list[int], paths, results: dict[tuple[int, str], list[dict]], *,
           unit: str = "reviews") -> list[list]:
    """Print the medians per size and path, the plans at the largest size, and any sequential
    scan of a large table; return the table's rows."""
    rows, flagged = [], []
    for size in sizes:
        for path in paths:
            rounds = results[(size, path)]
            rows.append([f"{size:,}", path, rounds[0]["statements"], statistics.median(r["p50"] for r in rounds),
                         statistics.median(r["p95"] for r in rounds)])
            flagged += [(size, path, sql, scan) for sql, scans in rounds[0]["plans"] for scan in scans
                        if scan[0] == "Seq Scan" and scan[2] > BIG_TABLE_ROWS]
    print(f"\n{title}")
    print(common.table([unit, "path", "statements", "p50 ms", "p95 ms"], rows))
    print(f"\nPlans at {sizes[-1]:,} {unit} (every SELECT/UPDATE/DELETE each path ran; scans only)")
    for path in paths:
        print(f"{path}:")
        for sql, scans in results[(sizes[-1], path)][0]["plans"]:
            described = "; ".join(f"{kind} on {table}" + (f" using {index}" if index else "")
                                  for kind, table, _, index in scans) or "no table scan"
            print(f"  {sql}\n      -> {described}")
    if flagged:
        print("\nSEQUENTIAL SCANS of large tables:")
        for size, path, sql, scan in flagged:
            print(f"  {size:,} {path}: {scan[0]} on {scan[1]} (~{scan[2]:,} rows): {sql}")
    else:
        print(f"\nEvery statement of every path used an index on each table over {BIG_TABLE_ROWS:,} rows, at every size.")
    return rows


def child(*args, module: str = "bench.growth", timeout: float = 3600) -> str:
    """Run `python -m module args...` (one size's seeding or one round) and return its output."""
    run = subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=common.ROOT,
                         capture_output=True, text=True, env=os.environ, timeout=timeout)
    if run.returncode:
        raise SystemExit(f"{module} {' '.join(map(str, args))} failed:\n{run.stderr}")
    return run.stdout


def _database(prefix: str, kind: str, size: int) -> str:
    return f"{prefix}_{kind}_{size}"


# A version 7 UUID in SQL (PostgreSQL 15 has no uuidv7()): a random one with its first 48 bits
# replaced by the clock in milliseconds and its version nibble set to 7 (bits 52 and 53 of the
# bytes, counted from the least significant bit of each byte, turn 0100 into 0111).
_UUID7_SQL = """
CREATE OR REPLACE FUNCTION bench_uuid7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
    FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$
"""
KEYS = ("v4", "v7")


def _use_keys(kind: str) -> None:
    """Make the seeding SQL and the models' defaults produce `kind` keys in this process."""
    import uuid

    from moderation.models import Content, ContentReview, ModerationRequest

    common.sql(_UUID7_SQL)
    if kind == "v7":
        for name in ("_SEED_DECIDED", "_SEED_PENDING", "_SEED_PROCESSING"):
            setattr(common, name, getattr(common, name).replace("gen_random_uuid()", "bench_uuid7()"))
    else:
        for model, field in ((Content, "id"), (ContentReview, "id"), (ModerationRequest, "idempotency_key")):
            model._meta.get_field(field).default = uuid.uuid4


def _prepare(prefix: str, kind: str, size: int) -> None:
    started = time.monotonic()
    name = _database(prefix, kind, size)
    common.setup(name=name)
    _use_keys(kind)
    client_id, _ = common.bench_client("growth")
    common.seed_decided(client_id, size, tag="g-")
    common.sql("VACUUM ANALYZE")
    print(f"{name}: {size:,} decided reviews seeded in {time.monotonic() - started:.0f} s")


def _measure_round(prefix: str, kind: str, size: int, ops: int, round_no: int) -> None:
    common.setup(name=_database(prefix, kind, size), recreate=False, env={"THROTTLE_CALLBACK_RATE": "10000000/min"})
    _use_keys(kind)
    from moderation.models import ApiClient

    client_id = ApiClient.objects.get(name__startswith="growth-").pk
    out = {}
    for path, timings, statements in _measure(client_id, ops, tag=f"r{round_no}-{common.token()}-"):
        out[path] = {
            "p50": common.percentile(timings, 50), "p95": common.percentile(timings, 95),
            "statements": len(statements),
            "plans": [(shortened(sql), plan_scans(sql, params)) for sql, params in statements if _explainable(sql)],
        }
    print(json.dumps(out))


def _measure(client_id: int, ops: int, tag: str):
    from django.test import Client

    from moderation.signing import sign
    from moderation.models import Cause
    from moderation.providers import ModerationResult
    from moderation.services import review_claim, review_finalize

    warmup = 30
    pending = common.seed_pending(client_id, ops + warmup, tag + "claim-")
    processing = common.seed_processing(client_id, ops + warmup, tag + "cb-")
    common.sql("ANALYZE")

    def timed(func, items):
        return time_calls(func, items, warmup=warmup)

    requests = []
    yield ("claim", *timed(lambda review_id: requests.append(review_claim(review_id=review_id, worker_id="bench")),
                          pending))
    result = ModerationResult(model="bench", flagged=False, categories={"profanity": False},
                              category_scores={"profanity": 0.01})

    def finalize(request):
        outcome = review_finalize(idempotency_key=request.idempotency_key, result=result, cause=Cause.PROVIDER_RESULT)
        assert outcome == "applied", outcome

    yield ("finalize", *timed(finalize, requests))
    http = Client()

    def callback(item):
        review_id, key = item
        body = common.callback_body(key, f"sim-{review_id}")
        answer = http.post("/api/v1/callbacks/webhook/", data=body, content_type="application/json",
                           headers=sign(common.WEBHOOK_SECRET, event_id=f"evt-{tag}{review_id}", body=body))
        assert answer.status_code == 200 and answer.json()["outcome"] == "applied", answer.content

    yield ("callback", *timed(callback, processing))


def time_calls(func, items: list, *, warmup: int) -> tuple[list[float], list[tuple]]:
    """Call func on each item: the first `warmup` untimed, the next one with its statements
    recorded, the rest timed. Returns (milliseconds per call, the recorded (sql, params))."""
    from django.db import connection

    for item in items[:warmup]:
        func(item)
    statements = []

    def record(execute, sql, params, many, context):
        if not sql.startswith(("SAVEPOINT", "RELEASE")):
            statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        func(items[warmup])
    timings = []
    for item in items[warmup + 1:]:
        started = time.perf_counter()
        func(item)
        timings.append((time.perf_counter() - started) * 1000)
    return timings, statements


def _explainable(query: str) -> bool:
    head = query.lstrip().split(None, 1)[0].upper()
    return head in ("SELECT", "UPDATE", "DELETE") or (head == "INSERT" and " SELECT " in query.upper())


def plan_scans(query: str, params) -> list[tuple[str, str, int, str]]:
    """(node type, table, estimated rows in the table, index) for each scan in the plan."""
    plan = common.sql("EXPLAIN (FORMAT JSON) " + query, params)[0][0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    scans = []

    def walk(node):
        if "Relation Name" in node:
            table = node["Relation Name"]
            rows = common.sql("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [table])[0][0]
            # A bitmap heap scan reads the indexes its bitmap index scans (its children) name.
            index = node.get("Index Name") or " and ".join(
                child["Index Name"] for child in _descendants(node) if child["Node Type"] == "Bitmap Index Scan")
            scans.append((node["Node Type"], table, max(rows, 0), index))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return scans


def _descendants(node: dict):
    for child in node.get("Plans", []):
        yield child
        yield from _descendants(child)


def shortened(query: str, width: int = 110) -> str:
    text = " ".join(query.split())
    return text if len(text) <= width else text[:width - 3] + "..."


if __name__ == "__main__":
    main()
