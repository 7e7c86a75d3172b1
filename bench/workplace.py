"""The moderator's workplace as the tables grow: the review list, the queue page and "review
next", timed at 10k, 100k and 1M existing reviews, with the plan of every statement they run.

    python -m bench.workplace [--sizes 10000,100000,1000000] [--ops 100] [--rounds 3] [--reuse]

Each size has a database of its own (moderation_workplace_<size>), seeded in SQL with decided
reviews as the pipeline leaves them (bench/common.py `seed_decided`), of which one in ten then
waits for a human: its decision becomes `manual_review` with category scores, and the review
joins a named queue with the priority and order key `moderation.policy.queue_entry` gives it
under the default weights (reports and appeals with their report count and appeal points).
At 1M reviews, 100k wait in five queues.

Timed, in-process (Django's test client with a moderator's session, production settings):
- list: the review list, newest first (the admin's first page, estimated count);
- list filtered: the list of `manual_review` reviews;
- queue page: the queues' depths and oldest ages, and the first 50 of the low-confidence queue;
- review next: `review_take_next` on the low-confidence queue (its lease is released, untimed,
  after each call, so every call walks the same queue head).

Rounds alternate between the sizes, each in a fresh process, and the figures are medians over
the rounds. Every SELECT/UPDATE each path ran is EXPLAINed: a sequential scan of a table over
10k rows is reported.
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
from bench.growth import BIG_TABLE_ROWS, _explainable, _scans, _short

PATHS = ("list", "list filtered", "queue page", "review next")
DB = "moderation_workplace"

# One review in ten waits for a human, spread over the queues as a busy service would see it.
_SEED_QUEUED = """
WITH picked AS (
    SELECT r.id, r.decision_id, r.created_at, abs(hashtext(r.id::text)) AS h,
           0.5 + (abs(hashtext(r.id::text || 's')) % 400) / 1000.0 AS score
    FROM moderation_contentreview r WHERE abs(hashtext(r.id::text)) % 10 = 0
), placed AS (
    SELECT p.*, CASE WHEN h % 20 < 12 THEN 'low_confidence' WHEN h % 20 < 16 THEN 'reports'
                     WHEN h % 20 < 18 THEN 'appeals' WHEN h % 20 < 19 THEN 'provider_failures'
                     ELSE 'escalations' END AS queue,
           3 + h % 7 AS reports
    FROM picked p
), weighted AS (
    SELECT pl.*, 100 * score + CASE queue WHEN 'reports' THEN 15 * reports WHEN 'appeals' THEN 40 ELSE 0 END AS points
    FROM placed pl
), d AS (
    UPDATE moderation_decision d SET label = 'manual_review', score = w.score,
        category_scores = jsonb_build_object('harassment', w.score, 'hate', w.score / 4)
    FROM weighted w WHERE d.id = w.decision_id
)
UPDATE moderation_contentreview r SET status = 'manual_review', queue = w.queue, priority = w.points,
    queued_at = w.created_at, queue_order_at = w.created_at - make_interval(secs => w.points / 10 * 3600)
