"""Urgent escalation (DSA Art. 18; docs/legal-holds.md): a threat to life or safety waits in the
urgent queue ahead of everything, with a deadline in minutes, and one step makes the report to the
authorities (JSON and a printable page), records who, when and to whom, and places a legal hold."""

from __future__ import annotations

import json
import socket

import pytest
from django.db import DatabaseError, connection, transaction
from django.urls import reverse

from moderation import services
from moderation.models import AuthorityReport, ContentReview, ReviewQueue, ReviewStatus, SnapshotView
from moderation.privacy.holds import review_holds
from moderation.services.preservation import snapshot_digest
from tests.helpers import decided, staff_browser

THREAT = "thanks for the lovely dinner, see you at the party"  # the scripted result scores it as harassment


@pytest.fixture
def urgent_policy(db, settings):
    settings.PLATFORM_CONTACT_NAME, settings.PLATFORM_CONTACT_EMAIL = "Example", "safety@example.org"
    return services.policy_publish(reject_threshold=0.68, review_threshold=0.33, urgent_categories=["harassment"],
                                   urgent_deadline_minutes=30)


@pytest.mark.usefixtures("urgent_policy")
def test_a_threat_to_life_waits_in_the_urgent_queue_ahead_of_everything_with_its_snapshot(api_client):
    urgent = decided(api_client, ReviewStatus.MANUAL_REVIEW)
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33)  # nothing urgent any more
    ordinary = decided(api_client, ReviewStatus.MANUAL_REVIEW)
    assert urgent.queue == ReviewQueue.URGENT and ordinary.queue == ReviewQueue.LOW_CONFIDENCE
    assert urgent.queue_order_at < ordinary.queue_order_at
    assert urgent.snapshots.count() == 1 and not ordinary.snapshots.exists()


@pytest.fixture
def refused_network(monkeypatch):
    tried = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise OSError("no connection in this test")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return tried


def test_one_step_reports_it_records_who_when_and_to_whom_and_places_a_hold(api_client, django_user_model,
                                                                          urgent_policy, refused_network):
    review = decided(api_client, ReviewStatus.MANUAL_REVIEW)
    moderator = staff_browser(django_user_model, "mia", "moderator")
    queue = moderator.get(reverse("admin:moderation_contentreview_queues") + "?queue=urgent").content.decode()
    assert f'id="deadline-{review.short_id}"' in queue and "30 minutes after it arrived" in queue
    assert f'id="inform-{review.short_id}"' in queue

    url = reverse("admin:moderation_authorityreport_inform", args=[review.pk])
    response = moderator.post(url, {"recipient": "Police, Jakarta cyber unit"})
    report = AuthorityReport.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/{report.pk}/print/")
    body = report.body
    assert (report.recipient, report.sent_by) == ("Police, Jakarta cyber unit", "mia")
    assert body["content"]["text"] == THREAT and body["category"] == "harassment"
    assert body["platform"] == {"name": "Example", "contact": "safety@example.org"}
    assert body["snapshot"]["sha256"] == review.snapshots.get().sha256 and body["learned_at"]
    assert report.sha256 == snapshot_digest(body)
    assert review_holds(review.pk) == [report.hold_id]
    assert SnapshotView.objects.get().viewer == "mia"
    printed = moderator.get(response["Location"]).content.decode()
    assert "Police, Jakarta cyber unit" in printed and body["snapshot"]["sha256"] in printed
    exported = moderator.get(reverse("admin:moderation_authorityreport_json", args=[report.pk]))
    assert json.loads(exported.content) == body and "no-store" in exported["Cache-Control"]
    assert refused_network == []  # the platform sent nothing


def test_a_report_needs_a_recipient_and_a_deciding_role_and_is_append_only(api_client, django_user_model,
                                                                          urgent_policy):
    review = decided(api_client, ReviewStatus.MANUAL_REVIEW)
    url = reverse("admin:moderation_authorityreport_inform", args=[review.pk])
    assert staff_browser(django_user_model, "ada", "auditor").post(url, {"recipient": "police"}).status_code == 403
    moderator = staff_browser(django_user_model, "mia", "moderator")
    moderator.post(url, {"recipient": "   "})
    assert not AuthorityReport.objects.exists() and review_holds(review.pk) == []
    moderator.post(url, {"recipient": "police"})
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE moderation_authorityreport SET recipient = 'nobody'")
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.MANUAL_REVIEW
