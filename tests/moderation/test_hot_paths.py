"""The transition log and the decisions are never pruned (moderation/privacy/retention.py), so the hot
paths must never read them by scanning: each statement a review's life issues against them is
planned, on a database holding thousands of other reviews' rows, as an index lookup."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from lab.simulator import WebhookReceiver
from moderation import services, tasks
from moderation.models import ContentReview, DecisionNotification, ModerationRequest
from moderation.providers import Accepted
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import SCORE_FOR, result

BULK = 3000


def clone(table: str, template_id, copies: int, overrides: dict[str, str]) -> None:
    """`copies` rows of `table` like the row `template_id`, with some columns computed (SQL over
    `g`, the copy's number). Every other column is copied, whichever columns the table has."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s"
            " AND is_generated = 'NEVER'",  # a generated column is the database's to fill
            [table],
        )
        columns = [c for (c,) in cursor.fetchall() if c != "id" or "id" in overrides]
        names = ", ".join(f'"{c}"' for c in columns)
        values = ", ".join(overrides.get(c, f't."{c}"') for c in columns)
        cursor.execute(
            f'INSERT INTO "{table}" ({names}) '
            f'SELECT {values} FROM "{table}" t, generate_series(1, %s) g WHERE t.id = %s',
            [copies, template_id],
        )


def thousands_of_decided_reviews(api_client, scripted) -> None:
    scripted.default = result(SCORE_FOR["rejected"])
    template, _ = services.review_submit(client=api_client, external_id="template", kind="text", text="a template")
    tasks.moderate_review(template.pk)
    template.refresh_from_db()
    content_of_copy = f"(SELECT id FROM moderation_content WHERE client_id = {api_client.pk} AND external_id = 'bulk-' || g)"
    clone("moderation_content", template.content_id, BULK, {"id": "gen_random_uuid()", "external_id": "'bulk-' || g"})
    clone("moderation_contentreview", template.pk, BULK, {
        "id": "gen_random_uuid()", "content_id": content_of_copy, "decision_id": "NULL", "active_idempotency_key": "NULL",
    })
    review_of_copy = f"(SELECT id FROM moderation_contentreview WHERE content_id = {content_of_copy})"
    clone("moderation_decision", template.decision_id, BULK, {"review_id": review_of_copy, "request_id": "NULL"})
    for transition in template.transitions.values_list("id", flat=True):
        clone("audit_reviewtransition", transition, BULK, {"review_id": review_of_copy})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_a_reviews_hot_paths_read_transitions_and_decisions_by_index_only(api_client, scripted, settings, django_user_model):
    settings.CALLBACK_SECRETS = {"webhook": [SECRET], "scripted": [SECRET]}
    thousands_of_decided_reviews(api_client, scripted)
    receiver = WebhookReceiver()
    api_client.webhook_url = receiver.url
    api_client.save(update_fields=["webhook_url"])
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    moderator = django_user_model.objects.create_user("mod", is_staff=True, is_superuser=True)
    scripted.default = Accepted("prov-1")
    try:
        with CaptureQueriesContext(connection) as captured:
            review_id = http.post("/api/v1/reviews/", {"external_id": "new", "content_type": "text", "text": "hello"},
                                  format="json").json()["id"]
            tasks.moderate_review(review_id)  # claim, dispatch (accepted)
            key = ModerationRequest.objects.get(review_id=review_id).idempotency_key
            deliver(completed(key, score=SCORE_FOR["manual_review"]), event_id="evt-hot")  # finalize, decide
            http.get(f"/api/v1/reviews/{review_id}/")
            http.get(f"/api/v1/reviews/{review_id}/timeline/")
            review = ContentReview.objects.get(pk=review_id)
            services.review_override(review_id=review_id, label="approved", reason="fine", moderator=moderator,
                                     expected_version=review.version)
            for notification in DecisionNotification.objects.filter(decision__review_id=review_id):
                services.notification_deliver(notification_id=notification.pk)
    finally:
        receiver.stop()

    statements = [q["sql"] for q in captured.captured_queries
                  if q["sql"].lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "WITH"))
                  and re.search(r'"(audit_reviewtransition|moderation_decision)"', q["sql"])]
    assert len(statements) >= 5, statements  # the paths really read these tables
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row for (row,) in cursor.fetchall())
            assert not re.search(r"Seq Scan on (audit_reviewtransition|moderation_decision)\b", plan), f"{sql}\n{plan}"
