"""Callback ingestion: signed provider callbacks (30% duplicate deliveries) sent by wrk at each
concurrency, against the framework ceiling and pgbench running the equivalent SQL.

    python -m bench.ingest [--levels 1,2,4,8,16,32] [--requests 3000] [--seconds 20] [--notify] [--now | --code DIR]

Each new callback finalizes a review in `processing` (the full path: verify, store in the inbox,
lock the review, classify, decide under the policy, outbox row, transition, history); each
duplicate is answered from the inbox. The requests are prepared and signed before each level
(a signature is valid 5 minutes) and written to a file wrk's Lua script reads. The pgbench
transaction is what that path must write at the least: the inbox upsert, a conditional review
update and a transition row (duplicates: the upsert alone); the framework ceiling (bench/wsgi.py)
runs the same SQL in a bare Django view under the same gunicorn. After the run the invariant
checker reports on the reviews the callbacks named. With --notify the client has a webhook on
loopback, and a django-q2 cluster delivers every decision's notification meanwhile (a mixed load).
Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from bench import checkout, common, wrk

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


def run(code: checkout.Checkout, *, levels: list[int], requests: int, seconds: float, duplicates: float,
        web_workers: int, ceiling: bool, pgbench_seconds: int, seed: int = 1, notify: bool = False,
        q_workers: int = 2) -> dict:
    """One checkout's callback ingestion at each concurrency (and, for this checkout, the
    ceiling and pgbench at each). `notify`: the client has a loopback webhook and the clusters
    deliver every decision's notification meanwhile."""
    from lab.simulator import WebhookReceiver

    rng = random.Random(seed)
    url = code.database("ingest")
    sink = WebhookReceiver(default_status=204) if notify else None
    client_id, _ = code.create_client(url, "bench-ingest", webhook_url=sink.url if sink else "")
    new_per_level = int(requests * (1 - duplicates) * 1.2) + 10
    reviews = code.seed_processing(url, client_id, new_per_level * len(levels), "ingest-")
    top_reviews = code.seed_processing(url, client_id, new_per_level * len(levels), "ceiling-") if ceiling else []
    if ceiling:
        pgbench_reviews = code.seed_processing(url, client_id, 20_000, "pgbench-")
        checkout.query(url, "CREATE TABLE bench_pgbench_review (n integer PRIMARY KEY, id uuid NOT NULL)")
        checkout.query(url, "INSERT INTO bench_pgbench_review SELECT ordinality, id "
                            "FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(id)", [[r for r, _ in pgbench_reviews]])
    # As the pipeline leaves content before its callback: its language detected by the worker at
    # dispatch and stored (moderation.services.policy.content_language), so finalize reads it.
    checkout.query(url, "UPDATE moderation_content SET language = 'en', language_candidates = '[[\"en\", 1.0]]' "
                        "WHERE language_candidates IS NULL")
    checkout.query(url, "ANALYZE")
    result: dict = {"code": code.label, "path": "callbacks", "levels": []}
    named: list[str] = []
    env = {"DATABASE_URL": url, **({"WEBHOOK_ALLOW_PRIVATE": "1"} if sink else {})}
    with tempfile.TemporaryDirectory() as tmp, common.Platform(
            web_workers=web_workers, clusters=1 if sink else 0, q_workers=q_workers, env=env, code=code.path, python=code.executable,
            wsgi_app="bench.wsgi:application" if ceiling else "config.wsgi") as platform:
        platform.sample_rss()
        file = Path(tmp) / "requests"
        warm, used = signed_requests(reviews[:8 * web_workers], 8 * web_workers, 0, rng, tag="warm")
        named += used
        wrk.write_requests(warm, file)
        wrk.requests_file(platform.port, file, connections=max(levels))
        for level_no, concurrency in enumerate(levels):
            mine = reviews[8 * web_workers:][level_no * new_per_level:(level_no + 1) * new_per_level]
            prepared, used = signed_requests(mine, requests, duplicates, rng, tag=f"c{concurrency}")
            named += used
            wrk.write_requests(prepared, file)
            load = wrk.requests_file(platform.port, file, connections=concurrency, max_seconds=seconds)
            level = {"connections": concurrency, "rate": load.rate, "p50": load.p50_ms, "p99": load.p99_ms,
                     "requests": load.requests, "errors": load.describe_errors()}
            if ceiling:
                theirs = top_reviews[level_no * new_per_level:(level_no + 1) * new_per_level]
                wrk.write_requests(signed_requests(theirs, requests, duplicates, rng, tag=f"top{concurrency}",
                                             path="/bench/ceiling/callback/")[0], file)
                top = wrk.requests_file(platform.port, file, connections=concurrency, max_seconds=seconds)
                level["ceiling"] = {"rate": top.rate, "p99": top.p99_ms, "errors": top.describe_errors()}
            result["levels"].append(level)
            print(f"  callbacks, {code.label}, {concurrency} connections: {load.rate:.1f} req/s, "
                  f"p99 {load.p99_ms:.1f} ms" + (f"; ceiling {level['ceiling']['rate']:.1f} req/s" if ceiling else ""),
                  flush=True)
        finalized = checkout.query(url, "SELECT count(*) FROM moderation_contentreview WHERE id = ANY(%s::uuid[]) "
                                        "AND status = ANY(%s)", [named, list(common.FINAL)])[0][0]
        delivered_by = time.monotonic() + 120  # let the cluster finish the notifications (bounded)
        while sink and len(sink.received) < finalized and time.monotonic() < delivered_by:
            time.sleep(0.5)
        result["rss"] = dict(platform.peak_rss)
    if sink:
        sink.stop()
        result["delivered"] = len(sink.received)
    result.update(finalized=finalized, reviews=len(named), violations=code.violations(url, named))
    if ceiling:
        for level in result["levels"]:
            tps, latency = _pgbench(url, level["connections"], pgbench_seconds, len(pgbench_reviews), duplicates)
            level["reference"] = {"rate": tps, "latency": latency}
    best = max(result["levels"], key=lambda level: level["rate"])
    result.update({k: best[k] for k in ("rate", "p50", "p99", "connections")})
    return result


