"""One item never holds the others on the asynchronous path either (docs/design.md, "Batches"): a
callback whose result cannot be applied stays in the inbox for the sweeper without holding the next
delivery or the sweep, and an operation whose answer cannot be applied during reconcile is replaced
without holding the other silent operations. Real PostgreSQL; the invariant checker after each."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from callbacks import services as inbox
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation import providers, services
from moderation.invariants import violations
from moderation.models import FINAL_STATUSES, ContentReview, Decision, ModerationRequest, ReviewStatus
from moderation.providers import Accepted, OperationStatus
from tests.callbacks.conftest import completed, deliver
from tests.helpers import POISON, ScriptedProvider, poison_the_rules, result, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


def claimed_with(api_client, text: str) -> ModerationRequest:
    review = submit(api_client, text=text)
    return services.review_claim(review_id=review.pk, worker_id="w1")


def stored_unprocessed(request: ModerationRequest) -> int:
    """A callback stored as the endpoint stores it, its processing lost (a crash)."""
    body = json.dumps(completed(request.idempotency_key))
    return inbox.callback_store(provider="webhook", event_id=f"evt-{request.pk}", body=body, headers={},
                                event=parse(body)).id


def test_a_callback_that_cannot_be_applied_holds_neither_the_next_delivery_nor_the_sweep(api_client, monkeypatch):
    poison_the_rules(monkeypatch)
    requests = [claimed_with(api_client, text) for text in ("thanks", f"a {POISON} text", "see you")]

    answers = [deliver(completed(request.idempotency_key)).json()["outcome"] for request in requests]

    assert answers == ["applied", "accepted", "applied"]  # accepted: stored, for the sweeper to apply
    poisoned = ProviderCallback.objects.get(idempotency_key=requests[1].idempotency_key)
    assert poisoned.processed_at is None and poisoned.process_failures == 1
    assert f"RuntimeError: {POISON}" in poisoned.process_error
    # The sweeper takes the oldest first: the poisoned one, then two stored but never processed.
    later = [claimed_with(api_client, "hello again") for _ in range(2)]
    waiting = [stored_unprocessed(request) for request in later]

    done = inbox.callbacks_sweep(now=timezone.now() + inbox.SWEEP_GRACE * 2)

    assert sorted(done) == sorted(waiting)
    poisoned.refresh_from_db()
    assert poisoned.processed_at is None and poisoned.process_failures == 2
    statuses = dict(ContentReview.objects.values_list("pk", "status"))
    assert statuses.pop(requests[1].review_id) == ReviewStatus.PROCESSING
    assert not Decision.objects.filter(review_id=requests[1].review_id).exists()
    assert set(statuses.values()) <= set(FINAL_STATUSES)
    assert violations(ContentReview.objects.values_list("pk", flat=True)) == []


class StatusScripted(ScriptedProvider):
    """Accepts every request; asked about an operation, answers `answer(idempotency_key)`."""

    answer = staticmethod(lambda idempotency_key: OperationStatus("completed", result=result(0.1)))

    def status(self, *, provider_request_id: str, idempotency_key: str):
        return self.answer(idempotency_key)


@pytest.fixture
def asked(settings):
    provider = StatusScripted(default=Accepted("prov-9"))
    providers.register("scripted", lambda: provider)
    settings.MODERATION_PROVIDER = "scripted"
    yield provider
    providers.unregister("scripted")


def silent_operations(api_client, settings) -> tuple[list[ModerationRequest], timezone.datetime]:
    """Three operations the provider accepted whose callbacks were lost (the first one's text holds
    the poison, and it went silent first), and a time at which the sweeper finds them silent."""
    requests = [claimed_with(api_client, text) for text in (f"a {POISON} text", "thanks", "see you")]
    for request in requests:
        services.request_dispatch(request_id=request.pk, worker_id="w1")
    return requests, timezone.now() + timedelta(seconds=settings.MODERATION_STUCK_AFTER_S + 1)


@pytest.mark.django_db(transaction=True)
def test_an_answer_reconcile_cannot_apply_replaces_that_operation_and_holds_no_other(api_client, asked,
                                                                                     monkeypatch, settings):
    requests, later = silent_operations(api_client, settings)
    poison_the_rules(monkeypatch)

    report = services.reviews_sweep(now=later)

    assert sorted(map(str, report.recovered)) == sorted(str(q.review_id) for q in requests[1:])
    assert [str(r) for r in report.superseded] == [str(requests[0].review_id)]  # a new operation, a new key
    old, new = ModerationRequest.objects.filter(review_id=requests[0].review_id).order_by("generation")
    assert f"RuntimeError: {POISON}" in old.last_error and new.supersedes_id == old.pk
    statuses = dict(ContentReview.objects.values_list("pk", "status"))
    assert statuses.pop(requests[0].review_id) == ReviewStatus.PROCESSING
    assert set(statuses.values()) <= set(FINAL_STATUSES)
    assert violations(ContentReview.objects.values_list("pk", flat=True)) == []


def test_a_status_query_that_raises_counts_as_no_answer_and_holds_no_other(api_client, asked, settings):
    requests, later = silent_operations(api_client, settings)

    def answer(idempotency_key):
        if idempotency_key == str(requests[0].idempotency_key):
            raise RuntimeError("the adapter's status parser broke")
        return OperationStatus("completed", result=result(0.1))

    asked.answer = answer

    report = services.reviews_sweep(now=later)

    assert sorted(map(str, report.recovered)) == sorted(str(q.review_id) for q in requests[1:])
    assert [str(r) for r in report.superseded] == [str(requests[0].review_id)]  # as when a provider does not answer
    assert violations(ContentReview.objects.values_list("pk", flat=True)) == []


def test_a_review_whose_reconcile_raises_holds_no_other_in_the_sweep(api_client, asked, monkeypatch, settings):
    from moderation.services import reconcile

    requests, later = silent_operations(api_client, settings)
    asked.answer = lambda idempotency_key: None  # no answer: each operation is superseded
    real = reconcile._reconcile_locked

    def poisoned(*, review_id, **kwargs):
        if review_id == requests[0].review_id:
            raise RuntimeError(f"{POISON} reconcile")
        return real(review_id=review_id, **kwargs)

    monkeypatch.setattr(reconcile, "_reconcile_locked", poisoned)

    report = services.reviews_sweep(now=later)

    assert sorted(map(str, report.superseded)) == sorted(str(q.review_id) for q in requests[1:])
    assert ModerationRequest.objects.filter(review_id=requests[0].review_id).count() == 1  # untouched, for the next sweep
    assert violations(ContentReview.objects.values_list("pk", flat=True)) == []
