"""A healthy client's notification latency beside clients whose receivers trickle, and a burst
for one client, with the production deadline (NOTIFY_DEADLINE_S=15) and 4 workers.

    python -m bench.notify_share [--slow 2,4] [--samples 40] [--every 0.25] [--burst 20] [--database NAME]

The notification cluster runs as NOTIFY_WORKERS threads on django-q2's own broker queue, running
the real task (lab/notification_workers.py), with the sweep every 30 s as scheduled. First the
healthy client alone (the baseline), then beside each number of slow clients (receivers that
answer a byte a second, so each attempt holds a worker for the whole deadline; each slow client
has a backlog and more decisions keep coming for 1.5 deadlines), then a burst of decisions at
once for one fresh healthy client (NOTIFY_CLIENT_CONCURRENCY=2). Prints p50, p95 and max of the
seconds from each decision to its delivery. tests/moderation/test_notification_share.py checks
the same with a short deadline.
"""

from __future__ import annotations

import argparse
import math
import time
import uuid

from bench import common


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", default="2,4", help="numbers of slow clients to measure beside")
    parser.add_argument("--samples", type=int, default=40, help="healthy decisions in the baseline")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between two healthy decisions")
    parser.add_argument("--burst", type=int, default=20, help="decisions at once for one client")
    parser.add_argument("--database", default=common.BENCH_DB + "_notify")
    args = parser.parse_args()
    common.setup(name=args.database, env={"DEBUG": "1", "WEBHOOK_ALLOW_PRIVATE": "1", "NOTIFY_WORKERS": "4"})
    from django.conf import settings

    from lab.notification_workers import NotificationWorkers
    from lab.simulator import WebhookReceiver

    deadline = settings.NOTIFY_DEADLINE_S
    print(f"notification workers {settings.NOTIFY_WORKERS}, deadline {deadline:g} s, "
          f"per-client cap {settings.NOTIFY_CLIENT_CONCURRENCY}, sweep every 30 s")
    healthy_receiver = WebhookReceiver()
    healthy = _client("healthy", healthy_receiver)
    with NotificationWorkers(settings.NOTIFY_WORKERS, sweep_every_s=30) as workers:
        _line("healthy client alone", _measure(healthy, args.samples, args.every, wait_s=30))
        for count in [int(n) for n in args.slow.split(",") if n]:
            slow_receivers = [WebhookReceiver(mode="trickle", trickle_s=1.0) for _ in range(count)]
            slow = [_client(f"slow-{i}", r) for i, r in enumerate(slow_receivers)]
            for client in slow:
                for _ in range(3):
                    _decide(client)
            turn = iter(range(10**6))
            samples = math.ceil(1.5 * deadline / args.every)
            figures = _measure(healthy, samples, args.every, wait_s=2 * deadline,
                               also=lambda: _decide(slow[next(turn) % count]))
            _line(f"beside {count} slow clients", figures)
            for receiver in slow_receivers:
                receiver.stop()
        bursty = _client("bursty", healthy_receiver)
        started = time.monotonic()
        reviews = [_decide(bursty) for _ in range(args.burst)]
        _wait_delivered(bursty, reviews, 120)
        _line(f"burst of {args.burst} at once for one client", _latencies(bursty, reviews),
              f", all in {time.monotonic() - started:.1f} s")
    healthy_receiver.stop()
    if workers.errors:
        raise SystemExit(f"worker errors: {workers.errors!r}")


def _client(name: str, receiver):
    from moderation.services import api_client_create

    return api_client_create(name=f"{name}-{uuid.uuid4().hex[:6]}", webhook_url=receiver.url)[0]


def _decide(client):
    """One review of `client`, decided by a provider's result: its notification is written."""
    from moderation import services
    from moderation.providers import ModerationResult

    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text="hello")
    request = services.review_claim(review_id=review.pk, worker_id="bench")
    result = ModerationResult(model="bench", flagged=False, categories={"harassment": False},
                              category_scores={"harassment": 0.1}, provider_request_id="")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result, cause="provider_result")
    return review


def _measure(client, samples: int, every: float, *, wait_s: float, also=None) -> list[float]:
    reviews = []
    for _ in range(samples):
        reviews.append(_decide(client))
        if also:
            also()
        time.sleep(every)
    _wait_delivered(client, reviews, wait_s)
    return _latencies(client, reviews)


def _wait_delivered(client, reviews, timeout_s: float) -> None:
    from moderation.models import DecisionNotification, NotificationStatus

    rows = DecisionNotification.objects.filter(client=client, review__in=reviews, status=NotificationStatus.DELIVERED)
    deadline = time.monotonic() + timeout_s
    while rows.count() < len(reviews) and time.monotonic() < deadline:
        time.sleep(0.1)


def _latencies(client, reviews) -> list[float]:
    from moderation.models import DecisionNotification

    rows = DecisionNotification.objects.filter(client=client, review__in=reviews)
    return [(n.delivered_at - n.created_at).total_seconds() if n.delivered_at else math.inf for n in rows]


def _line(label: str, values: list[float], tail: str = "") -> None:
    late = sum(math.isinf(v) for v in values)
    p50, p95 = common.percentile(values, 50), common.percentile(values, 95)
    print(f"{label:45} n {len(values):3}  p50 {p50:6.2f} s  p95 {p95:6.2f} s  max {max(values):6.2f} s"
          + (f"  ({late} not delivered in time)" if late else "") + tail)


if __name__ == "__main__":
    main()
