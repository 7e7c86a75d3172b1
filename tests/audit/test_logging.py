"""Every log record about a review carries its ids; attempt records carry attempt and job."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.context import CorrelationFilter
from audit.logging import JsonFormatter
from moderation import tasks
from moderation.models import ModerationRequest
from moderation.providers import Accepted
from moderation.providers.base import ProviderTimeout
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import queued_tasks, submit

OURS = ("moderation", "callbacks", "audit")


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_one_review_through_a_timeout_a_retry_and_a_duplicate_callback_is_fully_correlated(
    api_client, scripted, settings, caplog
):
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}
    scripted.script = [ProviderTimeout("read timeout"), Accepted("prov-1")]
    review = submit(api_client, text="you absolute idiot")
    caplog.clear()

    with caplog.at_level(logging.INFO):
        assert tasks.moderate_review(review.pk, job_id="job-first").startswith("retry_scheduled")
        request = ModerationRequest.objects.get(review=review)
        ModerationRequest.objects.filter(pk=request.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        assert tasks.dispatch_request(request.pk, job_id="job-retry") == "accepted prov-1"
        for _ in range(2):  # the provider delivers its callback twice
            deliver(completed(request.idempotency_key, score=0.95), event_id="evt_twice")

    ours = [r for r in caplog.records if r.name.startswith(OURS)]
    assert len(ours) >= 5, [r.getMessage() for r in ours]
    for record in ours:
        assert getattr(record, "review_id", None) == str(review.pk), record.getMessage()
        assert getattr(record, "idempotency_key", None) == str(request.idempotency_key), record.getMessage()
    attempt_lines = [r for r in ours if r.name == "moderation.services.dispatch"]
    assert attempt_lines, "the timeout must have been logged"
    for record in attempt_lines:
        assert record.attempt_no == "1" and record.job_id == "job-first"
    messages = " | ".join(r.getMessage() for r in ours)
    assert "duplicate delivery" in messages and "processing -> rejected" in messages


def test_json_lines_carry_the_bound_ids():
    from audit import context

    record = logging.LogRecord("moderation.x", logging.INFO, __file__, 1, "hello %s", ("world",), None)
    with context.bind(review_id="r1", attempt_no=2):
        CorrelationFilter().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "hello world" and line["review_id"] == "r1" and line["attempt_no"] == "2"
    assert line["level"] == "INFO" and line["logger"] == "moderation.x" and "ts" in line


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_a_web_request_id_follows_the_work_into_its_jobs(http, api_client, caplog):
    response = http.post("/api/v1/reviews/", {"external_id": "x1", "content_type": "text", "text": "hi"},
                         format="json", HTTP_X_REQUEST_ID="req-123")

    assert response["X-Request-ID"] == "req-123"
    job = queued_tasks("moderation.tasks.moderate_review")[0]
    assert job["kwargs"]["web_request_id"] == "req-123"
    caplog.clear()
    with caplog.at_level(logging.INFO):
        tasks.moderate_review(**job["kwargs"])  # the job, as a worker runs it
    ours = [r for r in caplog.records if r.name.startswith(OURS)]
    assert ours and all(getattr(r, "request_id", None) == "req-123" for r in ours)
    assert http.get("/api/v1/reviews/", HTTP_X_REQUEST_ID="<script>")["X-Request-ID"] != "<script>"
