"""What one unit of work costs the database, pinned so that a regression fails: the statements
Django sends (transaction control left out) and the protocol round trips (BEGIN, COMMIT and
SAVEPOINT included: each waits for PostgreSQL, which shares the cores). docs/design.md,
"Scale"; the measured history is in docs/benchmarks.md."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from moderation import tasks
from moderation.models import ContentReview, ModerationRequest, ReviewStatus
from moderation.providers import Accepted
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import count_round_trips, submit

pytestmark = pytest.mark.django_db(transaction=True)

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def statements(cost: count_round_trips) -> list[str]:
    return [sql for sql in cost.statements if not sql.upper().startswith(TRANSACTION_CONTROL)]


def assert_cost(cost: count_round_trips, *, statements_at_most: int, round_trips_at_most: int) -> None:
    print(f"\n{len(statements(cost))} statements, {cost}")
    assert len(statements(cost)) <= statements_at_most, cost
    assert cost.round_trips <= round_trips_at_most, cost


@pytest.fixture
def dispatched(api_client, scripted, settings):
    """A review whose operation the (asynchronous) provider accepted: its callback comes next.
    One callback decided another review before, as in a process that has been running."""
    settings.CALLBACK_SECRETS = {"scripted": [SECRET]}
    scripted.default = Accepted("prov-1")
    requests = []
    for _ in range(2):
        review = submit(api_client)
        tasks.moderate_review(review.pk)
        requests.append(ModerationRequest.objects.get(review=review))
    deliver(completed(requests[0].idempotency_key), event_id="evt-0", provider="scripted")
    return requests[1]


def test_a_new_callback_that_decides_a_review(dispatched):
    with count_round_trips() as cost:
        answer = deliver(completed(dispatched.idempotency_key), event_id="evt-1", provider="scripted")
    assert answer.json()["outcome"] == "applied"
    assert ContentReview.objects.get(pk=dispatched.review_id).status == ReviewStatus.APPROVED
    assert_cost(cost, statements_at_most=99, round_trips_at_most=99)


def test_a_duplicate_callback(dispatched):
    body = completed(dispatched.idempotency_key)
    deliver(body, event_id="evt-1", provider="scripted")
    with count_round_trips() as cost:
        answer = deliver(body, event_id="evt-1", provider="scripted")
    assert answer.json()["duplicate"] is True
    assert_cost(cost, statements_at_most=1, round_trips_at_most=1)


@pytest.fixture
def http(api_client):
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    return http


def test_a_submission(http):
    with count_round_trips() as cost:
        answer = http.post("/api/v1/reviews/", {"external_id": "x1", "content_type": "text", "text": "hello"},
                           format="json")
    assert answer.status_code == 201
    assert_cost(cost, statements_at_most=99, round_trips_at_most=99)


def test_a_resubmission(http):
    body = {"external_id": "x1", "content_type": "text", "text": "hello"}
    http.post("/api/v1/reviews/", body, format="json")
    with count_round_trips() as cost:
        assert http.post("/api/v1/reviews/", body, format="json").status_code == 200
    assert_cost(cost, statements_at_most=99, round_trips_at_most=99)


def test_a_moderate_review_job_of_the_local_provider(api_client, settings):
    settings.MODERATION_PROVIDER = "local"
    tasks.moderate_review(submit(api_client).pk)  # the model loaded, the circuit row written
    review = submit(api_client)
    with count_round_trips() as cost:
        tasks.moderate_review(review.pk)
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.APPROVED
    assert_cost(cost, statements_at_most=99, round_trips_at_most=99)
