"""The notification workers are shared fairly: a client over its cap waits in its own queue and
is delivered as soon as one of its slots frees, and slow clients (or clients not yet proven
fast) share a bounded part of the workers, so a healthy client always finds one free.

The clusters here are real enough: NOTIFY_WORKERS threads take the jobs from django-q2's own
broker queue and run the real task (lab/notification_workers.py), against PostgreSQL, with
receivers on loopback that trickle their answer a byte a second, so each of their attempts
holds a worker until NOTIFY_DEADLINE_S. The figures are printed (`pytest -s`);
bench/notify_share.py measures them with the production deadline.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from django.utils import timezone

from lab.notification_workers import NotificationWorkers, wait_until
from lab.simulator import WebhookReceiver
from moderation.models import ApiClient, DecisionNotification, NotificationAttempt, NotificationStatus
from moderation import services
from moderation.services import api_client_create
from tests.helpers import decided

pytestmark = pytest.mark.django_db(transaction=True)

# Below this a p95 is noise on a shared two-core machine: "twice the baseline" is measured
# against at least this much. A slow client's attempt holds its worker for DEADLINE_S, three
# times as long as the bound: the broken behaviour cannot pass for noise.
BASELINE_FLOOR_S = 1.0
DEADLINE_S = 6.0


@pytest.fixture
def notify_settings(settings):
    settings.NOTIFY_WORKERS, settings.NOTIFY_CLIENT_CONCURRENCY = 4, 2
    settings.NOTIFY_TIMEOUT_S, settings.NOTIFY_DEADLINE_S = 2.0, DEADLINE_S
    return settings


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def client_at(name: str, receiver: WebhookReceiver) -> ApiClient:
    client, _ = api_client_create(name=name, webhook_url=receiver.url)
    return client


def latencies(client: ApiClient, reviews) -> list[float]:
    """Seconds from each notification's write (its decision's commit) to its delivery."""
    rows = DecisionNotification.objects.filter(client=client, review__in=reviews)
    return [(n.delivered_at - n.created_at).total_seconds() if n.delivered_at else math.inf for n in rows]


def decide_every(client: ApiClient, count: int, every_s: float, also=None) -> list:
    """`count` decisions for `client`, one every `every_s` (and `also()` each time)."""
    reviews = []
    for _ in range(count):
        reviews.append(decided(client, "approved"))
        if also:
            also()
        time.sleep(every_s)
    return reviews


def delivered(client: ApiClient, reviews) -> bool:
    return DecisionNotification.objects.filter(
        client=client, review__in=reviews, status=NotificationStatus.DELIVERED
    ).count() == len(reviews)


def figures(label: str, values: list[float]) -> str:
    return f"{label} p50 {p(values, 0.5):.2f} s, p95 {p(values, 0.95):.2f} s"


@pytest.mark.parametrize("slow_count", [2, 4])
def test_slow_clients_leave_a_healthy_client_its_notification_latency(notify_settings, slow_count):
    healthy_receiver = WebhookReceiver()
    slow_receivers = [WebhookReceiver(mode="trickle", trickle_s=1.0) for _ in range(slow_count)]
    healthy = client_at("healthy", healthy_receiver)
    slow = [client_at(f"slow-{i}", r) for i, r in enumerate(slow_receivers)]
    turn = iter(range(10**6))

    def one_more_for_a_slow_client() -> None:
        decided(slow[next(turn) % slow_count], "approved")

    try:
        with NotificationWorkers(notify_settings.NOTIFY_WORKERS) as workers:
            baseline_reviews = decide_every(healthy, 20, 0.2)
            assert wait_until(lambda: delivered(healthy, baseline_reviews), timeout_s=30)
            baseline = latencies(healthy, baseline_reviews)
            for client in slow:  # each slow client has a backlog: its attempts never stop
                decide_every(client, 3, 0)
            # Longer than one slow attempt: the slow clients hand their share on meanwhile.
            noisy_reviews = decide_every(healthy, 35, 0.2, also=one_more_for_a_slow_client)
            wait_until(lambda: delivered(healthy, noisy_reviews), timeout_s=3 * DEADLINE_S)
            noisy = latencies(healthy, noisy_reviews)
            slow_attempts = NotificationAttempt.objects.filter(notification__client__in=slow).count()
            for receiver in slow_receivers:  # their attempts in flight end at once
                receiver.stop()
    finally:
        healthy_receiver.stop()
        for receiver in slow_receivers:
            receiver.stop()

    print(f"\n{slow_count} slow clients (trickling, {DEADLINE_S:g} s deadline), the healthy client's seconds "
          f"from decision to delivery: {figures('baseline', baseline)}; {figures('with them', noisy)}; "
          f"slow attempts started {slow_attempts}")
    assert not workers.errors, workers.errors
    assert slow_attempts >= 2  # the slow clients' receivers really were being called
    assert p(noisy, 0.95) <= 2 * max(p(baseline, 0.95), BASELINE_FLOOR_S), (baseline, noisy)


def test_a_burst_for_one_client_is_delivered_as_its_slots_free_not_at_the_next_sweep(notify_settings):
    """20 decisions at once for a client with 2 slots: each delivery that ends hands the
    client's next waiting notification to the job queue. Before, the 18 over the cap were put
    off to the sweep (every 30 s): about a minute and a half for the last of them."""
    receiver = WebhookReceiver()
    client = client_at("bursty", receiver)
    try:
        with NotificationWorkers(notify_settings.NOTIFY_WORKERS, sweep_every_s=30) as workers:
            started = time.monotonic()
            reviews = decide_every(client, 20, 0)
            all_delivered = wait_until(lambda: delivered(client, reviews), timeout_s=10)
            took = time.monotonic() - started
            values = latencies(client, reviews)
    finally:
        receiver.stop()

    print(f"\nburst of 20 for one client: {figures('seconds from decision to delivery', values)}, "
          f"max {max(values):.2f} s, all in {took:.2f} s")
    assert not workers.errors, workers.errors
    assert all_delivered, sorted(values)
    # Each delivered once: at least once, and the handing on doubles nothing.
    assert len(receiver.received) == 20
    assert len({headers["webhook-id"] for headers, _ in receiver.received}) == 20
    assert NotificationAttempt.objects.filter(notification__client=client).count() == 20


@pytest.mark.parametrize("guarded", [True, False], ids=["with the client lock", "control: without it"])
def test_a_slot_freed_while_a_notification_is_refused_for_it_is_handed_on(api_client, settings, monkeypatch, guarded):
    """The race of the hand-on: one notification is refused because the client's only slot is
    taken, while the attempt holding that slot ends. The ending attempt settles under the
    client's lock, so it either sees the refused one waiting and hands it on, or frees the slot
    before the refusal is decided. The refusal here pauses (up to 2 s) after counting the slot
    taken, until the attempt has ended: with the lock, the attempt waits for the refusal to
    commit instead and hands it on; without it (the control), it ends first, sees nothing
    waiting, and the refused notification waits for the sweep."""
    from django.db import connection
    from django_q.models import OrmQ

    from moderation.services import notifications, webhook_gate
    from moderation.services.notifications import delivery_begin, delivery_finish
    from tests.helpers import queued_tasks
    from tests.moderation.test_webhook_gate import proven_fast

    settings.NOTIFY_CLIENT_CONCURRENCY = 1
    receiver = WebhookReceiver()
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=receiver.url)
    api_client.refresh_from_db()
    proven_fast(api_client)
    first, second = (DecisionNotification.objects.get(decision__review=decided(api_client, "approved")).pk for _ in range(2))
    OrmQ.objects.all().delete()  # the jobs the decisions enqueued: only the hand-on's count below
    holding = delivery_begin(first, timezone.now())
    counted, ended = threading.Event(), threading.Event()
    real_in_flight, real_lock = webhook_gate.in_flight, notifications.lock_client

    def in_flight(client_id, now):
        busy = real_in_flight(client_id, now)
        if threading.current_thread().name == "refused":
            counted.set()
            ended.wait(timeout=2)
        return busy

    monkeypatch.setattr(webhook_gate, "in_flight", in_flight)
    if not guarded:
        monkeypatch.setattr(notifications, "lock_client",
                            lambda client_id: None if threading.current_thread().name == "ending" else real_lock(client_id))
    outcomes: dict[str, str] = {}

    def refused() -> None:
        outcomes["refused"] = services.notification_deliver(notification_id=second)

    def ending() -> None:
        counted.wait(timeout=10)
        outcomes["ending"] = delivery_finish(*holding, 200, "", 5)
        ended.set()

    threads = [threading.Thread(target=closing(f), name=f.__name__) for f in (refused, ending)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        receiver.stop()
        connection.close()

    assert outcomes == {"refused": "deferred: client has 1 deliveries in flight", "ending": "delivered"}, outcomes
    handed = [t["kwargs"]["notification_id"] for t in queued_tasks("moderation.tasks.deliver_notification")]
    waiting = DecisionNotification.objects.get(pk=second)
    if guarded:
        assert handed == [second] and waiting.last_enqueued_at is not None
    else:
        assert handed == [] and waiting.last_enqueued_at is None  # left for the sweep: the race the lock closes


def closing(target):
    """`target`, closing the thread's own database connection when it returns."""
    from django.db import connection

    def run() -> None:
        try:
            target()
        finally:
            connection.close()

    run.__name__ = target.__name__
    return run


