"""Growth: the hot paths timed as the tables grow to 10k, 100k and 1M existing reviews, with
their query counts and the plan of every statement they run.

    python -m bench.growth [--sizes 10000,100000,1000000] [--ops 300]

The existing reviews are what the pipeline leaves behind for each decided review: content,
review, its completed request, the decision and its outbox row, the applied callback, two
transitions and three history rows (bench/common.py `seed_decided`, in SQL). At each size:

- claim: `review_claim` on a pending review (row lock, new request, transition, history);
- finalize: `review_finalize` of the live result (lock by key, decision, outbox, transition...);
- callback: the callback endpoint in-process (Django's test client: verify, store, process).

Each path runs `--ops` times after a warm-up; p50/p95 are per operation. Every SELECT, UPDATE
and DELETE a path ran is then EXPLAINed: a sequential scan of a table holding more than 10k rows
is reported as a missing index.
"""

from __future__ import annotations

import argparse
import json
import time

from bench import common

BIG_TABLE_ROWS = 10_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="existing reviews at each step")
    parser.add_argument("--ops", type=int, default=300, help="timed operations per path and size")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]

    common.setup(env={"THROTTLE_CALLBACK_RATE": "10000000/min"})
    client_id, _ = common.bench_client("growth")
    existing, rows, plans, flagged = 0, [], {}, []
    for size in sizes:
        started = time.monotonic()
        common.seed_decided(client_id, size - existing, tag=f"g{size}-")
        existing = size
        common.sql("VACUUM ANALYZE")
        print(f"seeded {size:,} decided reviews in {time.monotonic() - started:.0f} s", flush=True)
        for path, timings, queries in _measure(client_id, args.ops, tag=f"s{size}-"):
            rows.append([f"{size:,}", path, len(queries), common.percentile(timings, 50), common.percentile(timings, 95)])
            plans[path] = [(sql, _scans(sql, params)) for sql, params in queries if _explainable(sql)]
            flagged += [(size, path, q, scan) for q, scans in plans[path] for scan in scans if scan[0] == "Seq Scan"
                        and scan[2] > BIG_TABLE_ROWS]
            print(f"  {path}: {len(queries)} statements, p50 {rows[-1][3]:.2f} ms", flush=True)

    print("\nHot paths as the tables grow (in-process; ms per operation)")
    print(common.table(["reviews", "path", "statements", "p50 ms", "p95 ms"], rows))
    print(f"\nPlans at {sizes[-1]:,} reviews (every SELECT/UPDATE/DELETE each path ran; scans only)")
    for path, statements in plans.items():
        print(f"{path}:")
        for query, scans in statements:
            described = "; ".join(f"{kind} on {table}" + (f" using {index}" if index else "")
                                  for kind, table, _, index in scans) or "no table scan"
            print(f"  {_short(query)}\n      -> {described}")
    if flagged:
        print("\nSEQUENTIAL SCANS of large tables:")
        for size, path, query, scan in flagged:
            print(f"  {size:,} {path}: {scan[0]} on {scan[1]} (~{scan[2]:,} rows): {_short(query)}")
    else:
        print(f"\nEvery statement of every path used an index on tables over {BIG_TABLE_ROWS:,} rows, at every size.")
    first, last = sizes[0], sizes[-1]
    for path in plans:
        small = next(r[3] for r in rows if r[0] == f"{first:,}" and r[1] == path)
        large = next(r[3] for r in rows if r[0] == f"{last:,}" and r[1] == path)
        print(f"{path}: p50 at {last:,} / p50 at {first:,} = {large / small:.2f} (target <= 1.25)")


def _measure(client_id: int, ops: int, tag: str):
    from django.db import connection
    from django.test import Client

    from callbacks.signing import sign
    from moderation.models import Cause
    from moderation.providers import ModerationResult
    from moderation.services import review_claim, review_finalize

    warmup = 30
    pending = common.seed_pending(client_id, ops + warmup, tag + "claim-")
    processing = common.seed_processing(client_id, ops + warmup, tag + "cb-")
    common.sql("ANALYZE")

    def timed(func, items):
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


def _explainable(query: str) -> bool:
    head = query.lstrip().split(None, 1)[0].upper()
    return head in ("SELECT", "UPDATE", "DELETE") or (head == "INSERT" and " SELECT " in query.upper())


def _scans(query: str, params) -> list[tuple[str, str, int, str]]:
    """(node type, table, estimated rows in the table, index) for each scan in the plan."""
    plan = common.sql("EXPLAIN (FORMAT JSON) " + query, params)[0][0]
    plan = plan if isinstance(plan, list) else json.loads(plan)
    scans = []

    def walk(node):
        if "Relation Name" in node:
            table = node["Relation Name"]
            rows = common.sql("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [table])[0][0]
            scans.append((node["Node Type"], table, max(rows, 0), node.get("Index Name", "")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return scans


def _short(query: str, width: int = 110) -> str:
    text = " ".join(query.split())
    return text if len(text) <= width else text[:width - 3] + "..."


if __name__ == "__main__":
    main()
