"""Decision notifications through the outbox: one per decision, delivered at least once with a
stable webhook-id, signed so the standardwebhooks library verifies them."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from callbacks.models import ProviderCallback
from moderation import services, tasks
from moderation.models import DecisionNotification, NotificationKind, NotificationStatus
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import claimed, collide, decided, queued_tasks, reads_wait_for_each_other

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


@pytest.fixture
def receiver(webhook_receiver):
    return webhook_receiver


def run_delivery_jobs() -> list[str]:
    """Run the deliver_notification jobs waiting in the broker, as a worker would."""
    return [tasks.deliver_notification(**t["kwargs"]) for t in queued_tasks("moderation.tasks.deliver_notification")]


def test_duplicate_callbacks_a_sweep_and_a_job_rerun_make_one_notification(api_client, receiver, settings):
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}
    review, request = claimed(api_client)
    body = completed(request.idempotency_key, score=0.95)

    for _ in range(3):
        assert deliver(body, event_id="evt_once").status_code == 200
    services.reviews_sweep(now=timezone.now() + timedelta(minutes=10))
    outcomes = run_delivery_jobs() + run_delivery_jobs()  # every job, twice

    assert ProviderCallback.objects.get().duplicate_count == 2
    assert DecisionNotification.objects.count() == 1
    assert outcomes.count("delivered") == 1
    assert len(receiver.received) == 1
    payload = json.loads(receiver.received[0][1])
    assert payload["type"] == "review.decided"
    assert (payload["data"]["review_id"], payload["data"]["status"]) == (str(review.pk), "rejected")


def test_a_failing_receiver_gets_the_same_webhook_id_until_it_succeeds_and_the_signature_verifies(api_client, receiver):
    receiver.statuses = [500, 503]
    review = decided(api_client, "approved")
    notification = DecisionNotification.objects.get()
    when = timezone.now()

    outcomes = []
    for _ in range(4):
        outcomes.append(services.notification_deliver(notification_id=notification.pk, now=when))
        when += timedelta(hours=2)

    assert outcomes == ["retry_scheduled", "retry_scheduled", "delivered", "already delivered"]
    ids = {headers["webhook-id"] for headers, _ in receiver.received}
    assert ids == {notification.event_id} and len(receiver.received) == 3
    assert len({body for _, body in receiver.received}) == 1  # the same bytes every time
    headers, body = receiver.received[-1]
    verified = Webhook(api_client.webhook_secret).verify(body, headers)
    assert verified["data"]["review_id"] == str(review.pk)
    attempts = list(notification.attempt_log.values_list("attempt_no", "status_code"))
    assert attempts == [(1, 500), (2, 503), (3, 200)]


def test_an_override_announces_a_new_decision(api_client, receiver, django_user_model):
    review = decided(api_client, "manual_review")
    moderator = django_user_model.objects.create_user("mia")
    services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=moderator)

    run_delivery_jobs()

    assert DecisionNotification.objects.count() == 2
    statuses = [json.loads(body)["data"]["status"] for _, body in receiver.received]
    assert sorted(statuses) == ["approved", "manual_review"]
    assert len({h["webhook-id"] for h, _ in receiver.received}) == 2


def test_gives_up_after_the_maximum_attempts(api_client, receiver, settings):
    settings.NOTIFY_MAX_ATTEMPTS = 2
    receiver.statuses = [500, 500, 500]
    decided(api_client, "rejected")
    notification = DecisionNotification.objects.get()

    results = [services.notification_deliver(notification_id=notification.pk, now=timezone.now() + timedelta(hours=h))
               for h in (0, 2, 4)]

    assert results == ["retry_scheduled", "failed", "already failed"]
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.FAILED and notification.last_error == "HTTP 500"


def test_a_client_without_a_webhook_url_gets_a_row_but_no_delivery(api_client):
    decided(api_client, "approved")
    assert DecisionNotification.objects.get().status == NotificationStatus.NO_ENDPOINT
    assert not queued_tasks("moderation.tasks.deliver_notification")


def test_a_lost_delivery_job_is_enqueued_again_by_the_sweeper(api_client, receiver):
    from django_q.models import OrmQ

    decided(api_client, "approved")
    OrmQ.objects.all().delete()  # the broker lost the job

    report = services.reviews_sweep(now=timezone.now() + timedelta(minutes=10))

    assert len(report.notifications_enqueued) == 1
    assert run_delivery_jobs() == ["delivered"]


@pytest.mark.parametrize("path", ["provider", "give_up", "override", "escalate"])
def test_every_kind_of_decision_writes_exactly_one_notification_with_it(api_client, scripted, django_user_model, path):
    from moderation.providers.base import ProviderClientError
    from tests.helpers import submit

    moderator = django_user_model.objects.create_user("mia")
    if path == "provider":
        review = decided(api_client, "approved")
    elif path == "give_up":
        scripted.script = [ProviderClientError("422", http_status=422)]
        review, request = claimed(api_client)
        services.request_dispatch(request_id=request.pk, worker_id="w1")
    elif path == "override":
        review = decided(api_client, "manual_review")
        services.review_override(review_id=review.pk, label="rejected", category="harassment", reason="no",
                                 moderator=moderator)
    else:
        review = submit(api_client)
        services.review_escalate(review_id=review.pk, reason="look at this", moderator=moderator)
    review.refresh_from_db()

    assert review.decision.notification.client_id == api_client.pk
    assert DecisionNotification.objects.filter(decision__review=review).count() == review.decisions.count()
    assert json.loads(review.decision.notification.payload)["data"]["status"] == review.status


def test_a_decision_rolled_back_leaves_no_notification(api_client):
    from django.db import transaction

    from moderation.services.decide import decision_record

    review = decided(api_client, "approved")
    before = DecisionNotification.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        locked = type(review).objects.select_related("client", "content").select_for_update().get(pk=review.pk)
        decision_record(locked, label="rejected", source="moderator", reason="then the transaction fails")
        assert DecisionNotification.objects.count() == before + 1  # written in the decision's transaction
        raise RuntimeError("rolled back")
    assert DecisionNotification.objects.count() == before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("guards", ["client lock and row lock", "row lock alone"])
def test_two_delivery_jobs_at_once_post_once(api_client, receiver, monkeypatch, guards):
    if guards == "row lock alone":
        # The client's advisory lock (the webhook gate's) serialises these jobs too; without it
        # the row lock must hold the race by itself, so removing the row lock fails this case.
        monkeypatch.setattr("moderation.services.notifications.lock_client", lambda client_id: None)
    decided(api_client, "approved")
    notification = DecisionNotification.objects.get()
    # The window widened: a job that has read the notification row waits (up to 1 s) until the
    # other jobs have read it too, so without the row lock every job reads it before any
    # records its attempt. With the lock the others skip the row and never read it: the wait
    # times out and the one job carries on.
    reads_wait_for_each_other(monkeypatch, DecisionNotification, 3)

    outcomes = collide(3, lambda i: services.notification_deliver(notification_id=notification.pk))

    assert sorted(map(str, outcomes)).count("delivered") == 1, outcomes
    assert len(receiver.received) == 1


def test_a_stale_attempt_cannot_undo_a_later_delivery(api_client, receiver, settings):
    from moderation.services.notifications import delivery_begin, delivery_finish

    decided(api_client, "approved")
    notification = DecisionNotification.objects.get()
    now = timezone.now()
    stale = delivery_begin(notification.pk, now)  # its worker hangs...
    later = now + timedelta(seconds=settings.Q_TASK_TIMEOUT_S + 31)  # ...past its lease
    fresh = delivery_begin(notification.pk, later)

    # The stale attempt reports while the fresh one still holds the row: the attempt count says
    # it is not the holder, so the fresh attempt's lease stays and nothing is recorded.
    assert delivery_finish(*stale, status=None, error="ReadTimeout", latency_ms=90_000) == "superseded by a later attempt"
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.PENDING and notification.locked_until is not None
    assert notification.last_error == ""

    assert delivery_finish(*fresh, status=200, error="", latency_ms=5) == "delivered"
    # Reported again after the delivery: the status says it is settled.
    assert delivery_finish(*stale, status=None, error="ReadTimeout", latency_ms=90_000) == "superseded by a later attempt"
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.DELIVERED and notification.last_error == ""


def test_failed_notifications_can_be_resent_to_the_current_url_with_the_same_id(api_client, receiver, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.NOTIFY_MAX_ATTEMPTS = 1
    receiver.statuses = [500]
    decided(api_client, "rejected")
    notification = DecisionNotification.objects.get()
    services.notification_deliver(notification_id=notification.pk)
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.FAILED

    dry = StringIO()
    call_command("resend_notifications", "--failed", stdout=dry)
    call_command("resend_notifications", "--failed", "--for-real", stdout=StringIO())
    run_delivery_jobs()

    assert "dry run: 1 notifications" in dry.getvalue()
    notification.refresh_from_db()
    assert notification.status == NotificationStatus.DELIVERED
    assert [h["webhook-id"] for h, _ in receiver.received] == [notification.event_id] * 2


def test_a_threshold_crossing_and_an_appeals_resolution_are_delivered_signed_once_each(
    api_client, receiver, django_user_model
):
    reported = decided(api_client, "approved")
    for reporter in ("a", "b", "c", "d"):
        services.report_file(review_id=reported.pk, reporter_id=reporter, reason="hate")
    appealed = decided(api_client, "rejected")
    appeal = services.appeal_file(review_id=appealed.pk, appellant_id="owner", statement="satire")
    services.review_override(review_id=appealed.pk, label="approved", reason="satire, not hate",
                             moderator=django_user_model.objects.create_user("mia"))

    outcomes = run_delivery_jobs() + run_delivery_jobs()  # every job twice: delivered once each

    assert outcomes.count("delivered") == 4  # two review.decided, one review.reported, one appeal.resolved
    bodies = {}
    for headers, body in receiver.received:
        verified = Webhook(api_client.webhook_secret).verify(body, headers)
        bodies[verified["type"]] = verified["data"]
    assert bodies["review.reported"] == {"review_id": str(reported.pk), "external_id": reported.content.external_id,
                                         "report_count": 3}
    resolved = bodies["appeal.resolved"]
    assert (resolved["appeal_id"], resolved["outcome"]) == (str(appeal.pk), "overturned")
    assert resolved["decision"]["decided_by"] == "moderator" and "mia" not in json.dumps(resolved)
    kinds = sorted(DecisionNotification.objects.values_list("kind", flat=True))
    assert kinds == sorted([NotificationKind.REVIEW_DECIDED] * 2 + [NotificationKind.REVIEW_REPORTED,
                                                                     NotificationKind.APPEAL_RESOLVED])
