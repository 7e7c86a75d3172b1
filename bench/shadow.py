"""The live decision's latency with a shadow run on and off, in the same run (docs/quality.md,
"Shadow runs"; issue acceptance: p95 changes by at most 10%).

    python -m bench.shadow [--rate 25] [--seconds 90] [--rounds 2] [--server granian]

The platform as bench/e2e.py starts it (the web server, the moderation cluster with the local
model, and the notification cluster, which runs the quality minute), on the ORM broker. Each
round runs twice, alternating: with no shadow, then with the active version in shadow beside
itself with the local model (the shadow asks the model again for every decision: the most work a
shadow of a local version does). QUALITY_SETTLE_S is 1 s here, so the shadow judges while the
load runs rather than a minute later. The load is paced, below what the platform can take
(`--rate` submissions a second for `--seconds`, from a pool of loopback clients), so the latency
is the pipeline's own time, not a backlog's. Printed per run: the rate reached, the live latency
from submission to final decision (p50, p95, p99), and how many decisions the shadow had judged
when the run ended and a minute later.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import checkout, common
from bench.e2e import wait_final, finished
from bench.submit import TEXTS

SHADOW_START = """
from moderation.quality.shadows import shadow_start
from moderation.services import notifier_schedule_ensure, policy_active
notifier_schedule_ensure()
shadow = shadow_start(policy=policy_active(), provider_name="local", user=None)
print(json.dumps(shadow.pk))
"""


def paced(port: int, token: str, *, rate: float, seconds: float, tag: str) -> int:
    """POST `rate` submissions a second for `seconds` (loopback), each from a pool thread at its
    own scheduled time. Returns how many were accepted (201)."""
    import json
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    def post(i: int) -> bool:
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps({"external_id": f"{tag}-{i}", "content_type": "text", "text": TEXTS[i % len(TEXTS)]})
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/reviews/", data=body.encode(), method="POST",
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status == 201

    count = int(rate * seconds)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=32) as pool:
        return sum(pool.map(post, range(count)))


def one(code: checkout.Checkout, *, shadow: bool, rate: float, seconds: float, server: str, tag: str) -> dict:
    name = f"shadow_{'on' if shadow else 'off'}_{tag}"
    url = code.database(name)
    client_id, token = code.create_client(url, f"bench-{name}")
    env = {"DATABASE_URL": url, "MODERATION_PROVIDER": "local", "REDIS_URL": "", "Q_NAME": f"bench-{name}",
           "QUALITY_SETTLE_S": "1"}
    if shadow:
        code.python(url, SHADOW_START, None, env={"Q_NAME": f"bench-{name}", "MODERATION_PROVIDER": "local"})
    with common.Platform(web_workers=3, clusters=1, q_workers=2, env=env, server=server) as platform:
        warm = paced(platform.port, token, rate=10, seconds=2, tag="warm")
        wait_final(url, None, 300, warm)
        started = checkout.query(url, "SELECT now()")[0][0]
        accepted = paced(platform.port, token, rate=rate, seconds=seconds, tag="run")
        ids, _ = wait_final(url, started, 600, accepted)
        judged_at_end = _judged(url)
        if shadow:
            time.sleep(65)  # the quality minute's next run
        judged_later = _judged(url)
    final, window = finished(url, started)
    latencies = [row[0] * 1000 for row in checkout.query(
        url, "SELECT extract(epoch FROM completed_at - created_at)::float FROM moderation_contentreview "
             "WHERE created_at >= %s AND completed_at IS NOT NULL", [started])]
    return {"shadow": shadow, "reviews": len(ids), "rate": final / window if window else 0.0,
            "p50": common.percentile(latencies, 50), "p95": common.percentile(latencies, 95),
            "p99": common.percentile(latencies, 99), "judged_at_end": judged_at_end, "judged_later": judged_later}


def _judged(url: str) -> int:
    return checkout.query(url, "SELECT count(*) FROM moderation_shadowverdict")[0][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=25.0, help="submissions a second")
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--server", choices=sorted(common.SERVERS), default="granian")
    args = parser.parse_args()
    common.setup_driver()
    code = checkout.this()
    print(f"Shadow on and off: {args.rate:g} submissions/s for {args.seconds:g} s, {args.server}, "
          f"the local model, {os.cpu_count()} CPUs, {args.rounds} rounds", flush=True)
    rows, by_mode = [], {False: [], True: []}
    for round_no in range(args.rounds):
        for shadow in (False, True):
            result = one(code, shadow=shadow, rate=args.rate, seconds=args.seconds, server=args.server,
                         tag=str(round_no))
            by_mode[shadow].append(result)
            rows.append([round_no + 1, "on" if shadow else "off", result["reviews"], f"{result['rate']:.1f}",
                         f"{result['p50']:.0f}", f"{result['p95']:.0f}", f"{result['p99']:.0f}",
                         result["judged_at_end"] if shadow else "-", result["judged_later"] if shadow else "-"])
            print(common.table(["round", "shadow", "reviews", "reviews/s", "p50 ms", "p95 ms", "p99 ms",
                                "judged by the end", "a minute later"], rows[-1:]), flush=True)
    print(common.table(["round", "shadow", "reviews", "reviews/s", "p50 ms", "p95 ms", "p99 ms", "judged by the end",
                        "a minute later"], rows))
    off = sorted(r["p95"] for r in by_mode[False])
    on = sorted(r["p95"] for r in by_mode[True])
    median = lambda values: values[len(values) // 2]  # noqa: E731
    print(f"live p95, median of the rounds: off {median(off):.0f} ms, on {median(on):.0f} ms: "
          f"ratio on/off {median(on) / median(off):.2f} (target: at most 1.10)")


if __name__ == "__main__":
    main()
