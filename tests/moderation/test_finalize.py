from __future__ import annotations

import uuid

import pytest

from audit.models import EventKind, PipelineEvent
from moderation import services
from moderation.models import Cause, DecisionSource, ReviewStatus
from moderation.providers.base import ProviderClientError
from tests.helpers import assert_max_queries, claimed, decided, result


def finalize(key, score=0.1, cause=Cause.PROVIDER_CALLBACK):
    return services.review_finalize(idempotency_key=key, result=result(score), cause=cause)


@pytest.mark.django_db
@pytest.mark.parametrize(("score", "label"), [(0.1, "approved"), (0.6, "manual_review"), (0.95, "rejected")])
def test_a_result_for_the_live_key_decides_through_the_policy(api_client, score, label):
    review, request = claimed(api_client)

    assert finalize(request.idempotency_key, score) == "applied"

    review.refresh_from_db()
    request.refresh_from_db()
    assert review.status == label
    assert review.completed_at is not None
    decision = review.decision
    assert (decision.label, decision.source, decision.request_id) == (label, DecisionSource.PROVIDER, request.pk)
    assert decision.policy.version == 1
    assert decision.category_scores == {"harassment": score}
    assert decision.decided_by == f"request:{request.pk}"
    assert request.status == "completed"
    assert review.transitions.last().reason == decision.explanation


@pytest.mark.django_db
def test_a_result_with_an_unknown_key_is_an_orphan(api_client):
    key = uuid.uuid4()
    assert finalize(key) == "orphan"
    assert PipelineEvent.objects.get(kind=EventKind.ORPHAN_RESULT).idempotency_key == key


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_a_late_result_after_a_human_decision_is_already_final_and_changes_nothing(
    api_client, scripted, django_user_model
):
    scripted.script = [ProviderClientError("400 bad request", http_status=400)]
    review, request = claimed(api_client)
    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "escalated"
    moderator = django_user_model.objects.create(username="mod")
    services.review_override(review_id=review.pk, label="approved", reason="checked by hand", moderator=moderator)

    assert finalize(request.idempotency_key, 0.95) == "already_final"

    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED
    assert review.decision.source == DecisionSource.MODERATOR


@pytest.mark.django_db
def test_a_duplicate_of_the_deciding_result_is_recorded_as_duplicate(api_client):
    review = decided(api_client, "approved")
    key = review.decision.request.idempotency_key
    assert finalize(key, 0.95) == "duplicate"
    review.refresh_from_db()
    assert review.status == "approved"


@pytest.mark.django_db
def test_finalize_runs_a_bounded_number_of_queries(api_client):
    review, request = claimed(api_client)
    services.content_language(review.content)  # as dispatch does before calling the provider
    # lock (with client and content), request, policy, decision, its notification (the outbox),
    # review update, history, transition, request update
    with assert_max_queries(9):
        assert finalize(request.idempotency_key) == "applied"


@pytest.mark.django_db
def test_a_refused_result_runs_a_bounded_number_of_queries(api_client):
    key = decided(api_client, "approved").decision.request.idempotency_key
    with assert_max_queries(3):  # lock, request, event row
        assert finalize(key) == "duplicate"
