"""Retention (moderation/privacy/retention.py): `prune` deletes what outlived its setting, never the
audit chain, never a callback still to process, and keeps every /metrics counter from falling."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from django_q.models import Task
from prometheus_client.parser import text_string_to_metric_families

from audit.models import EventKind, PipelineEvent, PrunedTally, ReviewTransition
from callbacks.models import ProviderCallback
from lab.simulator import WebhookReceiver
from moderation import services, tasks
from moderation.privacy import retention
from moderation.invariants import violations
from moderation.models import (
    ContentReview,
    Decision,
    DecisionNotification,
    HashBank,
    HashBankEntry,
    IdempotencyRecord,
    MediaRemoval,
    NotificationAttempt,
    ReviewMedia,
    ReviewStatus,
)
from moderation.services.transitions import record_event
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import claimed, collide, review_locked
from tests.helpers_media import encoded, image_hash, image_header, picture

OLD = timezone.now() - timedelta(days=400)
# A result never applied: its payload is all there is of it, so prune keeps it whole.
NEVER_PROCESSED = '{"type": "moderation.completed", "data": {"id": "prov-never", "results": [{"flagged": true}]}}'


@pytest.fixture(autouse=True)
def callback_secret(settings):
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}


@pytest.fixture
def receiver():
    receiver = WebhookReceiver()
    yield receiver
    receiver.stop()


def counters(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
        if s.name.endswith("_total")
    }


def an_old_history(api_client, receiver):
    """A year-old review with all that prune looks at: a decision's callback (delivered twice), a
    duplicate result's, a callback never processed, events, a delivered notification's attempts, an
    idempotency record and a job result."""
    api_client.webhook_url = receiver.url
    api_client.save(update_fields=["webhook_url"])
    review, request = claimed(api_client)
    assert services.review_claim(review_id=review.pk, worker_id="late") is None  # a claim_lost event
    deliver(completed(request.idempotency_key, score=0.95), event_id="evt-applied")
    deliver(completed(request.idempotency_key, score=0.95), event_id="evt-applied")  # a duplicate delivery
    deliver(completed(request.idempotency_key, score=0.1), event_id="evt-late")  # a duplicate result
    stored = ProviderCallback.objects.create(provider="webhook", provider_event_id="evt-never", payload_json=NEVER_PROCESSED)
    notification = DecisionNotification.objects.get(decision__review=review)
    assert services.notification_deliver(notification_id=notification.pk) == "delivered"
    IdempotencyRecord.objects.create(client=api_client, key="k1", fingerprint="f" * 64)
    Task.objects.create(id=uuid.uuid4().hex, name="old", func="moderation.tasks.sweep", started=OLD, stopped=OLD, success=True)
    # A year passes.
    ProviderCallback.objects.update(received_at=OLD)
    PipelineEvent.objects.update(created_at=OLD)
    DecisionNotification.objects.update(delivered_at=OLD)
    IdempotencyRecord.objects.update(created_at=OLD)
    return review, stored


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_prune_deletes_what_outlived_its_setting_and_never_the_audit_chain(client, api_client, receiver, settings, capsys):
    settings.METRICS_TOKEN, settings.METRICS_CACHE_S = "scrape-me", 0
    review, never_processed = an_old_history(api_client, receiver)
    transitions, decisions = ReviewTransition.objects.count(), Decision.objects.count()
    before = counters(client)

    call_command("prune")
    assert "would delete         1  processed callbacks" in capsys.readouterr().out
    assert ProviderCallback.objects.count() == 3  # a dry run deletes nothing
    call_command("prune", "--for-real")

    assert set(ProviderCallback.objects.values_list("provider_event_id", flat=True)) == {"evt-applied", "evt-never"}
    assert ProviderCallback.objects.get(pk=never_processed.pk).payload_json == NEVER_PROCESSED  # its payload kept
    assert not PipelineEvent.objects.exists() and not NotificationAttempt.objects.exists()
    assert not IdempotencyRecord.objects.exists() and not Task.objects.filter(name="old").exists()
    assert (ReviewTransition.objects.count(), Decision.objects.count()) == (transitions, decisions)
    assert DecisionNotification.objects.filter(decision__review=review).count() == 1
    assert violations([review.pk]) == []
    # Every counter reads as before: what prune deleted is tallied, not forgotten.
    assert counters(client) == before
    assert before[("moderation_lost_updates_total", (("kind", "claim_lost"),))] == 1


@pytest.mark.django_db(transaction=True)
def test_two_prunes_at_once_delete_each_row_once_and_tally_it_once(api_client):
    review, _ = claimed(api_client)
    for _ in range(40):
        record_event(EventKind.CLAIM_LOST, review_id=review.pk)
    PipelineEvent.objects.update(created_at=OLD)

    results = collide(2, lambda i: retention.prune(for_real=True, batch=3)["pipeline events"])

    assert not any(isinstance(r, BaseException) for r in results), results
    assert sum(results) == 40 + 1  # (and the claim's job_enqueued event)
    assert not PipelineEvent.objects.exists()
    tallied = dict(PrunedTally.objects.values_list("key", "count"))
    assert tallied == {"event:claim_lost": 40, "event:job_enqueued": 1}


@pytest.mark.django_db
def test_nothing_younger_than_its_setting_is_pruned(api_client):
    review, request = claimed(api_client)
    deliver(completed(request.idempotency_key), event_id="evt-1")
    deliver(completed(request.idempotency_key, score=0.95), event_id="evt-2")  # a duplicate result, processed
    ProviderCallback.objects.update(received_at=timezone.now() - timedelta(days=6))

    counts = retention.prune(for_real=True)

    assert set(counts.values()) == {0}
    assert ProviderCallback.objects.count() == 2


@pytest.mark.django_db
def test_prune_runs_daily_on_the_cluster():
    from django_q.models import Schedule

    from moderation import tasks

    schedule = Schedule.objects.get(name="moderation.prune")

    assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("moderation.tasks.prune", Schedule.DAILY, -1)
    assert tasks.prune().endswith(" deferred erasures run, 0 still held")


# --- images' bytes: removed once the review has been final for MEDIA_RETENTION_DAYS ----------

def an_image_review(api_client, external_id: str, *, label: str, days_ago: float):
    """An image decided by the job alone (its banks and the policy's image_fallback: no provider
    judges images here) to `label`, that long ago."""
    data = encoded(picture(hash(external_id) % 1000))
    if label == ReviewStatus.REJECTED:
        pdq, _ = image_hash(data)
        bank = HashBank.objects.get_or_create(name="known")[0]
        entry = HashBankEntry.objects.create(bank=bank, pdq=pdq)
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, hash_banks=[
            {"name": "known", "category": "csam", "action": "reject", "never_display": False, "through": entry.pk}])
    else:
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, image_fallback=label)
    review, _ = services.review_submit(client=api_client, external_id=external_id, kind="image", image=(data, image_header(data)))
    tasks.moderate_review(review.pk)
    review.refresh_from_db()
    assert review.status == label, review.decision.explanation
    then = timezone.now() - timedelta(days=days_ago)  # time passes
    ContentReview.objects.filter(pk=review.pk).update(completed_at=then)
    Decision.objects.filter(review=review).update(created_at=then)
    return review


def media_of(review) -> ReviewMedia:
    return ReviewMedia.objects.get(pk=review.content_id)


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_prune_removes_the_bytes_of_images_final_long_enough_and_keeps_their_hashes(api_client, scripted, capsys):
    old = settings.MEDIA_RETENTION_DAYS + 1
    approved = an_image_review(api_client, "approved-old", label=ReviewStatus.APPROVED, days_ago=old)
    rejected = an_image_review(api_client, "rejected-past-appeal", label=ReviewStatus.REJECTED, days_ago=183 + old)
    kept = {
        "approved lately": an_image_review(api_client, "approved-new", label=ReviewStatus.APPROVED, days_ago=1),
        "waiting for a human": an_image_review(api_client, "manual", label=ReviewStatus.MANUAL_REVIEW, days_ago=old),
        "still appealable": an_image_review(api_client, "rejected-old", label=ReviewStatus.REJECTED, days_ago=old),
        "reprocessed": an_image_review(api_client, "reprocessed", label=ReviewStatus.APPROVED, days_ago=old),
        "under appeal": an_image_review(api_client, "appealed", label=ReviewStatus.REJECTED, days_ago=old),
    }
    services.review_reprocess(review_id=kept["reprocessed"].pk, actor="command", actor_id="ops", reason="re-check")
    services.appeal_file(review_id=kept["under appeal"].pk, appellant_id="author-1", statement="not what it seems")
    hashes = {review.pk: (media_of(review).pdq, media_of(review).pdq_quality) for review in [approved, rejected]}
    assert all(media_of(review).thumbnail for review in [approved, rejected])  # the job kept one

    call_command("prune")
    assert "would delete         2  images' bytes (final for more than MEDIA_RETENTION_DAYS=30)" in capsys.readouterr().out
    assert media_of(approved).data is not None  # a dry run removes nothing
    call_command("prune", "--for-real")

    assert "deleted         2  images' bytes" in capsys.readouterr().out
    for review in (approved, rejected):
        media = media_of(review)
        assert (media.data, media.removed_why) == (None, MediaRemoval.RETENTION) and media.removed_at is not None
        assert media.thumbnail is None  # made from the bytes, it goes with them
        assert (media.pdq, media.pdq_quality) == hashes[review.pk] and media.mime == "image/png"
    for why, review in kept.items():
        assert media_of(review).data is not None and media_of(review).removed_at is None, why
        assert media_of(review).thumbnail is not None, why
    assert retention.prune(for_real=True)["images' bytes"] == 0  # nothing is removed twice


@pytest.mark.django_db(transaction=True)
def test_two_prunes_at_once_remove_each_images_bytes_once(api_client, scripted):
    reviews = [an_image_review(api_client, f"img-{n}", label=ReviewStatus.APPROVED, days_ago=40) for n in range(5)]

    results = collide(2, lambda i: retention.prune(for_real=True, batch=2)["images' bytes"])

    assert sum(results) == 5
    assert all(media_of(review).data is None for review in reviews)


@pytest.mark.django_db(transaction=True)
def test_an_image_whose_review_is_locked_is_left_to_the_next_prune(api_client, scripted):
    """A reprocess or an appeal holds the review's lock while it moves the review out of its final
    state: prune skips that review rather than removing bytes it is about to need."""
    busy = an_image_review(api_client, "busy", label=ReviewStatus.APPROVED, days_ago=40)
    idle = an_image_review(api_client, "idle", label=ReviewStatus.APPROVED, days_ago=40)

    with review_locked(busy.pk):
        assert retention.prune(for_real=True)["images' bytes"] == 1

    assert media_of(busy).data is not None and media_of(idle).data is None
    assert retention.prune(for_real=True)["images' bytes"] == 1


@pytest.mark.django_db
def test_kept_provider_answers_older_than_their_setting_are_pruned(settings):
    from moderation.models import ProviderAnswer

    settings.PROVIDER_ANSWER_RETENTION_DAYS = 30
    result = {"model": "m", "flagged": False, "categories": {}, "category_scores": {}, "parts": []}
    ProviderAnswer.objects.create(key="a" * 64, model="local:m", result=result)
    ProviderAnswer.objects.create(key="b" * 64, model="local:m", result=result)
    ProviderAnswer.objects.filter(key="a" * 64).update(created_at=timezone.now() - timedelta(days=31))

    assert retention.prune(for_real=True)["kept provider answers"] == 1
    assert list(ProviderAnswer.objects.values_list("key", flat=True)) == ["b" * 64]
