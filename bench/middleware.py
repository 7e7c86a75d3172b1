"""What each middleware costs an API request, in-process.

    python -m bench.middleware [--requests 3000] [--rounds 3]

Production settings, Django's test client, a request that touches no database (a `GET
/api/v1/reviews/` without credentials: DRF's 401), so that the difference between two stacks is
the middleware alone. It times the full stack (settings.MIDDLEWARE), the full stack less each
middleware in turn, and the stack less the site's middleware /api/ requests skip
(moderation.api.middleware.SITE_ONLY), and the two an API answer cannot do without (its request
id, its JSON error bodies): what the whole stack costs. In batches of 100 requests interleaved in an order that
alternates; the figures are the median batch's CPU time of this process, in microseconds per
request. Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    common.setup(name=f"{common.BENCH_DB}_middleware", env={"LOG_LEVEL": "ERROR"})  # (every 401 logs a warning)
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.test import Client, override_settings

    from moderation.api.middleware import SITE_ONLY

    full = list(settings.MIDDLEWARE)
    stacks = {"full stack (settings.MIDDLEWARE)": full}
    for path in full:
        stacks[f"without {path.rsplit('.', 1)[-1]}"] = [m for m in full if m != path]
    stacks["the API's stack (the site's middleware skipped)"] = [m for m in full if m not in SITE_ONLY]
    stacks["the JSON errors alone (RequestId, ApiError)"] = full[:2]
    stacks["untrimmed (messages and simple-history on /api/ too)"] = [SITE_ONLY.get(m, m) for m in full]

    def client_for(stack: list[str]):
        """A test client whose handler built its chain from `stack` (once, on its first request)."""
        with override_settings(MIDDLEWARE=stack):
            client = Client()
            try:
                client.get("/api/v1/reviews/")
            except ImproperlyConfigured:  # another middleware needs the one left out
                return None
        return client

    clients = {name: client_for(stack) for name, stack in stacks.items()}
    timings: dict[str, list[float]] = {name: [] for name, client in clients.items() if client is not None}
    names = list(timings)
    batch = 100
    for round_no in range(args.rounds * args.requests // batch):  # batches interleaved: drift hits all alike
        for name in names if round_no % 2 == 0 else names[::-1]:
            client = clients[name]
            started = time.process_time()  # CPU time: what the process spent, not what the machine did
            for _ in range(batch):
                answer = client.get("/api/v1/reviews/")
            timings[name].append((time.process_time() - started) / batch * 1e6)
            assert answer.status_code == 401, answer.content
    base = statistics.median(timings[names[0]])
    rows = [[name, statistics.median(values), base - statistics.median(values)] for name, values in timings.items()]
    rows += [[name, "needs another middleware", "-"] for name, client in clients.items() if client is None]
    print(f"{args.requests} requests x {args.rounds} rounds, GET /api/v1/reviews/ without credentials (401)")
    print(common.table(["stack", "us per request", "us saved"], rows))


if __name__ == "__main__":
    main()
