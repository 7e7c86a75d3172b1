"""The invariant checker catches what each concurrency guard prevents: with the guard taken out
(monkeypatched), real threads colliding produce a violation it reports; with the guard in
place, the same collisions leave nothing to report. (The finalize guards are
shown by the property test: test_invariants_stateful.py.)"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from callbacks import services as inbox
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation import services
from moderation.invariants import violations
from moderation.models import ContentReview
from moderation.db.compiled import compiled_forget
from tests.callbacks.conftest import completed
from tests.helpers import claimed, collide, submit, transition_unconditional

pytestmark = pytest.mark.django_db(transaction=True)


def test_without_the_claims_lock_and_conditional_update_a_double_claim_is_reported(api_client, monkeypatch):
    from moderation.services import pipeline, transitions

    # Control: with the guards, the same collisions leave nothing for the checker to report.
    guarded = [submit(api_client) for _ in range(5)]
    for review in guarded:
        results = collide(6, lambda i, review=review: services.review_claim(review_id=review.pk, worker_id=f"w{i}"))
        assert sum(r is not None for r in results) == 1, results
    assert violations([r.pk for r in guarded]) == []

    real_lock = ContentReview.objects.select_for_update
    # No conditional update: the transition's UPDATE matches the rows whatever their status.
    monkeypatch.setattr(transitions, "_unmoved", transition_unconditional)
    monkeypatch.setattr(pipeline.ContentReview.objects, "select_for_update", lambda *a, **k: ContentReview.objects.all())
    compiled_forget()  # the control's locking claim was compiled: compiled again, without its lock
    reviews = [submit(api_client) for _ in range(5)]
    assert violations([r.pk for r in reviews]) == []

    for review in reviews:
        collide(6, lambda i, review=review: services.review_claim(review_id=review.pk, worker_id=f"w{i}"))

    monkeypatch.setattr(pipeline.ContentReview.objects, "select_for_update", real_lock)
    compiled_forget()  # (nothing compiled without the lock outlives it)
    found = violations([r.pk for r in reviews])
    assert any("not a chain" in v or "version/history" in v or "illegal transition" in v for v in found), found


def test_without_the_inbox_uniqueness_a_callback_stored_twice_is_reported(api_client):
    review, request = claimed(api_client)
    body = json.dumps(completed(request.idempotency_key))
    slots = threading.BoundedSemaphore(40)  # this PostgreSQL allows 100 connections

    naive_threads = 20
    all_checked = threading.Barrier(naive_threads)

    def naive_store(*, provider, event_id, body, headers, event, invalid_reason=""):
        existing = ProviderCallback.objects.filter(provider=provider, provider_event_id=event_id).first()
        # Check-then-insert, the race the upsert closes: every delivery has checked before any
        # inserts (as when many land within one round trip), so the race is run, not hoped for.
        all_checked.wait(timeout=30)
        if existing:
            return inbox.Stored(id=existing.pk, created=False, outcome=existing.outcome)
        row = ProviderCallback.objects.create(provider=provider, provider_event_id=event_id, payload_json=body,
                                              idempotency_key=event.idempotency_key)
        return inbox.Stored(id=row.pk, created=True, outcome="")

    def deliver_with(store, event_id):
        def deliver(i):
            with slots:
                try:
                    return store(provider="webhook", event_id=event_id, body=body, headers={}, event=parse(body))
                finally:
                    connection.close()
        return deliver

    # Control: the real store (INSERT ... ON CONFLICT) under the same collision: one row, the
    # others counted as duplicates, nothing for the checker to report.
    results = collide(60, deliver_with(inbox.callback_store, "evt_guarded"))
    assert sum(r.created for r in results) == 1, results
    assert ProviderCallback.objects.get(provider_event_id="evt_guarded").duplicate_count == 59
    assert violations([review.pk]) == []
    ProviderCallback.objects.all().delete()

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE callbacks_providercallback DROP CONSTRAINT callback_provider_event_uniq")
    try:
        stored = collide(naive_threads, deliver_with(naive_store, "evt_race"))
        assert sum(r.created for r in stored) == naive_threads, stored
        found = violations([review.pk])
        assert any("stored" in v and "times" in v for v in found), found
    finally:
        ProviderCallback.objects.all().delete()
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE callbacks_providercallback ADD CONSTRAINT callback_provider_event_uniq "
                           "UNIQUE (provider, provider_event_id)")
