"""The pipeline's classic races end to end, with real concurrency (PostgreSQL, threads, a barrier):
duplicate results, claim collisions, late results, timeouts, duplicate submissions
(docs/design.md, invariants 2-4)."""

from __future__ import annotations

import random
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation import services, tasks
from moderation.errors import IllegalTransition
from moderation.models import Cause, Content, ContentReview, Decision, ModerationRequest, ReviewStatus
from moderation.providers.base import ProviderTimeout
from tests.helpers import claimed, collide, queued_tasks, result, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def final_transitions(review) -> list:
    return list(
        ReviewTransition.objects.filter(review=review, from_status=ReviewStatus.PROCESSING)
        .exclude(to_status=ReviewStatus.PROCESSING)
        .values_list("to_status", "cause")
    )


@pytest.mark.django_db(transaction=True)
def test_the_same_callback_result_applied_eight_times_at_once_makes_one_transition_and_one_decision(api_client):
    review, request = claimed(api_client)

    outcomes = collide(
        8,
        lambda i: services.review_finalize(
            idempotency_key=request.idempotency_key, result=result(0.95), cause=Cause.PROVIDER_CALLBACK
        ),
    )

    assert sorted(map(str, outcomes)) == ["applied"] + ["duplicate"] * 7
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert Decision.objects.filter(review=review).count() == 1
    assert final_transitions(review) == [(ReviewStatus.REJECTED, Cause.PROVIDER_CALLBACK)]
    assert PipelineEvent.objects.filter(kind=EventKind.DUPLICATE_RESULT, review=review).count() == 7


@pytest.mark.django_db(transaction=True)
def test_of_workers_claiming_one_review_at_once_exactly_one_wins_and_only_it_calls_the_provider(
    api_client, scripted, settings
):
    # One review per job (batches: tests/moderation/test_batch.py, where the jobs of reviews a
    # batch took return without a claim_lost event).
    settings.MODERATION_BATCH_SIZE = 1
    scripted.default = result(0.1)
    reviews = [submit(api_client) for _ in range(5)]

    for review in reviews:
        outcomes = collide(6, lambda i: tasks.moderate_review(review.pk))
        assert outcomes.count("claim lost") == 5, outcomes
        assert ReviewTransition.objects.filter(review=review, cause=Cause.JOB_STARTED).count() == 1
        assert ModerationRequest.objects.filter(review=review).count() == 1
        # Each loser waited on the row lock and then read the status the winner left (processing,
        # or already the decision); none needed the conditional update's second line of defence.
        lost = PipelineEvent.objects.filter(kind=EventKind.CLAIM_LOST, review=review)
        statuses = [e.detail["status"] for e in lost]
        assert len(statuses) == 5 and "a concurrent transition" not in statuses, statuses
    # One provider call per review: the losers stopped before it.
    assert sorted(c.idempotency_key for c in scripted.calls) == sorted(
        str(k) for k in ModerationRequest.objects.values_list("idempotency_key", flat=True)
    )
    assert len(scripted.calls) == 5