FROM weighted w WHERE r.id = w.id
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="existing reviews, one database each")
    parser.add_argument("--ops", type=int, default=100, help="timed operations per path, size and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prepare", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reuse", action="store_true", help="measure the databases an earlier run seeded")
    args = parser.parse_args()
    if args.prepare:
        return _prepare(args.prepare)
    if args.measure:
        return _measure(args.measure, args.ops)
    sizes = [int(x) for x in args.sizes.split(",")]
    for size in [] if args.reuse else sizes:
        print(_child("--prepare", size).strip(), flush=True)
    results: dict[tuple[int, str], list[dict]] = {}
    for round_no in range(args.rounds):
        for size in sizes[round_no % len(sizes):] + sizes[:round_no % len(sizes)]:
            for path, figures in json.loads(_child("--measure", size, "--ops", args.ops)).items():
                results.setdefault((size, path), []).append(figures)
        print(f"round {round_no + 1} of {args.rounds} done", flush=True)
    _report(sizes, results, args)


def _report(sizes, results, args) -> None:
    rows, flagged = [], []
    for size in sizes:
        for path in PATHS:
            rounds = results[(size, path)]
            rows.append([f"{size:,}", path, rounds[0]["statements"], statistics.median(r["p50"] for r in rounds),
                         statistics.median(r["p95"] for r in rounds)])
            flagged += [(size, path, sql, scan) for sql, scans in rounds[0]["plans"] for scan in scans
                        if scan[0] == "Seq Scan" and scan[2] > BIG_TABLE_ROWS]
    print(f"\nThe moderator's workplace as the tables grow (in-process; ms; medians of {args.rounds} alternating "
          f"rounds of {args.ops} operations)")
    print(common.table(["reviews", "path", "statements", "p50 ms", "p95 ms"], rows))
    print(f"\nPlans at {sizes[-1]:,} reviews (every SELECT/UPDATE each path ran; scans only)")
    for path in PATHS:
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


def _child(*args) -> str:
    run = subprocess.run([sys.executable, "-m", "bench.workplace", *map(str, args)], cwd=common.ROOT,
                         capture_output=True, text=True, env=os.environ, timeout=7200)
    if run.returncode:
        raise SystemExit(f"bench.workplace {' '.join(map(str, args))} failed:\n{run.stderr}")
    return run.stdout


def _prepare(size: int) -> None:
    started = time.monotonic()
    common.setup(name=f"{DB}_{size}")
    client_id, _ = common.bench_client("workplace")
    common.seed_decided(client_id, size, tag="w-")
    common.sql(_SEED_QUEUED)
    common.sql("VACUUM ANALYZE")
    waiting = common.sql("SELECT count(*) FROM moderation_contentreview WHERE status = 'manual_review'")[0][0]
    print(f"{DB}_{size}: {size:,} reviews seeded ({waiting:,} waiting for a human) in "
          f"{time.monotonic() - started:.0f} s")


def _measure(size: int, ops: int) -> None:
    common.setup(name=f"{DB}_{size}", recreate=False)
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client

    from moderation.models import ReviewQueue
    from moderation.services import review_release, review_take_next

    moderator, _ = User.objects.get_or_create(username="bench-moderator", defaults={"is_staff": True})
    moderator.groups.add(Group.objects.get(name="moderator"))
    http = Client()
    http.force_login(moderator)
    base = "/admin/moderation/contentreview/"

    def page(url):
        def get(_):
            response = http.get(url)
            assert response.status_code == 200, (url, response.status_code)
        return get

    def take_next(_):
        review = review_take_next(moderator=moderator, queue=ReviewQueue.LOW_CONFIDENCE)
        assert review is not None
        return review

    paths = {"list": page(base), "list filtered": page(base + "?status__exact=manual_review"),
             "queue page": page(base + "queues/?queue=low_confidence"), "review next": take_next}
    out = {}
    for path, func in paths.items():
        after = (lambda review: review_release(review_id=review.pk, moderator=moderator)) if path == "review next" \
            else (lambda _: None)
        for i in range(10):  # warm-up
            after(func(i))
        statements = []

        def record(execute, sql, params, many, context):
            if not sql.startswith(("SAVEPOINT", "RELEASE")):
                statements.append((sql, params))
            return execute(sql, params, many, context)

        with connection.execute_wrapper(record):
            after(func(0))
        timings = []
        for i in range(ops):
            started = time.perf_counter()
            value = func(i)
            timings.append((time.perf_counter() - started) * 1000)
            after(value)
        timed_statements = [s for s in statements if "moderation_contentreview" in s[0] or "decision" in s[0]]
        out[path] = {
            "p50": common.percentile(timings, 50), "p95": common.percentile(timings, 95),
            "statements": len(statements),
            "plans": [(_short(sql), _scans(sql, params)) for sql, params in timed_statements if _explainable(sql)],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
