"""A circuit breaker per provider.

Closed: calls flow. When, over the last BREAKER_WINDOW_S, at least BREAKER_MIN_CALLS attempts
were made and BREAKER_FAILURE_RATIO of them failed (timeouts, connection errors, 5xx, malformed
answers), it opens: calls pause, new reviews wait in `pending`. After BREAKER_COOLDOWN_S it lets
exactly one trial call through (half-open): success closes it, failure opens it again.

The failure window is read from the attempt records, so every process sees the same figures;
the state row is written only when it changes, with conditional updates, so of several
processes deciding at once exactly one performs each change.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from audit.models import EventKind
from moderation.models import PROVIDER_FAILURES, AttemptOutcome, CircuitState, ProviderAttempt, ProviderCircuit
from moderation.db.compiled import CompiledSelect
from moderation.services.transitions import record_event

logger = logging.getLogger(__name__)

# What counts in the window: answers that say something about the provider's health.
# (Not `unsupported`: that is decided before any call, so it says nothing about the provider.)
_COUNTED = (*PROVIDER_FAILURES, AttemptOutcome.RESULT, AttemptOutcome.ACCEPTED, AttemptOutcome.HTTP_4XX)

CLOSED, TRIAL = "closed", "trial"


# Read by every dispatch, three times a batch: compiled once (moderation/db/compiled.py).
_CIRCUIT = CompiledSelect(lambda provider: ProviderCircuit.objects.filter(provider=provider))


def circuit_get(provider: str) -> ProviderCircuit:
    circuit = _CIRCUIT.first(provider)
    if circuit is None:
        circuit, _ = ProviderCircuit.objects.get_or_create(provider=provider)
    return circuit


def _trial_lease() -> timedelta:
    """How long a trial call may take before its caller is presumed gone."""
    return timedelta(seconds=settings.Q_TASK_TIMEOUT_S)


def _may_start(circuit: ProviderCircuit, now: datetime) -> bool:
    if circuit.state == CircuitState.CLOSED:
        return True
    if circuit.state == CircuitState.OPEN:
        return now >= circuit.opened_at + timedelta(seconds=settings.BREAKER_COOLDOWN_S)
    return circuit.probe_started_at is None or circuit.probe_started_at < now - _trial_lease()


def breaker_may_claim(*, provider: str, now: datetime | None = None, circuit: ProviderCircuit | None = None) -> bool:
    """Should new work be started for this provider? (A look: it takes nothing.) `circuit`: its
    row, when the caller has just read it."""
    return _may_start(circuit or circuit_get(provider), now or timezone.now())


def breaker_admit(*, provider: str, now: datetime | None = None) -> str | None:
    """May this caller send a request now? "closed": calls flow. "trial": the circuit was open
    past its cooldown (or its trial's caller vanished) and this caller, alone, makes the trial
    call. None: refused."""
    now = now or timezone.now()
    circuit = circuit_get(provider)
    if circuit.state == CircuitState.CLOSED:
        return CLOSED
    if not _may_start(circuit, now):
        return None
    won = ProviderCircuit.objects.filter(pk=circuit.pk, state=circuit.state, changed_at=circuit.changed_at).update(
        state=CircuitState.HALF_OPEN, probe_started_at=now, changed_at=now
    )
    if won:
        _changed(provider, circuit.state, CircuitState.HALF_OPEN, "cooldown over: one trial call")
    return TRIAL if won else None


def breaker_allows(*, provider: str, now: datetime | None = None) -> bool:
    return breaker_admit(provider=provider, now=now) is not None


def breaker_retry_at(*, provider: str, now: datetime | None = None) -> datetime:
    """When a refused caller should look again."""
    now = now or timezone.now()
    circuit = circuit_get(provider)
    if circuit.state == CircuitState.OPEN and circuit.opened_at:
        return max(circuit.opened_at + timedelta(seconds=settings.BREAKER_COOLDOWN_S), now)
    return now + timedelta(seconds=settings.BREAKER_COOLDOWN_S)


def breaker_record(*, provider: str, outcome: str, started_at: datetime, now: datetime | None = None) -> None:
    """Feed one attempt's outcome (and when it started) to the breaker. Call outside any transaction."""
    if outcome not in _COUNTED:
        return
    now = now or timezone.now()
    failed = outcome in PROVIDER_FAILURES
    circuit = circuit_get(provider)
    if circuit.state == CircuitState.HALF_OPEN:
        if circuit.probe_started_at is None or started_at < circuit.probe_started_at:
            return  # an attempt from before the trial: only the trial's own answer decides
        to = CircuitState.OPEN if failed else CircuitState.CLOSED
        won = ProviderCircuit.objects.filter(
            pk=circuit.pk, state=CircuitState.HALF_OPEN, probe_started_at=circuit.probe_started_at
        ).update(
            state=to, opened_at=now if failed else circuit.opened_at, probe_started_at=None, changed_at=now
        )
        if won:
            _changed(provider, CircuitState.HALF_OPEN, to, f"trial call: {outcome}")
            if to == CircuitState.CLOSED:
                _resume_waiting_reviews()
        return
    if circuit.state != CircuitState.CLOSED or not failed:
        return
    window = ProviderAttempt.objects.filter(
        provider=provider, started_at__gte=now - timedelta(seconds=settings.BREAKER_WINDOW_S), outcome__in=_COUNTED
    ).aggregate(total=Count("id"), failures=Count("id", filter=Q(outcome__in=PROVIDER_FAILURES)))
    total, failures = window["total"], window["failures"]
    if total < settings.BREAKER_MIN_CALLS or failures / total < settings.BREAKER_FAILURE_RATIO:
        return
    won = ProviderCircuit.objects.filter(pk=circuit.pk, state=CircuitState.CLOSED).update(
        state=CircuitState.OPEN, opened_at=now, last_failure_ratio=failures / total, changed_at=now
    )
    if won:
        _changed(provider, CircuitState.CLOSED, CircuitState.OPEN, f"{failures} of {total} attempts failed in the window")


def _changed(provider: str, from_state: str, to_state: str, why: str) -> None:
    logger.warning("provider %s circuit: %s -> %s (%s)", provider, from_state, to_state, why)
    record_event(EventKind.CIRCUIT_CHANGED, provider=provider, from_state=from_state, to_state=to_state, why=why)


def _resume_waiting_reviews() -> None:
    """The provider is back: let the sweeper re-enqueue the reviews that waited, now."""
    from moderation.jobs import enqueue_on_commit

    enqueue_on_commit("moderation.tasks.sweep")


def review_wait_for_provider(*, review_id, now: datetime | None = None) -> None:
    """A pending review found its provider's circuit open: it waits (since when is kept, for
    BREAKER_MAX_WAIT_S), marked for the sweeper to enqueue again once work may flow."""
    from django.db.models.functions import Coalesce

    from moderation.models import ContentReview, ReviewStatus

    ContentReview.objects.filter(pk=review_id, status=ReviewStatus.PENDING).update(
        last_enqueued_at=None, provider_wait_since=Coalesce("provider_wait_since", now or timezone.now())
    )
