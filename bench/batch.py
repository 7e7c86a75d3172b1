"""Batches against one review per job: pending reviews moderated by the local model, as the
moderation workers run their jobs, with MODERATION_BATCH_SIZE=1 and with larger batches.

    python -m bench.batch [--reviews 600] [--sizes 1,8,16,32] [--workers 2] [--rounds 2] [--database NAME]

Each round submits `--reviews` reviews (not timed), then `--workers` threads run
`moderate_review` for each of them, in submission order, as django-q2's workers would (one job per
review; a job whose review a batch took returns at once). Throughput is reviews final per second of
that phase, in-process: django-q2's own cost per task is not in it (bench.pipeline measures the
whole deployment). Rounds run the sizes in ABBA order so drift on a shared machine hits each alike;
the figure to read is each size's ratio to size 1, measured in the same run. Every round ends with
the invariant checker on its reviews.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time
import uuid

from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=600, help="reviews per round")
    parser.add_argument("--sizes", default="1,8,16,32", help="batch sizes to compare (1 is the reference)")
    parser.add_argument("--workers", type=int, default=2, help="threads running jobs (Q_WORKERS)")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA passes over the sizes")
    parser.add_argument("--database", default=common.BENCH_DB, help="database to (re)create for the run")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.reviews < 1 or args.workers < 1 or args.rounds < 1 or 1 not in sizes or not all(1 <= s <= 256 for s in sizes):
        parser.error("--reviews, --workers and --rounds must be at least 1; --sizes must include 1, each from 1 to 256")
    common.setup(name=args.database, env={"MODERATION_PROVIDER": "local", "REDIS_URL": ""})

    from moderation import services
    from moderation.providers import get_provider

    get_provider("local").warm_up()
    client, _ = services.api_client_create(name=f"bench-batch-{uuid.uuid4().hex[:8]}")
    rates: dict[int, list[float]] = {size: [] for size in sizes}
    order = [s for r in range(args.rounds) for s in (sizes if r % 2 == 0 else sizes[::-1])]
    for size in order:
        rates[size].append(_round(client, size, args.reviews, args.workers))
        print(f"  batch size {size:>3}: {rates[size][-1]:7.1f} reviews/s", flush=True)
    reference = statistics.median(rates[1])
    print(f"\n{args.reviews} reviews per round, {args.workers} workers, {args.rounds} rounds (ABBA), local model")
    print(f"{'batch size':>10}  {'reviews/s (median)':>18}  {'ratio to 1':>10}")
    for size in sizes:
        rate = statistics.median(rates[size])
        print(f"{size:>10}  {rate:>18.1f}  {rate / reference:>10.2f}")


def _round(client, size: int, count: int, workers: int) -> float:
    from django.conf import settings
    from django.db import connection

    from moderation import services, tasks
    from moderation.invariants import violations
    from moderation.models import FINAL_STATUSES, ContentReview

    texts = ["thanks, see you on sunday", "shut up, you idiot", "great photo of the lake", "what a stupid take"]
    run = uuid.uuid4().hex[:8]
    ids = [services.review_submit(client=client, external_id=f"{run}-{i}", kind="text",
                                  text=f"{texts[i % len(texts)]} ({run} {i})")[0].pk for i in range(count)]
    settings.MODERATION_BATCH_SIZE = size
    jobs: queue.Queue = queue.Queue()
    for review_id in ids:
        jobs.put(review_id)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            while True:
                try:
                    review_id = jobs.get_nowait()
                except queue.Empty:
                    return
                tasks.moderate_review(review_id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    unfinished = ContentReview.objects.filter(pk__in=ids).exclude(status__in=FINAL_STATUSES).count()
    problems = violations(ids)
    if unfinished or problems:
        raise SystemExit(f"batch size {size}: {unfinished} reviews not final, violations: {problems[:5]}")
    return count / elapsed


if __name__ == "__main__":
    main()
