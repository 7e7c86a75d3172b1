"""Correctly signed callbacks that are still wrong: strings the database cannot hold, and
results for another provider's operation. Each is answered, stored, and changes nothing."""

from __future__ import annotations

import base64
import json

import pytest

from audit.models import EventKind, PipelineEvent
from callbacks.models import ProviderCallback
from callbacks.services import callbacks_sweep
from moderation.models import ModerationRequest, ReviewStatus
from tests.callbacks.conftest import completed, deliver
from tests.helpers import claimed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

NUL, SURROGATE = "\x00", "\ud800"


def failed(key, error: str = "model crashed") -> dict:
    return {"type": "moderation.failed", "data": {"id": "p1", "idempotency_key": str(key), "error": error}}


def _poison(body: dict, path: tuple, bad: str) -> dict:
    node = body
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = bad if path[-1] != "category_scores" else {f"hate{bad}": 0.5}
    return body


STRING_FIELDS = [
    ("data", "id"),
    ("data", "model"),
    ("data", "results", 0, "category_scores"),  # a key
    ("data", "extra"),  # a field we do not even read
]


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("path", STRING_FIELDS, ids=lambda p: ".".join(map(str, p)))
def test_a_completed_callback_with_an_unstorable_string_is_400_and_stored_as_invalid(api_client, path, bad):
    review, request = claimed(api_client)
    body = _poison(completed(request.idempotency_key), path, f"x{bad}y")

    response = deliver(json.dumps(body).encode(), event_id="evt_poison")

    assert response.status_code == 400, response.content
    stored = ProviderCallback.objects.get(provider_event_id="evt_poison")
    assert stored.outcome == "invalid" and stored.processed_at is not None
    assert ("NUL" if bad == NUL else "lone surrogate") in stored.outcome_detail
    assert json.loads(stored.payload_json) == body  # the escaped text, kept verbatim
    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
def test_a_failure_report_with_an_unstorable_error_is_refused_not_retried(api_client, bad):
    review, request = claimed(api_client)

    response = deliver(json.dumps(failed(request.idempotency_key, f"boom{bad}")).encode(), event_id="evt_fail")

    assert response.status_code == 400
    assert ProviderCallback.objects.get().outcome == "invalid"
    assert callbacks_sweep() == []  # nothing left to fail five times
    request.refresh_from_db()
    assert request.last_error == "" and request.status != "superseded"


def test_a_body_with_a_raw_nul_byte_is_kept_recoverably(api_client):
    raw = b'{"type": "moderation.completed", "data": {"id": "p\x00"}}'

    response = deliver(raw, event_id="evt_raw")

    assert response.status_code == 400
    stored = ProviderCallback.objects.get()
    assert stored.outcome == "invalid" and "base64" in stored.outcome_detail
    assert base64.b64decode(stored.payload_json.removeprefix("base64:")) == raw


def test_a_signed_result_for_another_providers_operation_is_recorded_and_changes_nothing(api_client, settings):
    settings.MODERATION_PROVIDER = "scripted"  # the operation belongs to another provider
    review, request = claimed(api_client)
    status_before = request.status

    response = deliver(completed(request.idempotency_key, score=0.95), event_id="evt_foreign", provider="webhook")
    report = deliver(failed(request.idempotency_key), event_id="evt_foreign_fail", provider="webhook")

    assert (response.status_code, response.json()["outcome"]) == (200, "wrong_provider")
    assert (report.status_code, report.json()["outcome"]) == (200, "wrong_provider")
    review.refresh_from_db()
    request.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING and review.decision is None
    assert request.status == status_before and request.last_error == ""
    assert ModerationRequest.objects.filter(review=review).count() == 1  # not superseded either
    events = PipelineEvent.objects.filter(kind=EventKind.ORPHAN_RESULT, review=review)
    assert {e.detail["reported_by"] for e in events} == {"webhook"}
