"""The inbox under concurrency and crashes; processing is idempotent."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from audit.models import ReviewTransition
from callbacks import services
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation.models import Decision, ReviewStatus
from tests.callbacks.conftest import completed, deliver
from tests.helpers import claimed, collide

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

# PostgreSQL allows 100 connections here: at most this many deliveries hold one at a time.
DB_SLOTS = threading.BoundedSemaphore(60)


@pytest.mark.django_db(transaction=True)
def test_two_hundred_concurrent_deliveries_of_one_callback_make_one_row_and_one_effect(api_client):
    review, request = claimed(api_client)
    body = completed(request.idempotency_key, score=0.95)

    def post(i):
        with DB_SLOTS:
            try:
                response = deliver(body, event_id="evt_storm")
                return response.status_code, response.json()["duplicate"]
            finally:
                connection.close()

    answers = collide(200, post)

    assert {status for status, _ in answers} == {200}
    assert sorted(duplicate for _, duplicate in answers) == [False] + [True] * 199
    stored = ProviderCallback.objects.get()
    assert stored.duplicate_count == 199 and stored.outcome == "applied"
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert Decision.objects.filter(review=review).count() == 1
    assert ReviewTransition.objects.filter(review=review, to_status=ReviewStatus.REJECTED).count() == 1


def store_only(key, *, event_id="evt_crash", score=0.1):
    """Store a callback as the endpoint does, then 'crash' before processing it."""
    import json

    body = json.dumps(completed(key, score=score))
    return services.callback_store(provider="webhook", event_id=event_id, body=body, headers={}, event=parse(body))


def test_a_callback_stored_but_never_processed_is_finished_by_the_sweeper(api_client):
    review, request = claimed(api_client)
    stored = store_only(request.idempotency_key)

    too_soon = services.callbacks_sweep()
    later = services.callbacks_sweep(now=timezone.now() + timedelta(minutes=1))

    assert too_soon == [] and later == [stored.id]
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED
    assert ProviderCallback.objects.get().outcome == "applied"


def test_processing_twice_is_harmless(api_client):
    review, request = claimed(api_client)
    stored = store_only(request.idempotency_key)

    assert services.callback_process(callback_id=stored.id) == "applied"
    assert services.callback_process(callback_id=stored.id) is None

    assert review.transitions.count() == 2
    assert Decision.objects.filter(review=review).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_fast_path_and_the_sweeper_racing_apply_once(api_client):
    for i in range(5):
        review, request = claimed(api_client)
        stored = store_only(request.idempotency_key, event_id=f"evt_race_{i}")

        outcomes = collide(
            3,
            lambda n: services.callback_process(callback_id=stored.id)
            if n
            else services.callbacks_sweep(now=timezone.now() + timedelta(minutes=1)),
        )

        applied = [o for o in outcomes[1:] if o == "applied"] + (["applied"] if outcomes[0] == [stored.id] else [])
        assert applied == ["applied"], outcomes
        assert Decision.objects.filter(review=review).count() == 1


def replay(*args) -> str:
    out = StringIO()
    call_command("replay_callbacks", *args, stdout=out)
    return out.getvalue()


def test_replay_is_a_dry_run_by_default(api_client):
    review, request = claimed(api_client)
    store_only(request.idempotency_key)

    output = replay("--unprocessed")

    assert "dry run" in output and "1 callback" in output
    assert ProviderCallback.objects.get().processed_at is None
    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING


def test_replay_for_real_processes_waiting_callbacks(api_client):
    review, request = claimed(api_client)
    store_only(request.idempotency_key)

    output = replay("--unprocessed", "--for-real")

    assert "applied: 1" in output
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED


def test_replaying_a_processed_callback_by_id_changes_nothing_and_says_so(api_client):
    review, request = claimed(api_client)
    stored = store_only(request.idempotency_key)
    services.callback_process(callback_id=stored.id)

    output = replay("--id", str(stored.id), "--for-real")

    assert "duplicate: 1" in output
    assert ProviderCallback.objects.get().outcome == "applied"  # the first outcome stands
    assert review.transitions.count() == 2


def test_replay_needs_a_selection(api_client):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--unprocessed or --id"):
        replay()


def test_a_callback_whose_processing_keeps_failing_is_parked_not_retried_for_ever(api_client, monkeypatch):
    from callbacks import services as module

    review, request = claimed(api_client)
    stored = store_only(request.idempotency_key)
    monkeypatch.setattr(module, "_apply", lambda *a: (_ for _ in ()).throw(RuntimeError("bug")))
    later = timezone.now() + timedelta(minutes=1)

    for _ in range(module.MAX_PROCESS_FAILURES + 2):
        services.callbacks_sweep(now=later)

    parked = ProviderCallback.objects.get(pk=stored.id)
    assert parked.process_failures == module.MAX_PROCESS_FAILURES and "RuntimeError: bug" in parked.process_error
    assert parked.processed_at is None
    monkeypatch.undo()
    assert "applied: 1" in replay("--id", str(stored.id), "--for-real")  # an operator can still finish it


@pytest.mark.django_db(transaction=True)
def test_a_callback_processed_while_its_content_is_erased_neither_deadlocks_nor_fails(api_client, monkeypatch):
    """Erasure holds the review's lock while it redacts the review's stored callbacks; processing a
    callback takes the review's lock before its inbox row's (docs/design.md, invariant 5), so the two
    queue up. Here processing is held between its locks and the applying of the result while the
    erasure starts: taking the inbox row first, the two deadlocked, and one of them failed (a race
    lab run: the erasure answered 500)."""
    from audit.models import Actor
    from moderation.privacy.erasure import content_erase

    review, request = claimed(api_client)
    stored = store_only(request.idempotency_key, score=0.95)
    locks_held, real_finalize = threading.Event(), services.review_finalize

    def finalize_once_the_erasure_has_started(**kwargs):
        locks_held.set()
        time.sleep(1.0)  # the erasure takes the review's lock meanwhile, unless this holds it
        return real_finalize(**kwargs)

    monkeypatch.setattr(services, "review_finalize", finalize_once_the_erasure_has_started)

    def racer(i):
        if i == 0:
            return services.callback_process(callback_id=stored.id)
        assert locks_held.wait(10)
        return content_erase(review_id=review.pk, actor=Actor.API, actor_id="client", reason="erased").stopped_moderation

    processed, erasure_stopped_moderation = collide(2, racer)

    review.refresh_from_db()
    callback = ProviderCallback.objects.get()
    # The callback came first: it applied; the erasure then found the review decided.
    assert processed == "applied" and erasure_stopped_moderation is False
    assert review.status == ReviewStatus.REJECTED and review.content.erased_at is not None
    # The erasure redacted the stored callback once processing had let go of it.
    assert callback.processed_at is not None and '"erased": true' in str(callback.payload_json)
