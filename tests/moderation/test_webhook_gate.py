"""One client's webhook receiver cannot hold the delivery capacity every client shares: each
attempt has an overall deadline, each client a concurrency cap held across processes and a
circuit breaker of its own, and notifications run on their own cluster."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from lab.simulator import WebhookReceiver
from moderation import services
from moderation.models import ApiClient, CircuitState, DecisionNotification, NotificationAttempt
from tests.helpers import collide, decided, queued_tasks, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def point_at(client, receiver: WebhookReceiver) -> None:
    ApiClient.objects.filter(pk=client.pk).update(webhook_url=receiver.url)
    client.refresh_from_db()


def test_notifications_are_enqueued_on_their_own_cluster_and_moderation_on_its_own(api_client, settings):
    receiver = WebhookReceiver()
    try:
        point_at(api_client, receiver)
        submit(api_client)
        decided(api_client, "approved")
    finally:
        receiver.stop()

    clusters = {task["func"].rsplit(".", 1)[-1]: task["cluster"] for task in queued_tasks()}
    assert clusters == {"moderate_review": settings.Q_CLUSTER["name"], "deliver_notification": settings.NOTIFY_CLUSTER}
    assert settings.NOTIFY_CLUSTER in settings.Q_CLUSTER["ALT_CLUSTERS"]


def test_a_receiver_trickling_its_answer_is_cut_off_at_the_overall_deadline(api_client, settings):
    # Each byte comes well within the read timeout; the whole answer would take 40 s.
    settings.NOTIFY_TIMEOUT_S, settings.NOTIFY_DEADLINE_S = 2.0, 1.5
    receiver = WebhookReceiver(mode="trickle", trickle_s=1.0)
    point_at(api_client, receiver)
    decided(api_client, "approved")
    started = time.monotonic()
    try:
        outcome = services.notification_deliver(notification_id=DecisionNotification.objects.get().pk)
    finally:
        receiver.stop()

    assert outcome == "retry_scheduled"
    attempt = NotificationAttempt.objects.get()
    assert attempt.status_code is None and "deadline" in attempt.error, attempt.error
    assert time.monotonic() - started < 10  # the deadline, not the receiver's 40 s


@pytest.mark.django_db(transaction=True)
def test_concurrent_deliveries_for_one_client_respect_its_cap(api_client, other_client, settings):
    settings.NOTIFY_CLIENT_CONCURRENCY, settings.NOTIFY_TIMEOUT_S, settings.NOTIFY_DEADLINE_S = 1, 2.0, 2.0
    from moderation.models import WebhookCircuit

    hanging = WebhookReceiver(mode="hang")
    point_at(api_client, hanging)
    # A client that has had deliveries before (its breaker row exists: creating it would
    # serialise these attempts by itself, and hide a missing lock).
    WebhookCircuit.objects.create(client=api_client)
    for _ in range(4):
        decided(api_client, "approved")
    ids = list(DecisionNotification.objects.values_list("pk", flat=True))
    started = timezone.now()
    try:
        outcomes = collide(4, lambda i: services.notification_deliver(notification_id=ids[i]))
    finally:
        hanging.stop()

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert sum(o == "retry_scheduled" for o in outcomes) == 1, outcomes  # one attempt, held by the receiver
    assert sum(str(o).startswith("deferred: client has 1 deliveries in flight") for o in outcomes) == 3, outcomes
    assert NotificationAttempt.objects.count() == 1
    waiting = DecisionNotification.objects.filter(attempts=0).order_by("next_attempt_at")
    # Not attempts: each waits in the client's queue, due all along (not put off to a sweep);
    # the attempt that ended handed the oldest on to the job queue, for its one free slot.
    assert waiting.count() == 3 and all(n.next_attempt_at <= started for n in waiting)
    handed = [n.pk for n in waiting if n.last_enqueued_at is not None]
    assert handed == [waiting[0].pk]
    assert [t["kwargs"]["notification_id"] for t in queued_tasks("moderation.tasks.deliver_notification")][-1:] == handed


def test_a_client_whose_endpoint_keeps_failing_is_paused_alone_until_a_trial_succeeds(api_client, other_client, settings):
    settings.NOTIFY_BREAKER_FAILURES, settings.NOTIFY_BREAKER_COOLDOWN_S = 3, 60
    failing, healthy = WebhookReceiver(default_status=500), WebhookReceiver()
    point_at(api_client, failing)
    point_at(other_client, healthy)
    mine = [decided(api_client, "approved") for _ in range(5)]
    theirs = decided(other_client, "approved")
    notes = {r.pk: DecisionNotification.objects.get(decision__review=r).pk for r in [*mine, theirs]}
    now = timezone.now()
    try:
        first = [services.notification_deliver(notification_id=notes[r.pk], now=now) for r in mine[:3]]
        paused = services.notification_deliver(notification_id=notes[mine[3].pk], now=now)
        other = services.notification_deliver(notification_id=notes[theirs.pk], now=now)
        failing.default_status = 200
        later = now + timedelta(seconds=61)
        trial = services.notification_deliver(notification_id=notes[mine[3].pk], now=later)
        after = services.notification_deliver(notification_id=notes[mine[4].pk], now=later)
    finally:
        failing.stop()
        healthy.stop()

    assert first == ["retry_scheduled"] * 3
    assert paused.startswith("deferred: client endpoint paused"), paused
    assert other == "delivered"  # another client is never paused
    assert (trial, after) == ("delivered", "delivered")
    from moderation.models import WebhookCircuit

    assert WebhookCircuit.objects.get(client=api_client).state == CircuitState.CLOSED
    assert len(failing.received) == 5  # three failures, the trial, the next one: nothing while paused


@pytest.mark.django_db(transaction=True)
def test_without_the_client_lock_concurrent_attempts_exceed_the_cap(api_client, settings, monkeypatch):
    """The cap's guard matters: without the advisory lock, concurrent deliveries each count no
    attempt in flight and all start (the control for the cap test above). A barrier after the
    count makes every delivery count before any records its attempt, as the lock would prevent;
    a sleep in the lock's place left that to the scheduler, and the test was flaky under load."""
    from moderation.services import webhook_gate

    settings.NOTIFY_CLIENT_CONCURRENCY, settings.NOTIFY_TIMEOUT_S, settings.NOTIFY_DEADLINE_S = 1, 1.0, 1.0
    all_counted, counted = threading.Barrier(4), threading.Event()
    real_in_flight = webhook_gate.in_flight

    def in_flight_counted_together(client_id, now):
        busy = real_in_flight(client_id, now)
        if not counted.is_set():  # (the attempts' ends count too, each on its own)
            all_counted.wait(timeout=10)
            counted.set()
        return busy

    monkeypatch.setattr(services.notifications, "lock_client", lambda client_id: None)
    monkeypatch.setattr(webhook_gate, "in_flight", in_flight_counted_together)
    hanging = WebhookReceiver(mode="hang")
    point_at(api_client, hanging)
    from moderation.models import WebhookCircuit

    # (Created under the lock otherwise.) A fast client: the slow clients' share, which has a
    # lock of its own, would hold these attempts back too.
    WebhookCircuit.objects.create(client=api_client, fast=True)
    for _ in range(4):
        decided(api_client, "approved")
    ids = list(DecisionNotification.objects.values_list("pk", flat=True))
    try:
        outcomes = collide(4, lambda i: services.notification_deliver(notification_id=ids[i]))
    finally:
        hanging.stop()

    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert NotificationAttempt.objects.count() == 4  # the cap is 1


