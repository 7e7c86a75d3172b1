from __future__ import annotations

import pytest

from audit.models import EventKind, PipelineEvent
from moderation import services
from moderation.models import Cause, ModerationRequest, ReviewStatus
from tests.helpers import assert_max_queries, decided, submit


@pytest.mark.django_db
def test_claim_moves_pending_to_processing_and_stores_a_new_key(api_client):
    review = submit(api_client)

    request = services.review_claim(review_id=review.pk, worker_id="w1", job_id="job-1")

    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING
    assert review.active_idempotency_key == request.idempotency_key
    assert review.worker_id == "w1"
    assert review.processing_started_at is not None
    assert request.attempt_no == 0 and request.status == "created"
    transition = review.transitions.get()
    assert (transition.cause, transition.actor, transition.actor_id, transition.job_id) == (
        Cause.JOB_STARTED, "worker", "w1", "job-1"
    )
    assert transition.idempotency_key == request.idempotency_key


@pytest.mark.django_db
def test_second_worker_loses_the_claim_and_changes_nothing(api_client):
    review = submit(api_client)
    services.review_claim(review_id=review.pk, worker_id="w1")
    review.refresh_from_db()

    assert services.review_claim(review_id=review.pk, worker_id="w2") is None

    after = type(review).objects.get(pk=review.pk)
    assert (after.worker_id, after.version, after.active_idempotency_key) == (
        "w1", review.version, review.active_idempotency_key
    )
    assert ModerationRequest.objects.filter(review=review).count() == 1
    lost = PipelineEvent.objects.get(kind=EventKind.CLAIM_LOST)
    assert lost.worker_id == "w2" and lost.detail == {"status": "processing"}  # read under the lock


@pytest.mark.django_db
def test_claim_after_reprocess_is_a_new_operation_superseding_the_deciding_one(api_client):
    review = decided(api_client, ReviewStatus.REJECTED)
    deciding = review.decision.request
    services.review_reprocess(review_id=review.pk, actor="command", actor_id="ops")

    request = services.review_claim(review_id=review.pk, worker_id="w1")

    assert request.idempotency_key != deciding.idempotency_key
    assert request.supersedes == deciding
    assert request.cause == Cause.REPROCESS


@pytest.mark.django_db
def test_claim_runs_a_bounded_number_of_queries(api_client):
    review = submit(api_client)
    # lock, insert request, update review, history row, transition row
    with assert_max_queries(5):
        services.review_claim(review_id=review.pk, worker_id="w1")


@pytest.mark.django_db
def test_a_lost_claim_runs_a_bounded_number_of_queries(api_client):
    review = submit(api_client)
    services.review_claim(review_id=review.pk, worker_id="w1")
    with assert_max_queries(2):  # lock + event row
        services.review_claim(review_id=review.pk, worker_id="w2")
