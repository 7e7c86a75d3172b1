"""End to end, the default deployment: reviews submitted through the API by wrk from 8
connections until all are final, on the ORM broker and on Redis; against pgbench running the
statements one review needs.

    python -m bench.e2e [--reviews 3000] [--brokers orm,redis] [--server gunicorn|gthread|granian]
                        [--per-author N] [--now | --code DIR]

The platform as `run_platform` starts it: a web server (gunicorn's 3 sync workers unless
`--server` says otherwise: gthread, 4 threads each, or granian on config.asgi, what `make run`
runs), the moderation cluster (2
django-q2 workers, the local model loaded in them: MODERATION_PROVIDER=local) and the
notification cluster; production settings. With Redis, REDIS_URL (BENCH_REDIS_URL, default
redis://127.0.0.1:6379/15, flushed before each run) moves the broker and the cache. Each run has
a database of its own; after a warm-up (decided, not counted), wrk submits the reviews and the
run waits until every review is final (moderation_contentreview.status).

  reviews/s = reviews / (last completed_at - first created_at)

The reference is pgbench on the statements one review needs at the least, in the shape of the
path (three transactions: the submission's inserts; the claim's conditional update, the request
and a transition; the decision, the request's and the review's final updates, a transition and
the decision's outbox row), with the history row of each version: what the invariant checker
requires of a decided review (docs/design.md, invariants 4 and 9; tests/bench prove that the
script's reviews pass it). After each run the invariant checker reports on its reviews. Figures are printed;
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import checkout, common, submit, wrk
from bench.submit import TEXTS

# The submission (bench.submit's script: the same inserts), then the claim and the decision.
PGBENCH_SCRIPT = submit.PGBENCH_SCRIPT + """BEGIN;
UPDATE moderation_contentreview SET status = 'processing', version = version + 1,
    active_idempotency_key = gen_random_uuid(), worker_id = 'pgbench', processing_started_at = now(), updated_at = now()
WHERE id = :review_id AND status = 'pending'
RETURNING active_idempotency_key AS key \\gset
INSERT INTO moderation_moderationrequest (review_id, idempotency_key, provider, provider_request_id, status, cause,
    generation, attempt_no, max_attempts, last_error, created_at, sent_at, updated_at)
VALUES (:review_id, :key, 'local', 'pgbench-' || :client_id || '-' || :n, 'sent', 'job_started', 0, 1, 3, '', now(),
    now(), now())
RETURNING id AS request_id \\gset
INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id, idempotency_key,
    job_id, attempt_no, reason, created_at)
VALUES (:review_id, 'pending', 'processing', 'job_started', 'worker', 'pgbench', :key, '', 1, '', now());
INSERT INTO moderation_historicalcontentreview (id, status, version, active_idempotency_key, worker_id,
    provider_request_id, created_at, updated_at, history_date, history_change_reason, history_type, client_id,
    content_id)
VALUES (:review_id, 'processing', 2, :key, 'pgbench', '', now(), now(), now(), 'job_started', '~', :client,
    :content_id);
COMMIT;
BEGIN;
INSERT INTO moderation_decision (review_id, request_id, label, source, score, flagged, categories, category_scores,
    model, explanation, reason, policy_id, created_at)
VALUES (:review_id, :request_id, 'approved', 'provider', 0.01, false, '{}', '{}', 'local', 'pgbench', '', :policy, now())
RETURNING id AS decision_id \\gset
UPDATE moderation_moderationrequest SET status = 'completed', completed_at = now(), updated_at = now()
WHERE id = :request_id AND status = 'sent';
UPDATE moderation_contentreview SET status = 'approved', version = version + 1, decision_id = :decision_id,
    completed_at = now(), updated_at = now()
WHERE id = :review_id AND status = 'processing';
INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id, idempotency_key,
    job_id, attempt_no, reason, created_at)