def proven_fast(client) -> None:
    """One notification delivered at once makes `client` fast (webhook_gate)."""
    notification = DecisionNotification.objects.get(decision__review=decided(client, "approved"))
    assert services.notification_deliver(notification_id=notification.pk) == "delivered"


@pytest.fixture
def half_for_the_slow(settings):
    """4 workers, half of them for the slow clients; attempts cut at 1 s."""
    settings.NOTIFY_WORKERS, settings.NOTIFY_SLOW_SHARE, settings.NOTIFY_CLIENT_CONCURRENCY = 4, 0.5, 2
    settings.NOTIFY_TIMEOUT_S, settings.NOTIFY_DEADLINE_S = 1.0, 1.0


def deliver_at_once(ids: list, receivers: list) -> list:
    """Deliver the notifications `ids` in as many threads at once; then stop the receivers."""
    try:
        outcomes = collide(len(ids), lambda i: services.notification_deliver(notification_id=ids[i]))
    finally:
        for receiver in receivers:
            receiver.stop()
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    return outcomes


def slow_and_fast_clients_deliver_at_once(count_together: bool, monkeypatch) -> list:
    """Four clients not yet proven fast (hanging receivers) and one fast client (a healthy
    receiver) deliver one notification each at once."""
    from moderation.services import webhook_gate

    receivers = [WebhookReceiver(mode="hang") for _ in range(4)] + [WebhookReceiver()]
    clients = [services.api_client_create(name=f"client-{i}", webhook_url=r.url)[0] for i, r in enumerate(receivers)]
    proven_fast(clients[4])
    ids = [DecisionNotification.objects.get(decision__review=decided(client, "approved")).pk for client in clients]
    if count_together:  # every slow client counts the share before any takes it
        all_counted, counted = threading.Barrier(4), threading.Event()
        real_count = webhook_gate.slow_in_flight

        def slow_in_flight_counted_together(now):
            taken = real_count(now)
            if not counted.is_set():
                all_counted.wait(timeout=10)
                counted.set()
            return taken

        monkeypatch.setattr(webhook_gate, "slow_in_flight", slow_in_flight_counted_together)
        monkeypatch.setattr(webhook_gate, "lock_slow_share", lambda: None)
    return deliver_at_once(ids, receivers)


