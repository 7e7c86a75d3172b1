"""POST /api/v1/reviews/ with an Idempotency-Key, the way Stripe does it."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from moderation.models import ContentReview, IdempotencyRecord
from tests.helpers import collide

URL = "/api/v1/reviews/"


def body(**overrides):
    return {"external_id": "post-1", "content_type": "text", "text": "hello world", **overrides}


def post(client, data, key="key-1", token=None):
    return client.post(URL, data, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.django_db
def test_the_same_key_and_body_replays_the_first_response(http):
    first = post(http, body())
    again = post(http, {"text": "hello world", "content_type": "text", "external_id": "post-1"})  # reordered

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert ContentReview.objects.count() == 1


@pytest.mark.django_db
def test_the_same_key_with_another_body_is_422_and_changes_nothing(http):
    post(http, body())
    response = post(http, body(external_id="post-2"))

    assert response.status_code == 422
    assert response.json()["error"] == "idempotency_key_reused"
    assert ContentReview.objects.count() == 1


@pytest.mark.django_db
def test_a_rejected_request_does_not_use_up_its_key(http):
    assert post(http, body(text="")).status_code == 400
    assert not IdempotencyRecord.objects.exists()
    assert post(http, body()).status_code == 201


@pytest.mark.django_db
def test_keys_belong_to_one_client(http, other_client):
    theirs = APIClient()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {other_client.token}")
    assert post(http, body()).status_code == 201
    assert post(theirs, body(external_id="other")).status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "k" * 256, "tab\there"])
def test_a_malformed_key_is_400(http, key):
    response = post(http, body(), key=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["fields"]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_requests_with_one_key_make_one_review_and_the_same_answer(api_client):
    for round_no in range(5):
        def send(i, round_no=round_no):
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
            try:
                response = post(client, body(external_id=f"race-{round_no}"), key=f"race-key-{round_no}")
                return response.status_code, response.json()["id"], response.get("Idempotent-Replayed")
            finally:
                connection.close()

        answers = collide(3, send)

        assert {status for status, _, _ in answers} == {201}, answers
        assert len({review_id for _, review_id, _ in answers}) == 1
        assert sorted(str(r) for _, _, r in answers) == ["None", "true", "true"]
    assert ContentReview.objects.count() == 5