def test_a_clients_backlog_costs_the_sweep_only_as_many_jobs_as_it_has_slots(api_client, other_client, settings):
    """The sweep enqueues each client's oldest due notifications, as many as could start at
    once: the rest are handed on as its attempts end. One job per waiting notification would
    put a slow client's whole backlog in the shared job queue ahead of everyone, every sweep."""
    from datetime import timedelta

    from django_q.models import OrmQ

    from tests.helpers import queued_tasks

    settings.NOTIFY_CLIENT_CONCURRENCY = 2
    receivers = [WebhookReceiver(), WebhookReceiver()]
    for client, receiver in zip((api_client, other_client), receivers, strict=True):
        ApiClient.objects.filter(pk=client.pk).update(webhook_url=receiver.url)
        client.refresh_from_db()
    backlog = [decided(api_client, "approved") for _ in range(10)]
    decided(other_client, "approved")
    OrmQ.objects.all().delete()  # their jobs were lost: the sweep is all that is left
    try:
        services.reviews_sweep(now=timezone.now() + timedelta(minutes=10))
    finally:
        for receiver in receivers:
            receiver.stop()

    swept = [t["kwargs"]["notification_id"] for t in queued_tasks("moderation.tasks.deliver_notification")]
    oldest = DecisionNotification.objects.filter(review__in=backlog).order_by("next_attempt_at", "pk")[:2]
    mine = [n for n in swept if DecisionNotification.objects.get(pk=n).client_id == api_client.pk]
    assert sorted(mine) == sorted(n.pk for n in oldest)
    assert len(swept) == 2 + 1
