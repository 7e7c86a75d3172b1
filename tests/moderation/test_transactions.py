"""The provider call refuses to run inside a transaction of the program's own (docs/design.md,
invariant 6), and only there: the transaction a test case wraps each test in is not one
(moderation/db/transactions.py), so the pipeline runs in the plain `db` tests as a worker runs it.
Each test here fails with the guard taken out (the RuntimeError no longer raised), and the ones in
the test's own transaction fail when the guard asks `in_atomic_block` instead."""

from __future__ import annotations

import pytest
from django.db import transaction

from moderation import services, tasks
from moderation.db.transactions import in_transaction
from moderation.models import ProviderAttempt, ReviewStatus
from tests.helpers import claimed, count_model_calls, result, submit

pytestmark = pytest.mark.django_db

TEXTS = ["thanks, see you on sunday", "shut up, you idiot", "a perfectly friendly sentence"]


@pytest.fixture
def local(settings):
    settings.MODERATION_PROVIDER = "local"


def test_the_test_cases_own_transaction_is_not_a_transaction_of_the_program():
    assert not in_transaction()
    with transaction.atomic():
        assert in_transaction()
        with transaction.atomic():
            assert in_transaction()
    assert not in_transaction()


def test_a_dispatch_inside_a_callers_transaction_refuses_to_call_the_provider(api_client, scripted):
    scripted.default = result(0.1)
    review, request = claimed(api_client)

    with pytest.raises(RuntimeError, match="inside a database transaction"), transaction.atomic():
        services.request_dispatch(request_id=request.pk, worker_id="w1")

    assert scripted.calls == []
    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING and not ProviderAttempt.objects.filter(request=request).exists()


def test_a_dispatch_in_the_test_cases_own_transaction_calls_the_provider(api_client, scripted):
    scripted.default = result(0.1)
    review, request = claimed(api_client)

    report = services.request_dispatch(request_id=request.pk, worker_id="w1")

    assert (report.action, report.detail) == ("finalized", "applied")
    assert [c.idempotency_key for c in scripted.calls] == [str(request.idempotency_key)]


def test_a_batch_inside_a_callers_transaction_refuses_to_call_the_model(api_client, local, monkeypatch):
    calls = count_model_calls(monkeypatch)
    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(3)]

    with pytest.raises(RuntimeError, match="inside a database transaction"), transaction.atomic():
        tasks.moderate_review(reviews[0].pk)

    assert calls == []
    assert {r.status for r in type(reviews[0]).objects.filter(pk__in=[r.pk for r in reviews])} == {ReviewStatus.PENDING}


def test_a_batch_in_the_test_cases_own_transaction_calls_the_model_once(api_client, local, monkeypatch):
    calls = count_model_calls(monkeypatch)
    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(3)]

    assert tasks.moderate_review(reviews[0].pk) == "batch of 3: 3 finalized"

    assert len(calls) == 1 and sorted(calls[0]) == sorted(TEXTS)