def at(result: dict, connections: int) -> dict:
    """The figures at one concurrency (the issue's: 8), else the best."""
    return next((level for level in result["levels"] if level["connections"] == connections), result)


def describe(result: dict) -> list[str]:
    has_top = "ceiling" in result["levels"][0]
    rows = [[level["connections"], level["requests"], level["rate"], level["p50"], level["p99"], level["errors"],
             *((level["ceiling"]["rate"], common.ratio(level["rate"], level["ceiling"]["rate"]),
                level["reference"]["rate"], common.ratio(level["rate"], level["reference"]["rate"])) if has_top else ())]
            for level in result["levels"]]
    headers = ["conn.", "requests", "req/s", "p50 ms", "p99 ms", "non-2xx"]
    if has_top:
        headers += ["ceiling req/s", "ratio", "pgbench tps", "ratio"]
    lines = [f"Callback ingestion, {result['code']}: wrk, 30% re-deliveries", common.table(headers, rows),
             f"reviews named by new callbacks: {result['reviews']}, finalized: {result['finalized']}"
             + (f", notifications delivered: {result['delivered']}" if "delivered" in result else "") + "; "
             f"{len(result['violations'])} invariant violations; peak RSS: {common.rss_line(result['rss'])}"]
    lines += [f"  violation: {v}" for v in result["violations"][:10]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,2,4,8,16,32", help="concurrencies to run (connections)")
    parser.add_argument("--requests", type=int, default=3000, help="callbacks per level at most")
    parser.add_argument("--seconds", type=float, default=20, help="seconds per level at most")
    parser.add_argument("--duplicates", type=float, default=0.3, help="share of duplicate deliveries")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn sync workers")
    parser.add_argument("--q-workers", type=int, default=2, help="django-q2 workers (with --notify)")
    parser.add_argument("--notify", action="store_true",
                        help="give the client a loopback webhook: the cluster delivers every decision meanwhile")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    checkout.add_arguments(parser)
    args = parser.parse_args()
    if not 0 <= args.duplicates < 1:
        parser.error("--duplicates must lie in [0, 1)")
    levels = [int(x) for x in args.levels.split(",")]
    common.setup_driver()
    print(f"{args.web_workers} gunicorn sync workers; {os.cpu_count()} CPUs", flush=True)
    for code in checkout.chosen(args):
        result = run(code, levels=levels, requests=args.requests, seconds=args.seconds, duplicates=args.duplicates,
                     web_workers=args.web_workers, ceiling=code.is_this, pgbench_seconds=args.pgbench_seconds,
                     seed=args.seed, notify=args.notify, q_workers=args.q_workers)
        print("\n".join(describe(result)), flush=True)


def signed_requests(reviews, count: int, duplicate_share: float, rng: random.Random, tag: str,
              path: str = "/api/v1/callbacks/webhook/") -> tuple[list[bytes], list[str]]:
    """`count` signed requests: new events for the reviews, and re-deliveries of earlier ones;
    and the reviews they name."""
    sent: list[bytes] = []
    used: list[str] = []
    fresh = iter(reviews)
    while len(sent) < count:
        if sent and rng.random() < duplicate_share:
            sent.append(rng.choice(sent))  # the same event again: same webhook-id, same body
            continue
        review = next(fresh, None)
        if review is None:
            break
        review_id, key = review
        used.append(review_id)
        body = common.callback_body(key, f"sim-{review_id}")
        sent.append(common.signed_request(f"evt-{tag}-{review_id}", body, path=path, keep_alive=True))
    return sent, used


def _pgbench(url: str, clients: int, seconds: int, reviews: int, duplicate_share: float) -> tuple[float, float]:
    payload = common.callback_body("00000000-0000-0000-0000-000000000000", "sim-x").decode()
    headers = '{"webhook-id": "evt", "webhook-timestamp": "1", "webhook-signature": "v1,x"}'
    script = PGBENCH_SCRIPT.format(reviews=reviews, duplicate_pct=int(duplicate_share * 100),
                                   payload=payload.replace("'", "''"), headers=headers)
    return common.pgbench(url, script, clients=clients, seconds=seconds)


if __name__ == "__main__":
    main()
