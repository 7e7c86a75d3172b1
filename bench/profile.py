"""Where a request's time goes: cProfile over the submission or the callback path, in-process.

    python -m bench.profile --path submissions|callbacks [--requests 400] [--top 40] [--sort cumulative]

Production settings (`DEBUG=0`), Django's test client (no gunicorn, no network), a database of
its own (`<BENCH_DATABASE>_profile`). Each request is a new one: a new external id, or a signed
callback finalizing a seeded review in `processing` (its language stored, as the pipeline
leaves it). After a warm-up, prints the mean time per request without the profiler, then the
profile of a second series. Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import uuid

from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", choices=("submissions", "callbacks"), required=True)
    parser.add_argument("--requests", type=int, default=400, help="requests per series (two series)")
    parser.add_argument("--top", type=int, default=40, help="functions shown")
    parser.add_argument("--sort", default="cumulative", help="pstats sort key (cumulative, tottime...)")
    args = parser.parse_args()
    common.setup(name=f"{common.BENCH_DB}_profile")
    from django.test import Client

    send = _submissions(Client, args.requests) if args.path == "submissions" else _callbacks(Client, args.requests)
    send(50)  # warm-up: connections, caches, the policy
    started = time.perf_counter()
    send(args.requests)
    print(f"{args.path}: {(time.perf_counter() - started) / args.requests * 1000:.2f} ms per request "
          f"(mean of {args.requests}, no profiler)")
    profile = cProfile.Profile()
    profile.enable()
    send(args.requests)
    profile.disable()
    pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)


def _submissions(client_class, requests: int):
    _, token = common.bench_client("profile")
    client = client_class(HTTP_AUTHORIZATION=f"Bearer {token}")
    tag = uuid.uuid4().hex[:8]
    counter = iter(range(10**9))

    def send(n: int) -> None:
        for _ in range(n):
            answer = client.post("/api/v1/reviews/", {"external_id": f"{tag}-{next(counter)}", "content_type": "text",
                                                      "text": "thanks, this was helpful"}, content_type="application/json")
            if answer.status_code != 201:
                raise SystemExit(f"submission answered {answer.status_code}: {answer.content[:300]!r}")

    return send


def _callbacks(client_class, requests: int):
    from moderation.signing import sign

    client_id, _ = common.bench_client("profile")
    rows = iter(common.seed_processing(client_id, 50 + 2 * requests, f"profile-{uuid.uuid4().hex[:6]}-"))
    common.sql("UPDATE moderation_content SET language = 'en', language_candidates = '[[\"en\", 1.0]]' "
               "WHERE language_candidates IS NULL")
    client = client_class()

    def send(n: int) -> None:
        for _ in range(n):
            review_id, key = next(rows)
            body = common.callback_body(key, f"sim-{review_id}")
            headers = sign(common.WEBHOOK_SECRET, event_id=f"evt_{uuid.uuid4().hex}", body=body)
            answer = client.post("/api/v1/callbacks/webhook/", body, content_type="application/json",
                                 **{"HTTP_" + name.upper().replace("-", "_"): v for name, v in headers.items()})
            if answer.status_code >= 300:
                raise SystemExit(f"callback answered {answer.status_code}: {answer.content[:300]!r}")

    return send


if __name__ == "__main__":
    main()
