"""`review.reported` and `appeal.resolved` go through the same outbox as decisions: written in
the transaction that makes them, delivered once, signed, with a stable webhook-id."""

from __future__ import annotations

import json

import pytest
from standardwebhooks import Webhook

from moderation import services, tasks
from moderation.models import ApiClient, DecisionNotification, NotificationKind
from lab.simulator import WebhookReceiver
from tests.helpers import decided, queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver(api_client):
    server = WebhookReceiver()
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=server.url)
    api_client.refresh_from_db()
    yield server
    server.stop()


def deliver_all() -> list[str]:
    return [tasks.deliver_notification(**t["kwargs"]) for t in queued_tasks("moderation.tasks.deliver_notification")]


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

    outcomes = deliver_all() + deliver_all()  # every job twice: delivered once each

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
