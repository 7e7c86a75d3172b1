"""Each client's webhook endpoint is gated on its own: a concurrency cap and a circuit breaker.

One client's slow or dead receiver must never take the delivery capacity every client shares
(docs/design.md, "Notifications"). Both gates are decided under one lock per client,
a PostgreSQL advisory lock held for the deciding transaction, so they hold across every worker
process and host:

- **Concurrency cap:** at most NOTIFY_CLIENT_CONCURRENCY attempts of one client in flight (an
  attempt is in flight while its notification's lease, `locked_until`, runs). Another attempt
  is deferred, not counted as an attempt.
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
from django.db import connection, transaction

from audit.models import EventKind
from moderation.models import CircuitState, DecisionNotification, NotificationStatus, WebhookCircuit
from moderation.services._audit import record_event

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(namespace, client id): the namespace keeps these apart from other locks.
_CLIENT_LOCK_NAMESPACE = 0x6E6F7466  # "notf"


@dataclass(frozen=True)
class Deferred:
    reason: str
    retry_at: datetime


def lock_client(client_id: int) -> None:
    """Serialise the gate decisions of one client (until the transaction ends)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_CLIENT_LOCK_NAMESPACE, client_id])


def in_flight(client_id: int, now: datetime) -> int:
    return DecisionNotification.objects.filter(
        client_id=client_id, status=NotificationStatus.PENDING, locked_until__gt=now
    ).count()


def _circuit(client_id: int) -> WebhookCircuit:
    return WebhookCircuit.objects.get_or_create(client_id=client_id)[0]


def gate_admit(*, client_id: int, now: datetime) -> Deferred | None:
    """May an attempt for this client start now? None: yes. Call in a transaction, after
    lock_client, and start the attempt (set its lease) in the same transaction."""
    circuit, busy = _circuit(client_id), in_flight(client_id, now)
    if circuit.state == CircuitState.OPEN:
        reopen_at = circuit.opened_at + timedelta(seconds=settings.NOTIFY_BREAKER_COOLDOWN_S)
        if now < reopen_at:
            return Deferred("client endpoint paused (circuit open)", reopen_at)
        if busy:
            return Deferred("client endpoint paused (an attempt is still in flight)", now + _busy_wait())
        _set(circuit, CircuitState.HALF_OPEN, now, "cooldown over: one trial attempt")
        return None
    if circuit.state == CircuitState.HALF_OPEN and busy:
        return Deferred("client endpoint on trial (one attempt in flight)", now + _busy_wait())
    if busy >= settings.NOTIFY_CLIENT_CONCURRENCY:
        return Deferred(f"client has {busy} deliveries in flight", now + _busy_wait())
    return None


def gate_record(*, client_id: int, delivered: bool, now: datetime) -> None:
    """Feed one finished attempt to the client's breaker (its own short transaction)."""
    with transaction.atomic():
        lock_client(client_id)
        circuit = _circuit(client_id)
        if delivered:
            if circuit.state != CircuitState.CLOSED:
                _set(circuit, CircuitState.CLOSED, now, "an attempt succeeded")
            elif circuit.failures:
                WebhookCircuit.objects.filter(pk=circuit.pk).update(failures=0)
            return
        failures = circuit.failures + 1
        WebhookCircuit.objects.filter(pk=circuit.pk).update(failures=failures)
        if circuit.state == CircuitState.HALF_OPEN:
            _set(circuit, CircuitState.OPEN, now, "the trial attempt failed")
        elif circuit.state == CircuitState.CLOSED and failures >= settings.NOTIFY_BREAKER_FAILURES:
            _set(circuit, CircuitState.OPEN, now, f"{failures} attempts in a row failed")


def _busy_wait() -> timedelta:
    """When a deferred notification is looked at again: about when an attempt in flight ends."""
    return timedelta(seconds=min(settings.NOTIFY_DEADLINE_S, settings.NOTIFY_BACKOFF_S))


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
