"""Callback ingestion: signed provider callbacks (30% duplicate deliveries) posted to gunicorn at
increasing concurrency, against pgbench running the equivalent SQL on the same server.

    python -m bench.ingest [--levels 1,2,4,8,16,32] [--requests 3000] [--seconds 20] [--notify]

Each new callback finalizes a review in `processing` (the full path: verify, store in the inbox,
lock the review, classify, decide under the policy, outbox row, transition, history); each
duplicate is answered from the inbox. With --notify the client has a webhook on loopback, and the
django-q2 cluster delivers every decision's notification meanwhile (a mixed load; the q2 worker's
RSS is then that of a working one). The pgbench transaction is what that path must write at the
least: the inbox upsert, a conditional review update and a transition row (duplicates: the upsert
alone). Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common

PGBENCH_SCRIPT = """
\\set r random(1, 100)
\\set n random(1, 1000000000000)
\\set rid random(1, {reviews})
\\set d :n % 500
\\if :r <= {duplicate_pct}
INSERT INTO callbacks_providercallback (provider, provider_event_id, event_type, idempotency_key,
    provider_request_id, payload_json, headers, received_at, processed_at, outcome, outcome_detail,
    duplicate_count, process_failures, process_error)
VALUES ('pgbench', 'dup-' || :d, 'moderation.completed', NULL, 'p', '{payload}', '{headers}', now(),
    NULL, '', '', 0, 0, '')
ON CONFLICT (provider, provider_event_id) DO UPDATE
    SET duplicate_count = callbacks_providercallback.duplicate_count + 1, last_duplicate_at = EXCLUDED.received_at
RETURNING id;
\\else
BEGIN;
INSERT INTO callbacks_providercallback (provider, provider_event_id, event_type, idempotency_key,
    provider_request_id, payload_json, headers, received_at, processed_at, outcome, outcome_detail,
    duplicate_count, process_failures, process_error)
VALUES ('pgbench', 'new-' || :client_id || '-' || :n, 'moderation.completed', NULL, 'p', '{payload}', '{headers}',
    now(), now(), 'applied', '', 0, 0, '')
ON CONFLICT (provider, provider_event_id) DO UPDATE
    SET duplicate_count = callbacks_providercallback.duplicate_count + 1, last_duplicate_at = EXCLUDED.received_at
RETURNING id;
UPDATE moderation_contentreview SET version = version + 1, updated_at = now()
WHERE id = (SELECT id FROM bench_pgbench_review WHERE n = :rid) AND status = 'processing'
RETURNING id AS review_id \\gset
INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id, idempotency_key,
    job_id, attempt_no, reason, created_at)
