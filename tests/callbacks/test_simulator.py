"""The pipeline over real HTTP: our webhook adapter -> the provider simulator ->
signed callbacks -> our callback endpoint (a live server) -> the pipeline."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from callbacks.models import ProviderCallback
from lab.simulator import IMAGE_CATEGORY, IMAGE_MODEL, Faults, ProviderSimulator, WebhookReceiver, image_score
from moderation.verdicts import thresholds_for
from moderation import providers, services, tasks
from moderation.models import AttemptOutcome, Decision, ModerationRequest, ReviewStatus
from tests.callbacks.conftest import SECRET
from tests.helpers import submit
from tests.helpers_media import encoded, image_header, picture

pytestmark = pytest.mark.django_db(transaction=True)


def wait_until(predicate, timeout: float = 15, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")


def final(review):
    return wait_until(lambda: type(review).objects.filter(pk=review.pk).exclude(status__in=["pending", "processing"]).first(),
                      message=f"review {review.pk} to be final")


def test_duplicate_callbacks_make_one_inbox_row_one_transition_one_decision(api_client, simulate):
    simulator = simulate(duplicate_rate=1.0)
    review = submit(api_client, text="you are a complete idiot and a fraud")

    assert tasks.moderate_review(review.pk).startswith("accepted")
    review = final(review)
    wait_until(lambda: simulator.stats["callbacks_accepted"] == 2, message="both deliveries to be answered")

    callback = ProviderCallback.objects.get()
    assert callback.duplicate_count == 1 and callback.outcome == "applied"
    assert review.status == ReviewStatus.REJECTED
    assert review.transitions.exclude(to_status="processing").count() == 1
    assert Decision.objects.filter(review=review).count() == 1


def test_a_timeout_then_a_retry_sends_the_same_key_twice_and_applies_once(api_client, simulate):
    # Every answer is held past our 1 s timeout, but the provider does the work and calls back
    # 3 s later: after our retry has gone out with the same key.
    simulator = simulate(timeout_rate=1.0, hold_s=1.3, delay_ms=3000)
    review = submit(api_client, text="have a wonderful evening")

    assert tasks.moderate_review(review.pk).startswith("retry_scheduled")
    request = ModerationRequest.objects.get(review=review)
    retry = services.request_dispatch(request_id=request.pk, worker_id="w2", now=timezone.now() + timedelta(minutes=5))
    review = final(review)

    # The retry timed out too (or, on a slow machine, the callback landed while it waited).
    assert (retry.action, retry.detail[:16]) in (("retry_scheduled", retry.detail[:16]), ("skipped", "request became c")), retry
    assert simulator.arrivals[str(request.idempotency_key)] == 2
    assert simulator.stats["repeated_keys"] == 1
    assert review.status == ReviewStatus.APPROVED
    assert review.decision.request_id == request.pk
    assert Decision.objects.filter(review=review).count() == 1
    assert list(request.attempts.values_list("outcome", flat=True)) == [AttemptOutcome.TIMEOUT] * 2
    assert ProviderCallback.objects.count() == 1  # one callback stream per key


def test_a_late_callback_for_a_superseded_key_is_stored_as_stale(api_client, simulate):
    simulate(late_rate=1.0, late_ms=1500)
    review = submit(api_client, text="what a lovely photo")
    tasks.moderate_review(review.pk)
    old = ModerationRequest.objects.get(review=review)

    new = services.review_supersede(review_id=review.pk, reason="no callback in time")
    services.request_dispatch(request_id=new.pk, worker_id="w1")
    wait_until(lambda: ProviderCallback.objects.filter(outcome="stale").exists() and final(review), message="both callbacks")

    stale = ProviderCallback.objects.get(outcome="stale")
    assert stale.idempotency_key == old.idempotency_key
    review.refresh_from_db()
    assert review.decision.request_id == new.pk
    assert Decision.objects.filter(review=review).count() == 1


def test_provider_5xx_is_retried_with_the_same_key_then_escalated(api_client, simulate, settings):
    settings.MODERATION_MAX_ATTEMPTS = 3
    simulator = simulate(error_rate=1.0)
    review = submit(api_client)

    reports = [tasks.moderate_review(review.pk)]
    request = ModerationRequest.objects.get(review=review)
    later = timezone.now()
    for _ in range(2):
        later += timedelta(hours=1)
        reports.append(services.request_dispatch(request_id=request.pk, worker_id="w1", now=later).action)

    assert reports[0].startswith("retry_scheduled") and reports[1:] == ["retry_scheduled", "escalated"]
    assert simulator.arrivals == {str(request.idempotency_key): 3}
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert list(request.attempts.values_list("http_status", flat=True)) == [503, 503, 503]


def test_a_synchronous_answer_is_applied_without_a_callback(api_client, simulate):
    simulate(sync_rate=1.0)
    review = submit(api_client, text="shut up you stupid moron")

    assert tasks.moderate_review(review.pk) == "finalized applied"

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED and review.provider_request_id.startswith("modr_")
    assert not ProviderCallback.objects.exists()


def test_a_wrong_api_key_is_a_client_error_and_goes_to_a_human(api_client, simulate, settings):
    simulate()
    settings.PROVIDER_API_KEY = "wrong"
    providers.unregister("webhook")
    providers.register("webhook", providers._webhook)
    review = submit(api_client)

    assert tasks.moderate_review(review.pk).startswith("escalated")
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW and "401" in review.decision.reason


def test_the_breaker_opens_under_a_burst_of_5xx_stops_calls_and_closes_again(api_client, simulate, settings):
    settings.BREAKER_MIN_CALLS, settings.BREAKER_FAILURE_RATIO, settings.BREAKER_COOLDOWN_S = 5, 0.5, 1
    simulator = simulate(error_rate=1.0)
    for _ in range(5):
        tasks.moderate_review(submit(api_client).pk)
    assert services.circuit_get("webhook").state == "open"
    sent = simulator.stats["requests"]

    waiting = submit(api_client, text="a kind and thoughtful comment")
    assert tasks.moderate_review(waiting.pk) == "waiting: provider circuit open"
    assert simulator.stats["requests"] == sent  # nothing reaches the provider while open

    simulator.faults.error_rate = 0.0  # the provider recovers
    time.sleep(1.1)  # the cooldown
    assert tasks.moderate_review(waiting.pk).startswith("accepted")  # the trial call

    assert services.circuit_get("webhook").state == "closed"
    assert final(waiting).status == ReviewStatus.APPROVED


def submitted_image(api_client, data: bytes, external_id: str = "img"):
    review, _ = services.review_submit(client=api_client, external_id=external_id, kind="image",
                                       image=(data, image_header(data)))
    return review


def test_an_image_is_judged_from_its_bytes_the_same_bytes_the_same_score(api_client, simulate):
    simulator = simulate()
    data = encoded(picture(3))
    review = submitted_image(api_client, data)

    assert tasks.moderate_review(review.pk).startswith("accepted")
    review = final(review)

    score = image_score(data)
    assert review.decision.category_scores == {IMAGE_CATEGORY: score} and review.decision.model == IMAGE_MODEL
    review_at, reject_at = thresholds_for(review.decision.policy, IMAGE_CATEGORY)  # the initial policy's, per category
    expected = (ReviewStatus.REJECTED if score >= reject_at else ReviewStatus.MANUAL_REVIEW if score >= review_at
                else ReviewStatus.APPROVED)
    assert review.status == expected
    assert image_score(data) == score != image_score(encoded(picture(4)))
    assert simulator.stats["requests"] == 1


def test_a_set_image_score_decides_every_image_even_when_sync(api_client, simulate):
    simulate(sync_rate=1.0, image_score=0.95)
    review = submitted_image(api_client, encoded(picture(5)))

    assert tasks.moderate_review(review.pk) == "finalized applied"

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED and review.decision.category_scores == {IMAGE_CATEGORY: 0.95}
    assert not ProviderCallback.objects.exists()


def test_an_image_request_without_its_bytes_is_reported_by_a_failed_callback():
    simulator = ProviderSimulator(secret=SECRET, faults=Faults(delay_ms=0)).start()
    receiver = WebhookReceiver()
    try:
        answer = httpx.post(f"{simulator.url}/v1/moderations", headers={"Idempotency-Key": str(uuid.uuid4())},
                            json={"input": "", "content_type": "image", "callback_url": receiver.url, "metadata": {}})
        assert answer.status_code == 202
        wait_until(lambda: receiver.received, message="the callback")
    finally:
        receiver.stop()
        simulator.stop()

    body = json.loads(receiver.received[0][1])
    assert body["type"] == "moderation.failed" and "without its bytes" in body["data"]["error"]


@pytest.fixture
def openai_at_simulator(settings, simulate):
    """The `openai` provider pointed at the simulator, which answers its form at once."""
    simulator = simulate()
    settings.MODERATION_PROVIDER = "openai"
    providers.unregister("openai")
    providers.register("openai", providers._openai)
    yield simulator
    providers.unregister("openai")
    providers.register("openai", providers._openai)


def test_the_openai_form_gets_an_image_judged_from_its_data_url(api_client, openai_at_simulator):
    data = encoded(picture(6))
    review = submitted_image(api_client, data)

    assert tasks.moderate_review(review.pk) == "finalized applied"

    review.refresh_from_db()
    assert review.decision.category_scores == {IMAGE_CATEGORY: image_score(data)}
    assert review.decision.model == IMAGE_MODEL and not ProviderCallback.objects.exists()
    assert openai_at_simulator.stats["requests"] == 1


def test_the_openai_form_gets_a_text_judged_by_the_local_model(api_client, openai_at_simulator):
    review = submit(api_client, text="you absolute idiot")

    assert tasks.moderate_review(review.pk) == "finalized applied"

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED and review.decision.category_scores["insult"] > 0.9


def test_the_openai_form_refuses_an_image_sent_by_url():
    simulator = ProviderSimulator(secret=SECRET).start()
    try:
        answer = httpx.post(f"{simulator.url}/v1/moderations", json={
            "model": "omni-moderation-latest",
            "input": [{"type": "image_url", "image_url": {"url": "https://cdn.example/a.png"}}]})
    finally:
        simulator.stop()
    assert answer.status_code == 400 and "data URLs only" in answer.json()["error"]["message"]
