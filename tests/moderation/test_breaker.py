"""The per-provider circuit breaker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from moderation import services, tasks
from moderation.models import CircuitState, ContentReview, ReviewStatus
from moderation.providers.base import ProviderClientError, ProviderServerError
from tests.helpers import collide, queued_tasks, result, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


@pytest.fixture
def breaker(settings):
    settings.BREAKER_MIN_CALLS = 4
    settings.BREAKER_FAILURE_RATIO = 0.5
    settings.BREAKER_WINDOW_S = 60
    settings.BREAKER_COOLDOWN_S = 30
    settings.BREAKER_MAX_WAIT_S = 0
    return settings


def trip(client, scripted, failures: int = 4) -> None:
    scripted.script = [ProviderServerError("503", http_status=503)] * failures
    for _ in range(failures):
        tasks.moderate_review(submit(client).pk)


def state() -> str:
    return services.circuit_get("scripted").state


def test_it_opens_when_the_failure_ratio_over_the_window_is_reached(api_client, scripted, breaker):
    scripted.script = [result(0.1), ProviderServerError("503", http_status=503), ProviderServerError("503", http_status=503)]
    for _ in range(3):
        tasks.moderate_review(submit(api_client).pk)
    assert state() == CircuitState.CLOSED  # 3 calls: below BREAKER_MIN_CALLS

    scripted.script = [ProviderServerError("503", http_status=503)]
    tasks.moderate_review(submit(api_client).pk)

    assert state() == CircuitState.OPEN
    event = PipelineEvent.objects.get(kind=EventKind.CIRCUIT_CHANGED)
    assert (event.detail["from_state"], event.detail["to_state"]) == ("closed", "open")
    assert "3 of 4 attempts failed" in event.detail["why"]


def test_client_errors_say_nothing_about_the_providers_health(api_client, scripted, breaker):
    scripted.script = [ProviderClientError("422", http_status=422)] * 6
    for _ in range(6):
        tasks.moderate_review(submit(api_client).pk)
    assert state() == CircuitState.CLOSED


def test_while_open_new_reviews_wait_in_pending_and_nothing_is_sent(api_client, scripted, breaker):
    trip(api_client, scripted)
    calls = len(scripted.calls)
    waiting = [submit(api_client) for _ in range(3)]

    for review in waiting:
        assert tasks.moderate_review(review.pk) == "waiting: provider circuit open"

    for review in ContentReview.objects.filter(pk__in=[r.pk for r in waiting]):
        assert review.status == ReviewStatus.PENDING and review.last_enqueued_at is None
    assert len(scripted.calls) == calls
    # The sweeper leaves waiting reviews alone while the circuit is open...
    assert services.reviews_sweep().pending_requeued == []
    # ...and once the cooldown is over enqueues one of the three, to carry the trial call.
    after_cooldown = timezone.now() + timedelta(seconds=31)
    requeued = services.reviews_sweep(now=after_cooldown).pending_requeued
    assert len(requeued) == 1 and requeued[0] in {r.pk for r in waiting}


def test_a_retry_due_while_open_is_postponed_without_spending_an_attempt(api_client, scripted, breaker):
    trip(api_client, scripted)
    from moderation.models import ModerationRequest

    request = ModerationRequest.objects.filter(next_attempt_at__isnull=False).first()
    attempts = request.attempt_no

    report = services.request_dispatch(request_id=request.pk, worker_id="w1", now=request.next_attempt_at)

    assert (report.action, report.detail) == ("skipped", "provider circuit open")
    request.refresh_from_db()
    assert request.attempt_no == attempts
    assert request.next_attempt_at >= services.circuit_get("scripted").opened_at + timedelta(seconds=30)


@pytest.mark.django_db(transaction=True)
def test_after_the_cooldown_exactly_one_caller_makes_the_trial_call(api_client, scripted, breaker):
    trip(api_client, scripted)
    later = timezone.now() + timedelta(seconds=31)

    admitted = collide(6, lambda i: services.breaker_admit(provider="scripted", now=later + timedelta(milliseconds=i)))

    assert admitted.count("trial") == 1 and admitted.count(None) == 5, admitted
    assert state() == CircuitState.HALF_OPEN
    # If the trial's caller vanishes, another trial is allowed once its lease has run out.
    assert services.breaker_admit(provider="scripted", now=later + timedelta(seconds=30)) is None
    assert services.breaker_admit(provider="scripted", now=later + timedelta(seconds=61)) == "trial"


@pytest.mark.django_db(transaction=True)
def test_after_the_cooldown_only_the_trial_caller_claims_a_review(api_client, scripted, breaker, monkeypatch):
    trip(api_client, scripted)
    from moderation.services import breaker as module

    later = timezone.now() + timedelta(seconds=31)
    monkeypatch.setattr(module.timezone, "now", lambda: later)
    scripted.default = result(0.1)
    reviews = [submit(api_client) for _ in range(4)]

    reports = collide(4, lambda i: tasks.moderate_review(reviews[i].pk))

    assert reports.count("finalized applied") == 1, reports
    assert reports.count("waiting: provider circuit open") == 3
    statuses = sorted(ContentReview.objects.filter(pk__in=[r.pk for r in reviews]).values_list("status", flat=True))
    assert statuses == ["approved", "pending", "pending", "pending"]  # no review stranded in processing
    assert state() == CircuitState.CLOSED


def test_only_the_trial_call_decides_a_half_open_circuit(api_client, scripted, breaker):
    trip(api_client, scripted)
    before_trial = timezone.now()
    trial_time = timezone.now() + timedelta(seconds=31)
    assert services.breaker_admit(provider="scripted", now=trial_time) == "trial"

    # An attempt that started before the trial (a slow one from the outage) answers now.
    services.breaker_record(provider="scripted", outcome="result", started_at=before_trial)
    assert state() == CircuitState.HALF_OPEN

    services.breaker_record(provider="scripted", outcome="result", started_at=trial_time)
    assert state() == CircuitState.CLOSED


def test_content_refused_before_any_call_says_nothing_about_the_provider(api_client, scripted, breaker):
    trip(api_client, scripted)
    trial_time = timezone.now() + timedelta(seconds=31)
    services.breaker_admit(provider="scripted", now=trial_time)

    services.breaker_record(provider="scripted", outcome="unsupported", started_at=trial_time)

    assert state() == CircuitState.HALF_OPEN


def test_a_successful_trial_closes_it_and_resumes_waiting_reviews(api_client, scripted, breaker):
    trip(api_client, scripted)
    waiting = submit(api_client)
    tasks.moderate_review(waiting.pk)
    later = timezone.now() + timedelta(seconds=31)
    assert services.breaker_admit(provider="scripted", now=later) == "trial"

    services.breaker_record(provider="scripted", outcome="result", started_at=later)

    assert state() == CircuitState.CLOSED
    assert queued_tasks("moderation.tasks.sweep"), "a sweep is enqueued to resume waiting reviews"
    assert waiting.pk in services.reviews_sweep().pending_requeued


def test_a_failed_trial_opens_it_again(api_client, scripted, breaker):
    trip(api_client, scripted)
    trial_time = timezone.now() + timedelta(seconds=31)
    assert services.breaker_admit(provider="scripted", now=trial_time) == "trial"

    services.breaker_record(provider="scripted", outcome="http_5xx", started_at=trial_time)

    circuit = services.circuit_get("scripted")
    assert circuit.state == CircuitState.OPEN and circuit.opened_at > timezone.now() - timedelta(seconds=5)


def test_past_the_maximum_wait_a_waiting_review_goes_to_a_human(api_client, scripted, breaker):
    breaker.BREAKER_MAX_WAIT_S = 120
    old_backlog = submit(api_client)  # submitted long ago, but it has not waited for the circuit
    trip(api_client, scripted)
    review = submit(api_client)
    tasks.moderate_review(review.pk)

    assert services.reviews_sweep().escalated == []
    report = services.reviews_sweep(now=timezone.now() + timedelta(seconds=121))

    assert review.pk in report.escalated and old_backlog.pk not in report.escalated
    review = ContentReview.objects.get(pk=review.pk)
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert list(review.transitions.values_list("cause", flat=True)) == ["job_started", "provider_failed"]
    assert "unavailable" in review.decision.reason


def test_a_processing_review_whose_retry_the_circuit_postpones_also_reaches_a_human(api_client, scripted, breaker):
    breaker.BREAKER_MAX_WAIT_S = 120
    trip(api_client, scripted)
    from moderation.models import ModerationRequest

    request = ModerationRequest.objects.filter(next_attempt_at__isnull=False).first()
    assert services.request_dispatch(request_id=request.pk, worker_id="w1", now=request.next_attempt_at).detail == (
        "provider circuit open"
    )

    waited_since = ContentReview.objects.get(pk=request.review_id).provider_wait_since
    report = services.reviews_sweep(now=waited_since + timedelta(seconds=121))

    assert request.review_id in report.escalated
    assert ContentReview.objects.get(pk=request.review_id).status == ReviewStatus.MANUAL_REVIEW
