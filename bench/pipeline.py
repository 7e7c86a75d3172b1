"""End-to-end pipeline and the cost of safety: reviews submitted through the API until final,
with gunicorn, a django-q2 cluster and the provider simulator (202 + signed callback, the local
model), on the ORM broker and on Redis, as shipped and with the guards removed (bench/naive.py).

    python -m bench.pipeline [--reviews 600] [--brokers orm,redis] [--variants safe,naive] [--rounds 3]

Runs alternate ABBA (safe, naive, naive, safe...) so drift on a noisy machine hits both alike.
Setting REDIS_URL moves the cache (rate-limit counters) to Redis as well as the broker, as in
production: the two columns compare deployments, not brokers alone.
Throughput is reviews finalized per second from the first submission to the last decision;
latency is each review's submit -> final (its created_at -> completed_at). Every run ends with
the invariant checker on its reviews.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=600, help="reviews per run")
    parser.add_argument("--concurrency", type=int, default=8, help="submitting connections")
    parser.add_argument("--brokers", default="orm,redis")
    parser.add_argument("--variants", default="safe,naive")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each broker and variant")
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--q-workers", type=int, default=2)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for a run to finish")
    parser.add_argument("--paced-rate", type=float, default=10,
                        help="submissions a second of the latency runs (0: none)")
    parser.add_argument("--paced-reviews", type=int, default=300, help="reviews per latency run")
    args = parser.parse_args()

    common.setup()
    from lab.simulator import Faults, ProviderSimulator

    simulator = ProviderSimulator(secret=common.WEBHOOK_SECRET, api_key="bench-key", faults=Faults(delay_ms=0)).start()
    runs, paced = [], []
    try:
        variants = args.variants.split(",")
        for broker in args.brokers.split(","):
            for round_no in range(args.rounds):
                # ABBA: safe, naive / naive, safe / ...: neither always runs first.
                for variant in variants if round_no % 2 == 0 else variants[::-1]:
                    runs.append(_run(args, broker, variant, simulator, seed=round_no))
                    r = runs[-1]
                    print(f"  {broker:5} {variant:5} round {round_no + 1}: {r['rate']:.1f} reviews/s "
                          f"({r['rate99']:.1f} to 99%), {r['callback_failures']} callback failures, "
                          f"p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms, {r['unfinished']} unfinished, "
                          f"{r['violations']} violations", flush=True)
        latency_brokers = args.brokers.split(",") if args.paced_rate else []
        for broker in latency_brokers:
            paced.append(_run(args, broker, "safe", simulator, seed=99, rate=args.paced_rate))
            r = paced[-1]
            print(f"  {broker:5} paced at {args.paced_rate:g}/s: p50 {r['p50']:.0f} ms, p99 {r['p99']:.0f} ms", flush=True)
    finally:
        simulator.stop()

    if runs:
        _print_saturation(args, runs)
    if paced:
        print(f"\nSubmit -> final latency below saturation: {args.paced_reviews} reviews submitted at "
              f"{args.paced_rate:g}/s, as shipped")
        print(common.table(["broker", "reviews/s", "p50 ms", "p95 ms", "p99 ms", "violations", "unfinished"],
                           [[r["broker"], r["rate"], r["p50"], r["p95"], r["p99"], r["violations"], r["unfinished"]]
                            for r in paced]))
    peak = {}
    for r in [*runs, *paced]:
        for kind, value in r["rss"].items():
            peak[kind] = max(peak.get(kind, 0), value)
    print("peak RSS: " + ", ".join(f"{kind} {value / 2**20:.0f} MiB" for kind, value in sorted(peak.items())))


def _print_saturation(args, runs: list[dict]) -> None:
    print(f"\nEnd-to-end pipeline at saturation: {args.reviews} reviews submitted as fast as {args.concurrency} "
          "connections go; API submit -> claim -> provider 202 -> signed callback -> final")
    rows = []
    for broker in args.brokers.split(","):
        for variant in args.variants.split(","):
            mine = [r for r in runs if r["broker"] == broker and r["variant"] == variant]
            rates = [r["rate99"] for r in mine]
            rows.append([broker, variant, len(mine), statistics.median(r["rate"] for r in mine),
                         statistics.median(rates), f"{min(rates):.1f}-{max(rates):.1f}",
                         statistics.median(r["p50"] for r in mine), statistics.median(r["p99"] for r in mine),
                         sum(r["callback_failures"] for r in mine), sum(r["violations"] for r in mine),
                         sum(r["unfinished"] for r in mine)])
    print(common.table(["broker", "variant", "runs", "reviews/s", "to 99%/s", "range", "p50 ms", "p99 ms",
                        "cb failures", "violations", "unfinished"], rows))
    print("(reviews/s: all reviews over first submit -> last decision; to 99%/s: the first 99% of decisions, so one\n"
          " straggler left to the once-a-minute sweeper does not decide the figure; cb failures: callbacks whose\n"
          " processing failed and were finished by the sweeper)")
    if "safe" in args.variants and "naive" in args.variants:
        for broker in args.brokers.split(","):
            safe = statistics.median(r["rate99"] for r in runs if r["broker"] == broker and r["variant"] == "safe")
            naive = statistics.median(r["rate99"] for r in runs if r["broker"] == broker and r["variant"] == "naive")
            print(f"cost of safety ({broker} broker): safe/naive throughput to 99% = {safe / naive:.2f} (target >= 0.85)")


def _run(args, broker: str, variant: str, simulator, *, seed: int, rate: float = 0) -> dict:
    from django.db.models import F

    from moderation.invariants import violations
    from lab.race_lab import TEXTS
    from callbacks.models import ProviderCallback
    from moderation.models import FINAL_STATUSES, ContentReview, ModerationRequest

    env = {"MODERATION_PROVIDER": "webhook", "PROVIDER_URL": simulator.url, "PROVIDER_API_KEY": "bench-key",
           "REDIS_URL": args.redis_url if broker == "redis" else ""}
    if broker == "redis":
        import redis

        redis.Redis.from_url(args.redis_url).flushdb()
    client_id, token = common.bench_client(f"pipeline-{broker}-{variant}")
    rng = random.Random(seed)
    count = args.paced_reviews if rate else args.reviews
    with common.Platform(web_workers=args.web_workers, clusters=1, q_workers=args.q_workers,
                         naive=variant == "naive", env=env) as platform:
        platform.sample_rss()
        http = httpx.Client(base_url=f"http://127.0.0.1:{platform.port}", timeout=30,
                            headers={"Authorization": f"Bearer {token}"},
                            limits=httpx.Limits(max_connections=args.concurrency))

        def submit(external_id: str):
            answer = http.post("/api/v1/reviews/", json={
                "external_id": external_id, "content_type": "text", "text": rng.choice(TEXTS)})
            answer.raise_for_status()
            return answer.json()["id"]

        def submit_all(prefix: str, count: int, rate: float = 0) -> list:
            """As fast as `concurrency` connections go, or paced at `rate` submissions a second."""
            started = time.monotonic()

            def paced(i: int):
                if rate:
                    time.sleep(max(0.0, started + i / rate - time.monotonic()))
                return submit(f"{prefix}-{i}")

            with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
                review_ids = list(pool.map(paced, range(count)))
            deadline = time.monotonic() + args.timeout
            while (ContentReview.objects.filter(pk__in=review_ids).exclude(status__in=FINAL_STATUSES).exists()
                   and time.monotonic() < deadline):
                time.sleep(0.25)
            return review_ids

        # Warm-up (not measured): every web and q2 worker has loaded the code and connected.
        submit_all(f"warm-{broker}-{variant}-{seed}", 4 * (args.web_workers + args.q_workers))
        review_ids = submit_all(f"{broker}-{variant}-{seed}-{rate}", count, rate)
        rss = dict(platform.peak_rss)
    reviews = ContentReview.objects.filter(pk__in=review_ids)
    done = reviews.filter(status__in=FINAL_STATUSES)
    latencies = [d.total_seconds() * 1000 for d in done.annotate(
        took=F("completed_at") - F("created_at")).values_list("took", flat=True)]
    first = min(reviews.values_list("created_at", flat=True))
    completions = sorted(done.values_list("completed_at", flat=True))
    n99 = math.ceil(0.99 * len(completions))
    keys = ModerationRequest.objects.filter(review_id__in=review_ids).values("idempotency_key")
    return {
        "broker": broker, "variant": variant,
        "rate": len(completions) / (completions[-1] - first).total_seconds() if completions else 0.0,
        "rate99": n99 / (completions[n99 - 1] - first).total_seconds() if completions else 0.0,
        "callback_failures": ProviderCallback.objects.filter(idempotency_key__in=keys, process_failures__gt=0).count(),
        "p50": common.percentile(latencies, 50), "p95": common.percentile(latencies, 95),
        "p99": common.percentile(latencies, 99), "unfinished": len(review_ids) - len(latencies),
        "reviews": len(review_ids),
        "violations": len(violations(review_ids)), "rss": rss,
    }


if __name__ == "__main__":
    main()
