"""The invariant checker catches what each concurrency guard prevents: with the guard taken out
(monkeypatched), real threads colliding produce a violation it reports. (The finalize guards are
shown by the property test: test_invariants_stateful.py.)"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection, models

from callbacks import services as inbox
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation import services
from moderation.invariants import violations
from moderation.models import ContentReview
from tests.callbacks.conftest import completed
from tests.helpers import claimed, collide, submit

pytestmark = pytest.mark.django_db(transaction=True)


def test_without_the_claims_lock_and_conditional_update_a_double_claim_is_reported(api_client, monkeypatch):
    from moderation.services import pipeline

    real_lock = ContentReview.objects.select_for_update
    monkeypatch.setattr(ContentReview, "_do_update", models.Model._do_update)  # no conditional update
    monkeypatch.setattr(pipeline.ContentReview.objects, "select_for_update", lambda *a, **k: ContentReview.objects.all())
    reviews = [submit(api_client) for _ in range(5)]
    assert violations([r.pk for r in reviews]) == []

    for review in reviews:
        collide(6, lambda i, review=review: services.review_claim(review_id=review.pk, worker_id=f"w{i}"))

    monkeypatch.setattr(pipeline.ContentReview.objects, "select_for_update", real_lock)
    found = violations([r.pk for r in reviews])
    assert any("not a chain" in v or "version/history" in v or "illegal transition" in v for v in found), found


def test_without_the_inbox_uniqueness_a_callback_stored_twice_is_reported(api_client, monkeypatch):
    review, request = claimed(api_client)
    body = json.dumps(completed(request.idempotency_key))
    slots = threading.BoundedSemaphore(40)

    def naive_store(*, provider, event_id, body, headers, event, invalid_reason=""):
        existing = ProviderCallback.objects.filter(provider=provider, provider_event_id=event_id).first()
        if existing:  # check-then-insert: the race the upsert closes
            return inbox.Stored(id=existing.pk, created=False, outcome=existing.outcome)
        row = ProviderCallback.objects.create(provider=provider, provider_event_id=event_id, payload_json=body,
                                              idempotency_key=event.idempotency_key)
        return inbox.Stored(id=row.pk, created=True, outcome="")

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE callbacks_providercallback DROP CONSTRAINT callback_provider_event_uniq")
    try:
        monkeypatch.setattr(inbox, "callback_store", naive_store)

        def deliver(i):
            with slots:
                try:
                    return inbox.callback_store(provider="webhook", event_id="evt_race", body=body, headers={},
                                                event=parse(body))
                finally:
                    connection.close()

        collide(60, deliver)
        found = violations([review.pk])
        assert any("stored" in v and "times" in v for v in found), found
    finally:
        ProviderCallback.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE callbacks_providercallback ADD CONSTRAINT callback_provider_event_uniq "
                           "UNIQUE (provider, provider_event_id)")
