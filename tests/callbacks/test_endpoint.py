"""The callback endpoint: signatures, bodies, the inbox, and what each answer means."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from rest_framework.test import APIClient

from callbacks.models import ProviderCallback
from moderation.models import ReviewStatus
from tests.callbacks.conftest import OLD_SECRET, SECRET, URL, completed, deliver
from tests.helpers import claimed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def test_a_valid_callback_is_stored_verbatim_and_applied(api_client):
    review, request = claimed(api_client)
    body = json.dumps(completed(request.idempotency_key, score=0.95), indent=3).encode()

    response = deliver(body, event_id="evt_1")

    assert response.status_code == 200
    assert response.json() == {"id": response.json()["id"], "duplicate": False, "outcome": "applied"}
    stored = ProviderCallback.objects.get()
    assert stored.payload_json == body.decode()  # byte for byte, whitespace included
    assert (stored.provider, stored.provider_event_id, stored.idempotency_key) == ("webhook", "evt_1", request.idempotency_key)
    assert stored.headers["webhook-id"] == "evt_1" and stored.processed_at is not None
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert review.decision.callback_id == stored.pk
    assert review.decision.decided_by == f"callback:{stored.pk}"


def test_a_duplicate_delivery_counts_and_changes_nothing_else(api_client):
    review, request = claimed(api_client)
    body = completed(request.idempotency_key)
    deliver(body, event_id="evt_dup")
    before = ProviderCallback.objects.values().get()

    again = [deliver(body, event_id="evt_dup") for _ in range(3)]

    assert {r.status_code for r in again} == {200}
    assert {r.json()["duplicate"] for r in again} == {True}
    after = ProviderCallback.objects.values().get()
    assert after.pop("duplicate_count") == 3 and after.pop("last_duplicate_at") is not None
    before.pop("duplicate_count"), before.pop("last_duplicate_at")
    assert after == before
    review.refresh_from_db()
    assert review.transitions.count() == 2 and review.decisions.count() == 1


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda h: {**h, "webhook-signature": "v1,AAAA"}, "wrong signature"),
        (lambda h: {k: v for k, v in h.items() if k != "webhook-signature"}, "missing signature"),
        (lambda h: {k: v for k, v in h.items() if k != "webhook-id"}, "missing id"),
        (lambda h: {k: v for k, v in h.items() if k != "webhook-timestamp"}, "missing timestamp"),
        (lambda h: {**h, "webhook-signature": "garbage-without-comma"}, "malformed signature"),
        (lambda h: {**h, "webhook-signature": "v1,!!!not-base64"}, "bad base64"),
        (lambda h: {**h, "webhook-timestamp": "yesterday"}, "malformed timestamp"),
    ],
)
def test_a_bad_or_missing_signature_is_401_and_nothing_is_stored(api_client, mutate, reason):
    from moderation.signing import sign

    _, request = claimed(api_client)
    raw = json.dumps(completed(request.idempotency_key)).encode()
    headers = mutate(sign(SECRET, event_id="evt_x", body=raw))

    response = APIClient().generic(
        "POST", URL, raw, content_type="application/json",
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()},
    )

    assert response.status_code == 401, reason
    assert not ProviderCallback.objects.exists()


def test_a_body_signed_with_a_wrong_secret_is_401(api_client):
    _, request = claimed(api_client)
    response = deliver(completed(request.idempotency_key), secret="whsec_" + "d3Jvbmctc2VjcmV0LXh4eHh4eHh4eHh4eA==")
    assert response.status_code == 401 and not ProviderCallback.objects.exists()


@pytest.mark.parametrize("offset", [-121, 121])
def test_a_timestamp_outside_the_configured_tolerance_is_401(api_client, settings, offset):
    settings.CALLBACK_TOLERANCE_S = 60  # stricter than the library's fixed 5 minutes
    _, request = claimed(api_client)
    response = deliver(completed(request.idempotency_key), at=time.time() + offset)
    assert response.status_code == 401 and not ProviderCallback.objects.exists()


def test_a_captured_delivery_replayed_verbatim_after_the_tolerance_is_401(api_client):
    from moderation.signing import sign

    _, request = claimed(api_client)
    raw = json.dumps(completed(request.idempotency_key)).encode()
    captured = sign(SECRET, event_id="evt_captured", body=raw, at=time.time() - 400)  # its headers, unchanged

    response = APIClient().generic(
        "POST", URL, raw, content_type="application/json",
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in captured.items()},
    )

    assert response.status_code == 401 and not ProviderCallback.objects.exists()


def test_a_replayed_body_under_a_new_id_with_its_old_timestamp_is_401(api_client):
    _, request = claimed(api_client)
    raw = json.dumps(completed(request.idempotency_key)).encode()
    from moderation.signing import sign

    captured = sign(SECRET, event_id="evt_orig", body=raw, at=time.time() - 600)  # seen long ago
    forged = {**captured, "webhook-id": "evt_new"}  # an attacker cannot re-sign, only re-label

    response = APIClient().generic(
        "POST", URL, raw, content_type="application/json",
        **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in forged.items()},
    )

    assert response.status_code == 401 and not ProviderCallback.objects.exists()


def test_the_secret_being_rotated_out_is_still_accepted(api_client):
    _, request = claimed(api_client)
    assert deliver(completed(request.idempotency_key), secret=OLD_SECRET).status_code == 200


def test_a_rotated_out_secret_is_refused_once_removed(api_client, settings):
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "local")}
    _, request = claimed(api_client)
    assert deliver(completed(request.idempotency_key), secret=OLD_SECRET).status_code == 401


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (json.dumps({"type": "moderation.started", "data": {}}).encode(), "type must be"),
        (json.dumps({"type": "moderation.completed", "data": "x"}).encode(), "data must be an object"),
        (json.dumps({"type": "moderation.completed", "data": {"id": 5, "idempotency_key": "00000000-0000-4000-8000-000000000001"}}).encode(), "data.id"),
        (json.dumps({"type": "moderation.completed", "data": {"id": "p", "idempotency_key": "nope"}}).encode(), "UUID"),
        (json.dumps({"type": "moderation.completed", "data": {"id": "p", "idempotency_key": "00000000-0000-4000-8000-000000000002", "results": []}}).encode(), "malformed"),
        (json.dumps({"type": "moderation.completed", "data": {"id": "p", "idempotency_key": "00000000-0000-4000-8000-000000000003", "results": [{"flagged": "yes", "category_scores": {}}]}}).encode(), "malformed"),
        (json.dumps({"type": "moderation.completed", "data": {"id": "p", "idempotency_key": "00000000-0000-4000-8000-000000000004", "results": [{"flagged": True, "category_scores": {"hate": 7}}]}}).encode(), "[0, 1]"),
        (b'{"type": "moderation.completed", "data": {"id": "\\u0000"}}', "data.id contains a NUL"),
        (json.dumps({"type": "moderation.completed", "data": {"id": "p", "idempotency_key": "00000000-0000-4000-8000-000000000005", "results": [{"flagged": True, "category_scores": {"hate": "x"}}]}}).encode().replace(b'"x"', b"1" + b"0" * 400), "malformed"),
        (b'{"type": "moderation.completed", "data": {"id": "p", "n": ' + b"9" * 5000 + b"}}", "not acceptable JSON"),
    ],
)
def test_a_malformed_body_with_a_valid_signature_is_400_and_stored_as_invalid(api_client, body, message):
    response = deliver(body, event_id="evt_bad")

    assert response.status_code == 400
    assert message in response.json()["detail"]
    stored = ProviderCallback.objects.get()
    assert (stored.outcome, stored.provider_event_id) == ("invalid", "evt_bad")
    assert stored.processed_at is not None and message in stored.outcome_detail


def test_an_over_long_event_id_is_400_and_not_stored(api_client):
    _, request = claimed(api_client)
    response = deliver(completed(request.idempotency_key), event_id="e" * 300)
    assert response.status_code == 400 and not ProviderCallback.objects.exists()


def test_a_body_that_is_not_utf8_is_400_and_not_stored(api_client):
    response = APIClient().generic(
        "POST", URL, b'{"type": "\xff\xfe"}', content_type="application/json",
        HTTP_WEBHOOK_ID="evt_1", HTTP_WEBHOOK_TIMESTAMP=str(int(time.time())), HTTP_WEBHOOK_SIGNATURE="v1,AAAA",
    )
    assert response.status_code == 400 and not ProviderCallback.objects.exists()


def test_unicode_in_a_body_is_kept(api_client):
    _, request = claimed(api_client)
    body = completed(request.idempotency_key)
    body["data"]["model"] = "modèle-✓-😀"
    raw = json.dumps(body, ensure_ascii=False).encode()

    assert deliver(raw).status_code == 200

    assert ProviderCallback.objects.get().payload_json == raw.decode()


def test_an_oversized_body_is_413_and_not_stored(api_client, settings):
    settings.CALLBACK_MAX_BYTES = 1000
    _, request = claimed(api_client)
    body = completed(request.idempotency_key)
    body["data"]["model"] = "x" * 2000

    assert deliver(body).status_code == 413
    assert not ProviderCallback.objects.exists()


def test_an_unknown_key_is_stored_as_an_orphan_and_answered_200(api_client):
    response = deliver(completed(uuid.uuid4()))
    assert response.status_code == 200 and response.json()["outcome"] == "orphan"
    assert ProviderCallback.objects.get().outcome == "orphan"


def test_an_unknown_provider_is_404(api_client):
    response = APIClient().post("/api/v1/callbacks/nobody/", {}, format="json")
    assert response.status_code == 404 and not ProviderCallback.objects.exists()


def test_a_late_result_for_a_superseded_key_is_200_stale_and_changes_nothing(api_client):
    from moderation import services

    review, old = claimed(api_client)
    new = services.review_supersede(review_id=review.pk, reason="silent")
    assert deliver(completed(new.idempotency_key, score=0.1)).json()["outcome"] == "applied"

    late = deliver(completed(old.idempotency_key, score=0.95))

    assert late.status_code == 200 and late.json()["outcome"] == "stale"
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED and review.decision.request_id == new.pk


def test_a_failed_report_for_the_live_key_supersedes_the_operation(api_client):
    review, request = claimed(api_client)
    body = {"type": "moderation.failed", "data": {"id": "p1", "idempotency_key": str(request.idempotency_key), "error": "model crashed"}}

    assert deliver(body).json()["outcome"] == "applied"

    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING
    assert review.active_idempotency_key != request.idempotency_key
    request.refresh_from_db()
    assert request.status == "superseded" and "model crashed" in request.last_error


def test_the_fast_path_finds_the_review_of_a_callback_in_its_upsert(api_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _, request = claimed(api_client)
    with CaptureQueriesContext(connection) as queries:
        assert deliver(completed(request.idempotency_key)).json()["outcome"] == "applied"

    lookups = [q["sql"] for q in queries.captured_queries
               if q["sql"].startswith('SELECT "moderation_moderationrequest"."review_id" AS "review_id" FROM')]
    assert lookups == []  # the upsert returns it; the log correlation tests check it is bound


def test_the_callback_endpoint_is_rate_limited(settings, fresh_throttles):
    settings.THROTTLE_CALLBACK_RATE = "2/min"
    client = APIClient()
    answers = [client.post(URL, {}, format="json").status_code for _ in range(3)]
    assert answers[-1] == 429


def test_a_spoofed_forwarded_for_does_not_escape_the_callback_limit(settings, fresh_throttles):
    settings.THROTTLE_CALLBACK_RATE = "2/min"
    client = APIClient()
    answers = [
        client.post(URL, {}, format="json", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}").status_code for i in range(4)
    ]
    assert answers[2:] == [429, 429]
