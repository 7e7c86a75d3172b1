"""Dispatch: the key is stored before a request leaves, reused by retries, and no lock is held
while the provider works. Tests run outside a test transaction (transaction=True), as workers do:
the pipeline refuses to call a provider inside one."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from moderation import services, tasks
from moderation.models import (
    AttemptOutcome,
    Cause,
    ContentReview,
    DecisionSource,
    ModerationRequest,
    ReviewQueue,
    ReviewStatus,
)
from moderation.providers import Accepted
from moderation.providers.base import ProviderClientError, ProviderServerError, ProviderTimeout
from moderation.services.dispatch import attempt_begin
from tests.helpers import claimed, result, submit
from tests.helpers_media import encoded, image_header, picture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def other_connection() -> psycopg.Connection:
    return psycopg.connect(**connection.get_connection_params(), autocommit=True)


@pytest.mark.django_db(transaction=True)
def test_no_transaction_or_lock_is_held_while_the_provider_works(api_client, scripted):
    seen = {}

    def inspect(request):
        backend_pid = connection.connection.info.backend_pid
        with other_connection() as observer:
            seen["state"] = observer.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", [backend_pid]
            ).fetchone()[0]
            seen["locks"] = observer.execute(
                "SELECT locktype, mode FROM pg_locks WHERE pid = %s AND locktype <> 'virtualxid'", [backend_pid]
            ).fetchall()
            # The key is committed before the request leaves: another connection can see it.
            seen["stored"] = observer.execute(
                "SELECT attempt_no FROM moderation_moderationrequest WHERE idempotency_key = %s",
                [request.idempotency_key],
            ).fetchone()

    scripted.default, scripted.on_call = result(0.1), inspect
    review = submit(api_client)

    assert tasks.moderate_review(review.pk) == "finalized applied"

    assert seen == {"state": "idle", "locks": [], "stored": (1,)}


def test_a_retry_waits_for_its_backoff_and_reuses_the_key(api_client, scripted, settings):
    settings.MODERATION_RETRY_BACKOFF_S = 10
    scripted.script = [ProviderServerError("503", http_status=503), result(0.95)]
    review, request = claimed(api_client)

    first = services.request_dispatch(request_id=request.pk, worker_id="w1")
    request.refresh_from_db()
    assert first.action == "retry_scheduled"
    assert timedelta(seconds=4) < request.next_attempt_at - timezone.now() <= timedelta(seconds=10)
    assert "http_5xx" in request.last_error

    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "skipped"  # not due yet
    later = request.next_attempt_at + timedelta(seconds=1)
    second = services.request_dispatch(request_id=request.pk, worker_id="w2", now=later)

    assert (second.action, second.detail) == ("finalized", "applied")
    assert [c.idempotency_key for c in scripted.calls] == [str(request.idempotency_key)] * 2
    attempts = list(request.attempts.values_list("attempt_no", "outcome", "worker_id", "http_status"))
    assert attempts == [(1, AttemptOutcome.HTTP_5XX, "w1", 503), (2, AttemptOutcome.RESULT, "w2", None)]
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert review.transitions.last().attempt_no == 2


def test_exhausted_attempts_escalate_to_manual_review(api_client, scripted, settings):
    settings.MODERATION_MAX_ATTEMPTS = 3
    scripted.script = [ProviderTimeout("read timeout")] * 3
    review, request = claimed(api_client)
    now = timezone.now()

    actions = []
    for _ in range(3):
        actions.append(services.request_dispatch(request_id=request.pk, worker_id="w1", now=now).action)
        now += timedelta(hours=1)

    assert actions == ["retry_scheduled", "retry_scheduled", "escalated"]
    assert len(scripted.calls) == 3
    review.refresh_from_db()
    request.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert request.status == "failed"
    assert review.decision.source == DecisionSource.SYSTEM
    assert "timeout" in review.decision.reason
    last = review.transitions.last()
    assert (last.cause, last.attempt_no, last.idempotency_key) == (Cause.PROVIDER_FAILED, 3, request.idempotency_key)
    # Nothing further is sent for a failed request.
    assert services.request_dispatch(request_id=request.pk, worker_id="w1", now=now).action == "skipped"


def test_a_client_error_is_not_retried(api_client, scripted):
    scripted.script = [ProviderClientError("422 unprocessable", http_status=422)]
    review, request = claimed(api_client)

    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "escalated"

    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert len(scripted.calls) == 1


def test_a_second_dispatch_while_an_attempt_is_in_flight_sends_nothing(api_client, scripted):
    nested = []
    scripted.default = result(0.1)
    review, request = claimed(api_client)
    scripted.on_call = lambda _: nested.append(services.request_dispatch(request_id=request.pk, worker_id="w2"))

    services.request_dispatch(request_id=request.pk, worker_id="w1")

    assert [(r.action, r.detail) for r in nested] == [("skipped", "an attempt is in flight")]
    assert len(scripted.calls) == 1


def test_an_attempt_abandoned_by_a_dead_worker_is_retried_with_the_same_key_after_its_lease(api_client, scripted, settings):
    scripted.default = result(0.1)
    review, request = claimed(api_client)
    attempt_begin(request_id=request.pk, worker_id="dead-worker", job_id="", now=None)  # then it died

    too_soon = services.request_dispatch(request_id=request.pk, worker_id="w2")
    after_lease = timezone.now() + timedelta(seconds=settings.Q_TASK_TIMEOUT_S + 1)
    report = services.request_dispatch(request_id=request.pk, worker_id="w2", now=after_lease)

    assert too_soon.action == "skipped"
    assert (report.action, report.detail) == ("finalized", "applied")
    assert list(request.attempts.values_list("worker_id", "outcome")) == [
        ("dead-worker", AttemptOutcome.ABANDONED),
        ("w2", AttemptOutcome.RESULT),
    ]
    assert scripted.calls[0].idempotency_key == str(request.idempotency_key)


def test_an_accepted_request_waits_for_its_callback(api_client, scripted):
    scripted.script = [Accepted("prov-123")]
    review, request = claimed(api_client)

    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "accepted"

    review.refresh_from_db()
    request.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING
    assert review.provider_request_id == request.provider_request_id == "prov-123"
    assert scripted.calls[0].callback_url == "http://127.0.0.1:8000/api/v1/callbacks/scripted/"
    outcome = services.review_finalize(
        idempotency_key=request.idempotency_key, result=result(0.1), cause=Cause.PROVIDER_CALLBACK
    )
    assert outcome == "applied"


def test_a_superseded_request_is_never_sent(api_client, scripted):
    review, old = claimed(api_client)
    services.review_supersede(review_id=review.pk, reason="operator")

    report = services.request_dispatch(request_id=old.pk, worker_id="w1")

    assert report.action == "skipped"
    assert scripted.calls == []


def test_an_image_the_local_model_cannot_judge_is_not_sent_and_waits_in_the_images_queue(api_client, settings):
    """The local model reads text only: an image is never sent to it. No bank matched, so the
    policy's image_fallback (manual_review) decides, in "Images", not "Provider failures"."""
    settings.MODERATION_PROVIDER = "local"
    data = encoded(picture(1))
    review, _ = services.review_submit(
        client=api_client, external_id="img-1", kind="image", image=(data, image_header(data)),
    )

    assert tasks.moderate_review(review.pk).startswith("finalized")

    review = ContentReview.objects.get(pk=review.pk)
    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert "image_fallback" in review.decision.explanation and review.decision.model_used is None
    request = ModerationRequest.objects.get(review=review)
    assert request.policy_id == review.decision.policy_id and request.media["matches"] == []
    assert review.content.media.pdq_quality == 100 and len(review.content.media.pdq) == 64


