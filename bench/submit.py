"""Submissions: POST /api/v1/reviews/ from wrk (8 connections, each external id new), against
the framework ceiling (bench/wsgi.py: a bare Django view writing the content, its review and the
review's first history row in one transaction, under the same gunicorn) and pgbench doing the
same three inserts.

    python -m bench.submit [--requests 3000] [--connections 8] [--now | --code DIR]

No django-q2 cluster runs: the submissions' jobs wait in the job queue. After the run the invariant
checker reports on the submitted reviews. Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os

from bench import checkout, common, wrk

TEXTS = ["thanks, this was helpful", "you absolute idiot", "see you tomorrow at nine", "shut up, moron",
         "great photo of the lake", "what a stupid take", "happy birthday!", "this is damn annoying"]

PGBENCH_SCRIPT = """
\\set n random(1, 1000000000000)
BEGIN;
INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
VALUES (gen_random_uuid(), :client, 'pgbench-' || :client_id || '-' || :n, 'text', 'thanks, this was helpful', '',
    '{}', now())
RETURNING id AS content_id \\gset
INSERT INTO moderation_contentreview (id, content_id, client_id, status, version, worker_id, provider_request_id,
    last_enqueued_at, created_at, updated_at)
VALUES (gen_random_uuid(), :content_id, :client, 'pending', 1, '', '', now(), now(), now())
RETURNING id AS review_id \\gset
INSERT INTO moderation_historicalcontentreview (id, status, version, worker_id, provider_request_id, created_at,
    updated_at, history_date, history_type, client_id, content_id)
VALUES (:review_id, 'pending', 1, '', '', now(), now(), now(), '+', :client, :content_id);
COMMIT;
"""


def run(code: checkout.Checkout, *, requests: int, connections: int, web_workers: int, ceiling: bool,
        pgbench_seconds: int) -> dict:
    """One checkout's submissions (and, for this checkout, the ceiling and pgbench)."""
    url = code.database("submit")
    client_id, token = code.create_client(url, "bench-submit")
    result: dict = {"code": code.label, "path": "submissions"}
    with common.Platform(web_workers=web_workers, clusters=0, env={"DATABASE_URL": url}, code=code.path, python=code.executable,
                         wsgi_app="bench.wsgi:application" if ceiling else "config.wsgi") as platform:
        platform.sample_rss()
        warm = 8 * web_workers  # every worker has loaded the code and connected
        wrk.submissions(platform.port, token, tag="warm", count=warm, texts=TEXTS, connections=connections)
        started = checkout.query(url, "SELECT now()")[0][0]
        load = wrk.submissions(platform.port, token, tag="run", count=requests, texts=TEXTS, connections=connections)
        ended = checkout.query(url, "SELECT now()")[0][0]
        if ceiling:
            path = f"/bench/ceiling/reviews/?client={client_id}"
            wrk.submissions(platform.port, token, tag="ceiling-warm", count=warm, texts=TEXTS, connections=connections,
                            path=path)
            top = wrk.submissions(platform.port, token, tag="ceiling", count=requests, texts=TEXTS,
                                  connections=connections, path=path)
            result["ceiling"] = {"rate": top.rate, "p99": top.p99_ms, "errors": top.describe_errors()}
        result["rss"] = dict(platform.peak_rss)
    ids = [row[0] for row in checkout.query(
        url, "SELECT id FROM moderation_contentreview WHERE created_at >= %s AND created_at <= %s", [started, ended])]
    result.update(rate=load.rate, p50=load.p50_ms, p99=load.p99_ms, requests=load.requests,
                  errors=load.describe_errors(), reviews=len(ids), violations=code.violations(url, ids))
    if ceiling:
        tps, latency = common.pgbench(url, PGBENCH_SCRIPT, clients=connections, seconds=pgbench_seconds,
                                      defines={"client": client_id})
        result["reference"] = {"rate": tps, "latency": latency}
    return result


def describe(result: dict) -> list[str]:
    lines = [f"submissions, {result['code']}: {result['rate']:.1f} req/s (2xx), p50 {result['p50']:.1f} ms, "
             f"p99 {result['p99']:.1f} ms, {result['requests']} requests, non-2xx/errors {result['errors']}; "
             f"{result['reviews']} reviews, {len(result['violations'])} invariant violations"]
    if "reference" in result:
        ref, top = result["reference"], result["ceiling"]
        lines.append(f"  pgbench (the same three inserts, {result.get('connections', 8)} clients): {ref['rate']:.0f} tps; "
                     f"ratio {common.ratio(result['rate'], ref['rate'])}")
        lines.append(f"  framework ceiling (bare Django view, same gunicorn): {top['rate']:.1f} req/s, "
                     f"p99 {top['p99']:.1f} ms (errors {top['errors']}); ratio {common.ratio(result['rate'], top['rate'])}")
    lines.append(f"  peak RSS: {common.rss_line(result['rss'])}")
    lines += [f"  violation: {v}" for v in result["violations"][:10]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="submissions per run")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn sync workers")
    parser.add_argument("--pgbench-seconds", type=int, default=10)
    checkout.add_arguments(parser)
    args = parser.parse_args()
    common.setup_driver()
    print(f"Submissions: {args.requests} POST /api/v1/reviews/ from {args.connections} wrk connections, "
          f"{args.web_workers} gunicorn sync workers; {os.cpu_count()} CPUs", flush=True)
    for code in checkout.chosen(args):
        result = run(code, requests=args.requests, connections=args.connections, web_workers=args.web_workers,
                     ceiling=code.is_this, pgbench_seconds=args.pgbench_seconds)
        print("\n".join(describe(result)), flush=True)


if __name__ == "__main__":
    main()
