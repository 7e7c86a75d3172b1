"""Each client's webhook endpoint is gated on its own: a concurrency cap, a share of the workers
and a circuit breaker.

One client's slow or dead receiver must never take the delivery capacity every client shares
(docs/design.md, "Notifications"). The gates are decided under one lock per client, a PostgreSQL
advisory lock held for the deciding transaction, so they hold across every worker process and
host:

- **Concurrency cap:** at most NOTIFY_CLIENT_CONCURRENCY attempts of one client in flight (an
  attempt is in flight while its notification's lease, `locked_until`, runs). Another waits in
  the client's backlog (not counted as an attempt) until an attempt of the client ends: that
  attempt hands the client's next waiting notification to the job queue (gate_vacancies, then
  notifications.py). The sweep stays the safety net for a hand-over lost with its process.
- **Share of the workers:** a client is *fast* once its last attempt ended within
  NOTIFY_SLOW_AFTER_S and none of its attempts in flight has run longer. Every other client
  (slow, or with no attempt yet) is *slow*: it has one attempt in flight at a time, and the
  slow clients together hold at most NOTIFY_SLOW_SHARE of NOTIFY_WORKERS attempts in flight
  (counted under a lock of its own, taken after the client's), so a fast client always finds a
  free worker. A slow attempt that ends hands the share on to the slow client, with none in
  flight, that has waited longest. This is the slow lane of the webhook senders that isolate
  slow endpoints: a trickling receiver costs its own client time, not everyone's.
- **Circuit breaker**, like the provider's (moderation/services/breaker.py) but per client:
  NOTIFY_BREAKER_FAILURES failed attempts in a row open it; the client's notifications then
  wait NOTIFY_BREAKER_COOLDOWN_S, after which one trial attempt alone decides (half-open): a
  2xx closes it, a failure opens it again. Other clients are never paused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q

from audit.models import EventKind
from moderation import sizing
from moderation.models import CircuitState, DecisionNotification, NotificationStatus, WebhookCircuit
from moderation.services.transitions import record_event

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(namespace, key): the namespaces keep these apart from other locks.
_CLIENT_LOCK_NAMESPACE = 0x6E6F7466  # "notf", key: the client's id
_SLOW_SHARE_LOCK = (0x6E736C77, 0)  # "nslw": the one lock of the slow clients' share


@dataclass(frozen=True)
class Deferred:
    """Why an attempt may not start now. `retry_at`: when the notification is due again (the
    sweep enqueues it then); None: it stays due and waits in the client's backlog for a slot."""

    reason: str
    retry_at: datetime | None = None


@dataclass(frozen=True)
class Vacancies:
    """Slots an ended attempt leaves: the client's own, and the slow clients' share's."""

    client: int
    slow_share: int


def lock_client(client_id: int) -> None:
    """Serialise the gate decisions of one client (until the transaction ends)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_CLIENT_LOCK_NAMESPACE, client_id])


def lock_slow_share() -> None:
    """Serialise the decisions on the slow clients' share (until the transaction ends). Taken
    after a client's lock, never before: every path takes them in this order."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", list(_SLOW_SHARE_LOCK))


def attempt_lease() -> timedelta:
    """How long a started attempt holds its notification (`locked_until`): past its deadline."""
    return timedelta(seconds=settings.NOTIFY_DEADLINE_S + 30)


def in_flight(client_id: int, now: datetime) -> int:
    return attempts_in_flight(now).filter(client_id=client_id).count()


def client_cap(*, fast: bool) -> int:
    """Attempts of one client that may be in flight at once: a slow client's go one at a time."""
    return settings.NOTIFY_CLIENT_CONCURRENCY if fast else 1


def slow_share() -> int:
    """Attempts of slow clients that may be in flight at once, across every process."""
    return sizing.slow_share_of(settings.NOTIFY_WORKERS, settings.NOTIFY_SLOW_SHARE)


def slow_in_flight(now: datetime) -> int:
    """Attempts in flight that take the slow clients' share: those of slow clients, and those
    running longer than NOTIFY_SLOW_AFTER_S whoever's they are."""
    return attempts_in_flight(now).filter(Q(client__webhook_circuit__fast=False) | _running_long(now)).count()


def attempts_in_flight(now: datetime):
    """Notifications with an attempt in flight (its lease runs)."""
    return DecisionNotification.objects.filter(status=NotificationStatus.PENDING, locked_until__gt=now)


