"""Traces (audit/tracing.py): one trace follows a review from its submission through its job, the
provider call and the callback to the decision and its notification."""

from __future__ import annotations

import pytest
from django.db import connection
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from audit import tracing
from lab.simulator import WebhookReceiver
from moderation import tasks
from moderation.models import ModerationRequest
from moderation.providers import Accepted
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import queued_tasks


@pytest.fixture
def spans(monkeypatch):
    """Tracing on, into memory (the process's global tracer provider is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    connection.close()  # the next connection is opened through the instrumented psycopg
    tracing.instrument(provider)
    monkeypatch.setattr(tracing, "tracer", provider.get_tracer("moderation"))
    monkeypatch.setattr(tracing, "_enabled", True)
    yield exporter
    for instrumentor in tracing.instrumentors():
        instrumentor.uninstrument()
    connection.close()


def run_queued(func: str) -> None:
    for task in queued_tasks(func):
        getattr(tasks, func.rsplit(".", 1)[-1])(*task["args"], **task["kwargs"])


@pytest.mark.django_db(transaction=True)
def test_one_trace_runs_from_submission_to_notification(spans, api_client, scripted, settings):
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}
    receiver = WebhookReceiver()
    api_client.webhook_url = receiver.url
    api_client.save(update_fields=["webhook_url"])
    scripted.default = Accepted("prov-1")
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    try:
        review_id = http.post("/api/v1/reviews/", {"external_id": "t-1", "content_type": "text", "text": "hello"},
                              format="json").json()["id"]
        run_queued("moderation.tasks.moderate_review")  # in a worker: claim, provider call (accepted)
        key = ModerationRequest.objects.get(review_id=review_id).idempotency_key
        assert deliver(completed(key, score=0.95), event_id="evt-trace").status_code == 200  # the provider calls back
        run_queued("moderation.tasks.deliver_notification")
    finally:
        receiver.stop()

    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    chain = ["POST api/v1/reviews/", "job moderate_review", "provider.moderate", "callback.process",
             "review.decide", "job deliver_notification"]
    assert set(chain) <= set(by_name), sorted(by_name)
    trace_id = by_name["POST api/v1/reviews/"].context.trace_id
    assert {by_name[name].context.trace_id for name in chain} == {trace_id}
    # Each step is the child of the one that caused it, across processes' boundaries.
    ids = {s.context.span_id: s for s in finished}
    assert ids[by_name["job moderate_review"].parent.span_id].name == "POST api/v1/reviews/"
    assert ids[by_name["callback.process"].parent.span_id].name == "job moderate_review"
    assert ids[by_name["job deliver_notification"].parent.span_id].name == "review.decide"
    # The notification's POST and the statements ran inside it (httpx and psycopg instrumented).
    in_trace = [s for s in finished if s.context.trace_id == trace_id]
    assert any(s.name == "POST" and s.parent.span_id == by_name["job deliver_notification"].context.span_id
               for s in in_trace), sorted(s.name for s in in_trace)
    assert any(s.attributes.get("db.system") == "postgresql" for s in in_trace)
    # The callback's own HTTP request is a trace of its own, linked from the processing it started.
    callback_http = next(s for s in finished if s.name.startswith("POST api/v1/callbacks/"))
    assert [link.context.span_id for link in by_name["callback.process"].links] == [callback_http.context.span_id]


def test_tracing_is_off_unless_configured(settings):
    settings.OTEL_TRACING = False

    assert tracing.configure(settings) is False
    assert tracing.enabled() is False and tracing.carrier() == ""