def test_a_late_result_from_a_superseded_attempt_is_stale_and_the_newer_result_stands(api_client):
    review, old = claimed(api_client)
    new = services.review_supersede(review_id=review.pk, reason="no callback")

    assert services.review_finalize(idempotency_key=new.idempotency_key, result=result(0.1), cause=Cause.PROVIDER_CALLBACK) == "applied"
    late = services.review_finalize(idempotency_key=old.idempotency_key, result=result(0.95), cause=Cause.PROVIDER_CALLBACK)

    assert late == "stale"
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED
    assert review.decision.request_id == new.pk
    assert PipelineEvent.objects.filter(kind=EventKind.STALE_RESULT, idempotency_key=old.idempotency_key).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_supersede_racing_the_old_operations_result_leaves_exactly_one_winner(api_client):
    # Which side wins a round is up to the scheduler (a jitter of up to 2 ms keeps a scheduler
    # that favours one thread from always picking the same side): rounds run until each side
    # has won at least once, so both outcomes below have really been checked.
    jitter = random.Random(12)
    outcomes_seen: list = []
    while len(outcomes_seen) < 8 or set(outcomes_seen) != {"applied", "stale"}:
        assert len(outcomes_seen) < 40, f"one side never won in 40 rounds: {outcomes_seen}"
        review, old = claimed(api_client)
        delays = [jitter.uniform(0, 0.002) for _ in range(2)]

        def act(i):
            time.sleep(delays[i])
            if i == 0:
                return services.review_supersede(review_id=review.pk, reason="silent")
            return services.review_finalize(idempotency_key=old.idempotency_key, result=result(0.95), cause=Cause.PROVIDER_CALLBACK)

        superseded, outcome = collide(2, act, expect=IllegalTransition)
        review.refresh_from_db()
        if outcome == "applied":
            # The result won: the review is decided by the old operation, and the supersede
            # was refused as illegal (a decided review is no longer processing).
            assert isinstance(superseded, IllegalTransition)
            assert review.status == ReviewStatus.REJECTED and review.decision.request_id == old.pk
        else:
            # The supersede won: the old result is stale and the review waits for the new one.
            assert outcome == "stale" and isinstance(superseded, ModerationRequest)
            assert review.status == ReviewStatus.PROCESSING and review.decision is None
            assert review.active_idempotency_key == superseded.idempotency_key
        outcomes_seen.append(outcome)


@pytest.mark.parametrize("callback_first", [True, False])
def test_a_timeout_while_the_provider_succeeded_then_a_retry_reuses_the_key_and_applies_once(
    api_client, scripted, callback_first
):
    # The provider really moderated the first request but the worker gave up waiting; the
    # provider then answers the retry (same key) with the same result, and its callback for the
    # first request arrives too, before or after the retry.
    scripted.script = [ProviderTimeout("read timeout"), result(0.95)]
    review = submit(api_client)

    first = tasks.moderate_review(review.pk)
    assert first.startswith("retry_scheduled")
    request = ModerationRequest.objects.get(review=review)
    late_callback = lambda: services.review_finalize(  # noqa: E731
        idempotency_key=request.idempotency_key, result=result(0.95), cause=Cause.PROVIDER_CALLBACK
    )
    if callback_first:
        assert late_callback() == "applied"
    later = timezone.now() + timedelta(hours=1)
    retry = services.request_dispatch(request_id=request.pk, worker_id="worker-2", now=later)
    if not callback_first:
        assert retry.action == "finalized" and retry.detail == "applied"
        assert late_callback() == "duplicate"

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert Decision.objects.filter(review=review).count() == 1
    assert final_transitions(review) == [
        (ReviewStatus.REJECTED, Cause.PROVIDER_CALLBACK if callback_first else Cause.PROVIDER_RESULT)
    ]
    sent_keys = {c.idempotency_key for c in scripted.calls}
    assert sent_keys == {str(request.idempotency_key)}
    assert len(scripted.calls) == (1 if callback_first else 2)


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_duplicate_submissions_make_one_review(api_client):
    body = {"external_id": f"post-{uuid.uuid4()}", "content_type": "text", "text": "hello there"}

    def post(i: int):
        http = APIClient()
        http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
        response = http.post("/api/v1/reviews/", body, format="json")
        return response.status_code, response.json()["id"]

    answers = collide(50, post)

    statuses = sorted(status for status, _ in answers)
    assert statuses == [200] * 49 + [201]
    assert len({review_id for _, review_id in answers}) == 1
    assert Content.objects.filter(external_id=body["external_id"]).count() == 1
    assert ContentReview.objects.filter(content__external_id=body["external_id"]).count() == 1
    assert len(queued_tasks("moderation.tasks.moderate_review")) == 1
