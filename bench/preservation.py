"""What a preservation snapshot adds to a decision (docs/legal-holds.md): statements and time of a
provider result's finalize, under a policy with no reportable category and under one that makes
the result's category reportable (a short text, and a 4 kB one: a larger body to hash and store).

    python -m bench.preservation [--ops 200] [--database moderation_bench_preservation]

A database of its own (recreated, dropped at the end). Each path submits and claims `--ops`
reviews, then times each finalize alone (its own transaction, committed): the median and p95 in
milliseconds and the SQL statements one finalize sends. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import common

PATHS = ("not reportable", "reportable text", "reportable 4 kB text")


def _finalize_timed(reviews, result) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from moderation import services

    times, statements = [], 0
    for review in reviews:
        request = services.review_claim(review_id=review.pk, worker_id="bench")
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            services.review_finalize(idempotency_key=request.idempotency_key, result=result, cause="provider_result")
            times.append((time.perf_counter() - started) * 1000)
        statements = len(captured.captured_queries)
    return times, statements


def _path(name: str, client, ops: int):
    from moderation import services
    from moderation.providers.base import ModerationResult

    reportable = [] if name == "not reportable" else ["harassment"]
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=reportable)
    reviews = []
    for i in range(ops):
        kwargs = {"kind": "text", "text": f"a text to judge, number {i}"}
        if name == "reportable 4 kB text":  # a larger body to hash and store
            kwargs = {"kind": "text", "text": "x" * 4000 + f" {i}"}
        reviews.append(services.review_submit(client=client, external_id=f"{name}-{i}", **kwargs)[0])
    result = ModerationResult(model="bench", flagged=True, categories={"harassment": True},
                              category_scores={"harassment": 0.95})
    return _finalize_timed(reviews, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--database", default="moderation_bench_preservation")
    args = parser.parse_args()
    common.setup(name=args.database, env={"MODERATION_PROVIDER": "local"})
    from moderation import services

    client, _ = services.api_client_create(name="bench")
    rows = []
    try:
        for name in PATHS:
            times, statements = _path(name, client, args.ops)
            rows.append([name, args.ops, round(statistics.median(times), 2),
                         round(common.percentile(times, 95), 2), statements])
    finally:
        from django.db import connections

        connections.close_all()
        import psycopg

        with psycopg.connect(common.admin_url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    print(common.table(["finalize", "ops", "median ms", "p95 ms", "statements"], rows))


if __name__ == "__main__":
    main()