@pytest.mark.django_db(transaction=True)
def test_slow_clients_together_hold_at_most_their_share_of_the_workers(half_for_the_slow, monkeypatch):
    outcomes = slow_and_fast_clients_deliver_at_once(False, monkeypatch)

    slow, fast = outcomes[:4], outcomes[4]
    assert fast == "delivered"  # a fast client finds a worker whatever the slow ones do
    assert sorted(slow).count("retry_scheduled") == 2, slow  # half of the 4 workers, cut at the deadline
    assert sum(o.startswith("deferred: the slow clients' share of the workers is taken (2 in flight)") for o in slow) == 2
    assert NotificationAttempt.objects.count() == 1 + 3  # (the one that proved the fast client fast)


@pytest.mark.django_db(transaction=True)
def test_without_the_share_lock_slow_clients_take_every_worker(half_for_the_slow, monkeypatch):
    """The control for the test above: the share's lock is what keeps its count true."""
    outcomes = slow_and_fast_clients_deliver_at_once(True, monkeypatch)

    assert outcomes[:4] == ["retry_scheduled"] * 4
    assert NotificationAttempt.objects.count() == 1 + 5


@pytest.mark.django_db(transaction=True)
def test_a_slow_client_has_one_attempt_in_flight_at_a_time_so_another_slow_client_gets_its_turn(half_for_the_slow):
    """Two clients not yet proven fast share the slow clients' two workers: the one with a
    backlog may not take both while the other waits (each would then wait a whole deadline)."""
    receivers = [WebhookReceiver(mode="hang"), WebhookReceiver(mode="hang")]
    backlogged, other = (services.api_client_create(name=f"slow-{i}", webhook_url=r.url)[0] for i, r in enumerate(receivers))
    ids = [DecisionNotification.objects.get(decision__review=decided(client, "approved")).pk
           for client in (backlogged, backlogged, backlogged, other)]

    outcomes = deliver_at_once(ids, receivers)

    assert outcomes[3] == "retry_scheduled"  # the other slow client got a worker
    assert sorted(outcomes[:3]) == ["deferred: client has 1 deliveries in flight, one at a time while slow"] * 2 + [
        "retry_scheduled"], outcomes


def test_the_gate_settings_are_sane():
    from moderation.services import webhook_gate

    assert django_settings.NOTIFY_DEADLINE_S >= django_settings.NOTIFY_TIMEOUT_S
    assert webhook_gate.Deferred("x", timezone.now()).reason == "x"