VALUES (:review_id, 'processing', 'approved', 'provider_result', 'worker', 'pgbench', :key, '', 1, '', now());
INSERT INTO moderation_historicalcontentreview (id, status, version, active_idempotency_key, worker_id,
    provider_request_id, decision_id, created_at, updated_at, history_date, history_change_reason, history_type,
    client_id, content_id)
VALUES (:review_id, 'approved', 3, :key, 'pgbench', '', :decision_id, now(), now(), now(), 'provider_result', '~',
    :client, :content_id);
INSERT INTO moderation_decisionnotification (review_id, kind, decision_id, client_id, event_id, url, payload, status,
    attempts, last_error, created_at)
VALUES (:review_id, 'review.decided', :decision_id, :client, 'ntf-pgbench-' || :client_id || '-' || :n, '', '{}',
    'no_endpoint', 0, '', now());
COMMIT;
"""

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")


def run(code: checkout.Checkout, broker: str, *, reviews: int, connections: int, web_workers: int, q_workers: int,
        timeout: float, redis_url: str = REDIS_URL, per_author: int = 0, server: str = "gunicorn") -> dict:
    """One checkout's end-to-end run on one broker. `per_author` > 0: every submission names its
    author, `per_author` reviews each, so each rejection counts a strike (and the ladder acts);
    statements of reasons and the notices to users are built as by default (kept, not sent).
    `server`: the web server (bench.common.SERVERS)."""
    if broker not in ("orm", "redis"):
        raise ValueError(f"broker must be orm or redis, got {broker!r}")
    name = f"e2e_{broker}" + ("_authors" if per_author else "") + ("" if server == "gunicorn" else f"_{server}")
    url = code.database(name)
    client_id, token = code.create_client(url, f"bench-{name}")
    env = {"DATABASE_URL": url, "MODERATION_PROVIDER": "local", "REDIS_URL": redis_url if broker == "redis" else ""}
    if broker == "redis":
        import redis

        redis.Redis.from_url(redis_url).flushdb()
    result: dict = {"web_workers": web_workers, "code": code.label, "path": "e2e authors" if per_author else f"e2e {broker}", "broker": broker,
                    "client": client_id, "per_author": per_author, "server": server}
    with common.Platform(web_workers=web_workers, clusters=1, q_workers=q_workers, env=env, code=code.path, python=code.executable,
                         server=server) as platform:
        platform.sample_rss()
        # Warm-up (not counted): every web and q2 worker has loaded the code and the model.
        warm = wrk.submissions(platform.port, token, tag="warm", count=4 * (web_workers + q_workers), texts=TEXTS,
                               connections=connections)
        wait_final(url, None, timeout, warm.requests)
        started = checkout.query(url, "SELECT now()")[0][0]
        load = wrk.submissions(platform.port, token, tag="run", count=reviews, texts=TEXTS, connections=connections,
                               max_seconds=timeout, per_author=per_author)
        ids, waited = wait_final(url, started, timeout, load.ok)
        result["rss"] = dict(platform.peak_rss)
    final, window = finished(url, started)
    latencies = [row[0] * 1000 for row in checkout.query(
        url, "SELECT extract(epoch FROM completed_at - created_at)::float FROM moderation_contentreview "
             "WHERE created_at >= %s AND completed_at IS NOT NULL", [started])]
    result.update(
        reviews=len(ids), final=final, unfinished=len(ids) - final, waited_s=waited,
        rate=final / window if window and final == len(ids) else 0.0,
        rate_final=final / window if window else 0.0,
        submit_rate=load.rate, submit_p99=load.p99_ms, submit_errors=load.describe_errors(),
        p50=common.percentile(latencies, 50), p99=common.percentile(latencies, 99),
        violations=code.violations(url, ids),
    )
    if code.is_this:
        result["database"] = url
    return result


def finished(url: str, started) -> tuple[int, float]:
    """The reviews created since `started` that are final, and the seconds from the first one's
    creation to the last one's completion (reviews/s = final / seconds, when all are final)."""
    first, last, final = checkout.query(
        url, "SELECT min(created_at), max(completed_at), count(*) FILTER (WHERE status = ANY(%s)) "
             "FROM moderation_contentreview WHERE created_at >= %s", [list(common.FINAL), started])[0]
    return final, (last - first).total_seconds() if first and last else 0.0


