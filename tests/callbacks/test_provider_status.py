"""Recovery without superseding: before a silent operation is replaced, reconcile asks the
provider (docs/design.md, "Provider status and reconcile"), over real HTTP to the simulator, and applies a
completed answer through the same guarded finalize as a callback."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import ReviewTransition
from lab.race_lab import free_port
from moderation import providers, services, tasks
from moderation.models import Cause, ModerationRequest, ReviewStatus
from moderation.providers import Accepted
from tests.callbacks.conftest import completed, deliver
from tests.helpers import ScriptedProvider, claimed, result, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def silent_later(settings) -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.MODERATION_STUCK_AFTER_S + 1)


def lost_callbacks(settings) -> None:
    """Callbacks go to a port nobody listens on (the web tier is down): all of them are lost."""
    settings.PUBLIC_BASE_URL = f"http://127.0.0.1:{free_port()}"


@pytest.mark.django_db(transaction=True)
def test_a_review_whose_callback_was_lost_is_recovered_by_asking_the_provider(api_client, simulate, settings):
    simulator = simulate(redeliveries=0, delay_ms=0)
    lost_callbacks(settings)
    review = submit(api_client)
    assert tasks.moderate_review(review.pk).startswith("accepted")
    request = ModerationRequest.objects.get(review=review)

    action = services.review_reconcile(review_id=review.pk, now=silent_later(settings))

    assert action == "recovered"
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED
    assert ModerationRequest.objects.filter(review=review).count() == 1  # nothing superseded
    assert ReviewTransition.objects.filter(review=review, cause=Cause.PROVIDER_RESULT).count() == 1
    assert simulator.stats["status_queries"] == 1
    # The callback, arriving after all, is a duplicate of what was applied.
    late = deliver(completed(request.idempotency_key, provider_id=request.provider_request_id))
    assert late.json()["outcome"] == "duplicate"


@pytest.mark.django_db(transaction=True)
def test_a_provider_without_the_status_endpoint_is_superseded(api_client, simulate, settings):
    simulate(redeliveries=0, status_endpoint=False)
    lost_callbacks(settings)
    review = submit(api_client)
    tasks.moderate_review(review.pk)

    assert services.review_reconcile(review_id=review.pk, now=silent_later(settings)) == "superseded"
    assert ModerationRequest.objects.filter(review=review).count() == 2


class StatusScripted(ScriptedProvider):
    """A scripted provider that also answers status queries from `statuses`."""

    def __init__(self, statuses):
        super().__init__()
        self.statuses = list(statuses)

    def status(self, *, provider_request_id: str, idempotency_key: str):
        return self.statuses.pop(0)


@pytest.fixture
def status_scripted(settings):
    def use(*statuses) -> StatusScripted:
        provider = StatusScripted(statuses)
        provider.default = Accepted("prov-9")
        providers.register("scripted", lambda: provider)
        settings.MODERATION_PROVIDER = "scripted"
        return provider

    yield use
    providers.unregister("scripted")


def accepted(api_client):
    review, request = claimed(api_client)
    services.request_dispatch(request_id=request.pk, worker_id="w1")
    return review


def test_queued_waits_while_the_operation_is_young_then_supersedes(api_client, status_scripted, settings):
    from moderation.providers import OperationStatus

    status_scripted(OperationStatus("queued"), OperationStatus("queued"))
    review = accepted(api_client)

    assert services.review_reconcile(review_id=review.pk, now=silent_later(settings)) == "postponed"
    much_later = timezone.now() + timedelta(seconds=settings.MODERATION_STUCK_AFTER_S * 20)
    assert services.review_reconcile(review_id=review.pk, now=much_later) == "superseded"


def test_a_reported_failure_supersedes_and_no_answer_supersedes(api_client, status_scripted, settings):
    from moderation.providers import OperationStatus

    status_scripted(OperationStatus("failed", error="model crashed"), None)
    failed, silent = accepted(api_client), accepted(api_client)

    assert services.review_reconcile(review_id=failed.pk, now=silent_later(settings)) == "superseded"
    assert "model crashed" in ModerationRequest.objects.get(review=failed, generation=0).last_error
    assert services.review_reconcile(review_id=silent.pk, now=silent_later(settings)) == "superseded"


def test_a_completed_answer_after_the_review_moved_on_changes_nothing(api_client, status_scripted, settings, django_user_model):
    from moderation.providers import OperationStatus

    status_scripted(OperationStatus("completed", result=result(0.95)))
    review = accepted(api_client)
    services.review_escalate(review_id=review.pk, reason="looks urgent", moderator=django_user_model.objects.create_user("m"))

    assert services.review_reconcile(review_id=review.pk, now=silent_later(settings)) is None
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW


@pytest.mark.django_db(transaction=True)
def test_the_silence_deadline_follows_the_providers_expected_latency(settings):
    from config import settings as config

    assert config.MODERATION_STUCK_AFTER_S == max(
        4 * config.PROVIDER_EXPECTED_LATENCY_S,
        config.PROVIDER_CONNECT_TIMEOUT_S * (1 + config.PROVIDER_HTTP_RETRIES) + 2 * config.PROVIDER_TIMEOUT_S + 5,
    )
    assert config.MODERATION_STUCK_AFTER_S < 300
    # A slower provider moves the deadline (a fresh interpreter reads the setting anew).
    show = "import django; django.setup(); from django.conf import settings as s; print(s.MODERATION_STUCK_AFTER_S)"
    env = {k: v for k, v in os.environ.items() if k != "MODERATION_STUCK_AFTER_S"}
    process = subprocess.run([sys.executable, "-c", show], env={**env, "PROVIDER_EXPECTED_LATENCY_S": "20"},
                             capture_output=True, text=True, cwd=settings.BASE_DIR, timeout=60)
    assert process.stdout.strip() == "80.0", process.stderr


def test_a_sweep_past_its_asking_budget_leaves_silent_operations_for_the_next(api_client, status_scripted, settings,
                                                                               monkeypatch):
    from moderation.providers import OperationStatus
    from moderation.services import reconcile

    provider = status_scripted(OperationStatus("completed", result=result(0.1)))
    review = accepted(api_client)
    monkeypatch.setattr(reconcile, "STATUS_BUDGET_S", -1)  # a provider that took all the time

    report = services.reviews_sweep(now=silent_later(settings))

    assert review.pk not in report.superseded + report.recovered
    assert provider.statuses  # never asked
    monkeypatch.setattr(reconcile, "STATUS_BUDGET_S", 20)
    assert review.pk in services.reviews_sweep(now=silent_later(settings)).recovered