VALUES (:review_id, 'processing', 'processing', 'provider_callback', 'worker', 'pgbench', NULL, '', 1, '', now());
COMMIT;
\\endif
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,2,4,8,16,32", help="concurrencies to run (connections)")
    parser.add_argument("--requests", type=int, default=3000, help="callbacks per level at most")
    parser.add_argument("--seconds", type=float, default=20, help="seconds per level at most")
    parser.add_argument("--duplicates", type=float, default=0.3, help="share of duplicate deliveries")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn sync workers")
    parser.add_argument("--q-workers", type=int, default=2, help="django-q2 workers")
    parser.add_argument("--notify", action="store_true",
                        help="give the client a loopback webhook: the cluster delivers every decision meanwhile")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--conn-max-age", type=int, default=None,
                        help="CONN_MAX_AGE for the platform (default: the settings' own default)")
    parser.add_argument("--naive", action="store_true", help="run the web server unguarded (bench/naive.py)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    rng = random.Random(args.seed)

    url = common.setup()
    from lab.simulator import WebhookReceiver

    # --notify: decisions notify the client, so the cluster's workers deliver them during the run.
    sink = WebhookReceiver(default_status=204) if args.notify else None
    client_id, _ = common.bench_client(webhook_url=sink.url if sink else "")
    new_per_level = int(args.requests * (1 - args.duplicates) * 1.2) + 10
    reviews = common.seed_processing(client_id, new_per_level * len(levels), "ingest-")
    pgbench_reviews = common.seed_processing(client_id, 20_000, "pgbench-")
    common.sql("CREATE TABLE bench_pgbench_review (n integer PRIMARY KEY, id uuid NOT NULL)")
    common.sql("INSERT INTO bench_pgbench_review SELECT ordinality, id FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(id)",
               [[str(r) for r, _ in pgbench_reviews]])
    common.analyze()
    print(f"database {url.rsplit('/', 1)[-1]}: {len(reviews) + len(pgbench_reviews)} reviews in processing; "
          f"{args.web_workers} gunicorn sync workers, 1 django-q2 cluster ({args.q_workers} workers"
          + (", delivering each decision's notification to a loopback webhook" if sink else "")
          + f"); {os.cpu_count()} CPUs\n")

    rows, results = [], []
    env = {"CONN_MAX_AGE": str(args.conn_max_age)} if args.conn_max_age is not None else {}
    with common.Platform(web_workers=args.web_workers, clusters=1, q_workers=args.q_workers, naive=args.naive,
                         env=env) as platform:
        platform.sample_rss()
        for level_no, concurrency in enumerate(levels):
            mine = reviews[level_no * new_per_level:(level_no + 1) * new_per_level]
            requests = _requests(mine, args.requests, args.duplicates, rng, tag=f"c{concurrency}")
            result = common.closed_loop(platform.port, requests, concurrency=concurrency, max_seconds=args.seconds)
            results.append(result)
            lat = result.latencies_ms
            rows.append([concurrency, len(lat), result.rate, common.percentile(lat, 50), common.percentile(lat, 95),
                         common.percentile(lat, 99), _other_statuses(result)])
        delivered_by = time.monotonic() + 120  # let the cluster finish the notifications (bounded)
        while sink and len(sink.received) < _applied() and time.monotonic() < delivered_by:
            time.sleep(0.5)
        rss = dict(platform.peak_rss)
    if sink:
        sink.stop()

    applied = _applied()
    duplicates = common.sql("SELECT coalesce(sum(duplicate_count), 0) FROM callbacks_providercallback WHERE provider = 'webhook'")[0][0]
    finalized = common.sql("SELECT count(*) FROM moderation_contentreview r JOIN moderation_content c ON c.id = r.content_id "
                           "WHERE c.external_id LIKE 'ingest-%' AND r.status <> 'processing'")[0][0]

    pgbench = _pgbench(url, levels, args.pgbench_seconds, len(pgbench_reviews), args.duplicates)

    variant = "naive (unguarded)" if args.naive else "as shipped"
    print(f"Callback ingestion, {variant}: {int(args.duplicates * 100)}% duplicate deliveries, closed loop on loopback")
    print(common.table(["conc.", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "non-200"], rows))
    print(f"\nstored and applied: {applied} callbacks; duplicate deliveries counted: {duplicates}; "
          f"reviews finalized: {finalized}" + (f"; notifications delivered: {len(sink.received)}" if sink else ""))
    print("\npgbench, the equivalent SQL (same duplicate share), same server, -M prepared")
    print(common.table(["clients", "tps", "avg ms"], [[c, tps, lat] for c, tps, lat in pgbench]))
    best = max(results, key=lambda r: r.rate)
    limit = max(tps for _, tps, _ in pgbench)
    print(f"\nbest: {best.rate:.0f} req/s at concurrency {best.concurrency}, p99 {common.percentile(best.latencies_ms, 99):.1f} ms; "
          f"pgbench best {limit:.0f} tps; ratio {best.rate / limit:.2f} (target >= 0.30, p99 < 100 ms)")
    print("peak RSS during the run: " + ", ".join(f"{kind} {value / 2**20:.0f} MiB" for kind, value in sorted(rss.items()))
          + " (q2: the largest process of the cluster)")


def _applied() -> int:
    return common.sql("SELECT count(*) FROM callbacks_providercallback WHERE provider = 'webhook' AND outcome = 'applied'")[0][0]


def _requests(reviews, count: int, duplicate_share: float, rng: random.Random, tag: str) -> list[bytes]:
    """`count` signed requests: new events for the reviews, and re-deliveries of earlier ones."""
    sent: list[bytes] = []
    fresh = iter(reviews)
    while len(sent) < count:
        if sent and rng.random() < duplicate_share:
            sent.append(rng.choice(sent))  # the same event again: same webhook-id, same body
            continue
        review = next(fresh, None)
        if review is None:
            break
        review_id, key = review
        body = common.callback_body(key, f"sim-{review_id}")
        sent.append(common.signed_request(f"evt-{tag}-{review_id}", body))
    return sent


def _other_statuses(result: common.LoadResult) -> str:
    other = {str(status): n for status, n in result.statuses.items() if status != 200}
    return ", ".join(f"{n}x{status}" for status, n in sorted(other.items())) or "0"


def _pgbench(url: str, levels: list[int], seconds: int, reviews: int, duplicate_share: float):
    payload = common.callback_body("00000000-0000-0000-0000-000000000000", "sim-x").decode()
    headers = '{"webhook-id": "evt", "webhook-timestamp": "1", "webhook-signature": "v1,x"}'
    script = PGBENCH_SCRIPT.format(reviews=reviews, duplicate_pct=int(duplicate_share * 100),
                                   payload=payload.replace("'", "''"), headers=headers)
    out = []
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write(script)
        f.flush()
        for clients in levels:
            run = subprocess.run(
                [_pgbench_binary(), "-n", "-M", "prepared", "-f", f.name, "-T", str(seconds), "-c", str(clients),
                 "-j", str(min(clients, 2)), url],
                capture_output=True, text=True,
            )
            if run.returncode:
                raise SystemExit(f"pgbench failed:\n{run.stderr}")
            tps = float(re.search(r"tps = ([\d.]+)", run.stdout).group(1))
            latency = float(re.search(r"latency average = ([\d.]+) ms", run.stdout).group(1))
            out.append((clients, tps, latency))
    return out


def _pgbench_binary() -> str:
    """The server's pgbench, else the one pgserver ships (the embedded PostgreSQL's)."""
    found = shutil.which("pgbench")
    if found:
        return found
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pgbench"
    if not bundled.exists():
        raise SystemExit("pgbench not found: install PostgreSQL's client programs (postgresql-client)")
    return str(bundled)


if __name__ == "__main__":
    main()