def _running_long(now: datetime) -> Q:
    """Attempts in flight that started over NOTIFY_SLOW_AFTER_S ago (their lease ends sooner)."""
    return Q(locked_until__lt=now + attempt_lease() - timedelta(seconds=settings.NOTIFY_SLOW_AFTER_S))


def _circuit(client_id: int) -> WebhookCircuit:
    return WebhookCircuit.objects.get_or_create(client_id=client_id)[0]


def _is_fast(circuit: WebhookCircuit, busy: int, now: datetime) -> bool:
    return circuit.fast and not (busy and attempts_in_flight(now).filter(_running_long(now), client_id=circuit.client_id).exists())


def gate_admit(*, client_id: int, now: datetime) -> Deferred | None:
    """May an attempt for this client start now? None: yes. Call in a transaction, after
    lock_client, and start the attempt (set its lease) in the same transaction."""
    circuit, busy = _circuit(client_id), in_flight(client_id, now)
    if circuit.state == CircuitState.OPEN:
        reopen_at = circuit.opened_at + timedelta(seconds=settings.NOTIFY_BREAKER_COOLDOWN_S)
        if now < reopen_at:
            return Deferred("client endpoint paused (circuit open)", reopen_at)
        if busy:
            return Deferred("client endpoint paused (an attempt is still in flight)")
    elif circuit.state == CircuitState.HALF_OPEN and busy:
        return Deferred("client endpoint on trial (one attempt in flight)")
    fast = _is_fast(circuit, busy, now)
    if busy >= client_cap(fast=fast):
        return Deferred(f"client has {busy} deliveries in flight" + ("" if fast else ", one at a time while slow"))
    if not fast:
        lock_slow_share()
        taken = slow_in_flight(now)
        if taken >= slow_share():
            return Deferred(f"the slow clients' share of the workers is taken ({taken} in flight)")
    if circuit.state == CircuitState.OPEN:
        _set(circuit, CircuitState.HALF_OPEN, now, "cooldown over: one trial attempt")
    return None


def gate_record(*, client_id: int, delivered: bool, took_s: float, now: datetime) -> Vacancies:
    """Feed one ended attempt to the client's breaker and pace, and say which slots it leaves
    for waiting notifications. Call in the transaction that settles the attempt, after
    lock_client, so that a notification refused meanwhile is seen waiting (or sees the slot)."""
    circuit = _circuit(client_id)
    was_fast, fast = circuit.fast, took_s <= settings.NOTIFY_SLOW_AFTER_S
    if fast != was_fast:
        WebhookCircuit.objects.filter(pk=circuit.pk).update(fast=fast)
        circuit.fast = fast
    if delivered:
        if circuit.state != CircuitState.CLOSED:
            _set(circuit, CircuitState.CLOSED, now, "an attempt succeeded")
        elif circuit.failures:
            WebhookCircuit.objects.filter(pk=circuit.pk).update(failures=0)
    else:
        failures = circuit.failures + 1
        WebhookCircuit.objects.filter(pk=circuit.pk).update(failures=failures)
        if circuit.state == CircuitState.HALF_OPEN:
            _set(circuit, CircuitState.OPEN, now, "the trial attempt failed")
        elif circuit.state == CircuitState.CLOSED and failures >= settings.NOTIFY_BREAKER_FAILURES:
            _set(circuit, CircuitState.OPEN, now, f"{failures} attempts in a row failed")
    own = 0
    if circuit.state == CircuitState.CLOSED:  # (open: its notifications wait out the cooldown)
        busy = in_flight(client_id, now)
        own = max(client_cap(fast=_is_fast(circuit, busy, now)) - busy, 0)
    shared = 0
    if not (was_fast and fast):  # the attempt took a slot of the slow clients' share, or frees some
        lock_slow_share()
        shared = max(slow_share() - slow_in_flight(now), 0)
    return Vacancies(client=own, slow_share=shared)


def _set(circuit: WebhookCircuit, state: str, now: datetime, why: str) -> None:
    fields = {"state": state, "changed_at": now}
    if state == CircuitState.OPEN:
        fields["opened_at"] = now
    if state == CircuitState.CLOSED:
        fields["failures"] = 0
    WebhookCircuit.objects.filter(pk=circuit.pk).update(**fields)
    logger.warning("client %s webhook circuit: %s -> %s (%s)", circuit.client_id, circuit.state, state, why)
    record_event(EventKind.CIRCUIT_CHANGED, client=circuit.client_id, from_state=circuit.state, to_state=state, why=why)
    circuit.state = state