def reference(url: str, client_id: int, *, clients: int, seconds: int) -> dict:
    """pgbench on the statements of one review (a transaction of the script = one review)."""
    policy = checkout.query(url, "SELECT id FROM moderation_moderationpolicy ORDER BY version DESC LIMIT 1")[0][0]
    tps, latency = common.pgbench(url, PGBENCH_SCRIPT, clients=clients, seconds=seconds,
                                  defines={"client": client_id, "policy": policy})
    return {"rate": tps, "latency": latency}


def wait_final(url: str, since, timeout: float, expected: int) -> tuple[list[str], float]:
    """Wait until every review (created since `since`) is final, `timeout` at most; their ids
    and the seconds waited."""
    began = time.monotonic()
    where, params = ("WHERE created_at >= %s", [since]) if since else ("", [])
    while True:
        rows = checkout.query(url, f"SELECT id, status = ANY(%s) FROM moderation_contentreview {where}",
                              [list(common.FINAL), *params])
        if (len(rows) >= expected and all(final for _, final in rows)) or time.monotonic() - began > timeout:
            return [str(review_id) for review_id, _ in rows], time.monotonic() - began
        time.sleep(0.25)


def describe(result: dict) -> list[str]:
    rate = f"{result['rate']:.1f}" if result["rate"] else f"incomplete ({result['rate_final']:.1f} for the final ones)"
    what = f"e2e {result['broker']}" + (f" with authors ({result['per_author']} reviews each)"
                                         if result.get("per_author") else "")
    what += f", {result.get('server', 'gunicorn')} x{result.get('web_workers', '?')}"
    lines = [f"{what}, {result['code']}: {rate} reviews/s over {result['reviews']} reviews "
             f"({result['unfinished']} not final after {result['waited_s']:.0f} s); submit -> final p50 "
             f"{result['p50']:.0f} ms, p99 {result['p99']:.0f} ms; submissions {result['submit_rate']:.1f} req/s, "
             f"p99 {result['submit_p99']:.1f} ms, non-2xx/errors {result['submit_errors']}; "
             f"{len(result['violations'])} invariant violations; peak RSS {common.rss_line(result['rss'])}"]
    if "reference" in result:
        ref = result["reference"]
        lines.append(f"  pgbench, the statements of one review: {ref['rate']:.0f} reviews/s; "
                     f"ratio {common.ratio(result['rate'], ref['rate'])}")
    lines += [f"  violation: {v}" for v in result["violations"][:10]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=3000)
    parser.add_argument("--brokers", default="orm,redis")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--q-workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a run's reviews")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    parser.add_argument("--server", choices=sorted(common.SERVERS), default="gunicorn",
                        help="the web server: gunicorn sync workers, gthread (4 threads each), or granian (make run's)")
    parser.add_argument("--per-author", type=int, default=0,
                        help="name an author on every submission, this many reviews each (0: none)")
    checkout.add_arguments(parser)
    args = parser.parse_args()
    common.setup_driver()
    print(f"End to end: {args.reviews} reviews from {args.connections} wrk connections, {args.web_workers} {args.server} "
          f"workers, {args.q_workers} q2 workers with the local model; {os.cpu_count()} CPUs", flush=True)
    for code in checkout.chosen(args):
        for broker in args.brokers.split(","):
            result = run(code, broker, reviews=args.reviews, connections=args.connections,
                         web_workers=args.web_workers, q_workers=args.q_workers, timeout=args.timeout,
                         per_author=args.per_author, server=args.server)
            if code.is_this:
                result["reference"] = reference(result["database"], result["client"], clients=args.connections,
                                                 seconds=args.pgbench_seconds)
            print("\n".join(describe(result)), flush=True)


if __name__ == "__main__":
    main()