@pytest.mark.django_db(transaction=True)
def test_a_callback_racing_the_record_of_an_acceptance_does_not_deadlock(api_client, scripted, monkeypatch):
    """A fast provider calls back before the worker has recorded its 202. Both write the review
    and the request; the worker is held right after writing the request until the callback holds
    the review (or 1 s passes). Locking the request before the review would deadlock here."""
    from django.db.models import QuerySet

    from moderation.services import results

    callback_has_review = threading.Event()
    real_lock_by_keys, real_update = results.reviews_lock_by_keys, QuerySet.update

    def lock_by_keys(keys):
        locked = real_lock_by_keys(keys)
        callback_has_review.set()
        return locked

    def update(queryset, **fields):
        rows = real_update(queryset, **fields)
        if queryset.model is ModerationRequest and "provider_request_id" in fields:
            callback_has_review.wait(timeout=1)  # the worker's window, widened
        return rows

    monkeypatch.setattr(results, "reviews_lock_by_keys", lock_by_keys)
    monkeypatch.setattr(QuerySet, "update", update)
    outcome = []

    def call_back_at_once(request_input):
        def deliver():
            try:
                outcome.append(services.review_finalize(
                    idempotency_key=request_input.idempotency_key, result=result(0.1), cause=Cause.PROVIDER_CALLBACK
                ))
            except Exception as exc:  # noqa: BLE001 - asserted below
                outcome.append(exc)
            finally:
                connection.close()

        thread = threading.Thread(target=deliver)
        thread.start()
        threads.append(thread)

    threads: list = []
    review, request = claimed(api_client)
    scripted.script, scripted.on_call = [Accepted("prov-1")], call_back_at_once

    report = services.request_dispatch(request_id=request.pk, worker_id="w1")
    threads[0].join(10)

    assert report.action == "accepted" and outcome == ["applied"]
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED and review.provider_request_id == "prov-1"
