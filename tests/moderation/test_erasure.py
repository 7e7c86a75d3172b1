"""Erasure keeps the audit chain (docs/design.md, invariant 16): the content is gone from every
column of the database, the review, its decisions, transitions and ids stay, with a tombstone."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import Actor, PipelineEvent, ReviewTransition
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation import services, tasks
from moderation import erasure
from moderation.erasure import Redact, content_erase
from moderation.errors import ContentErased
from moderation.invariants import violations
from moderation.models import (
    Cause,
    ContentErasure,
    ContentReview,
    Decision,
    DecisionSource,
    ModerationRequest,
    ResultOutcome,
    ReviewStatus,
)
from moderation.providers import Accepted
from moderation.providers.base import ProviderServerError
from moderation.signing import sign
from lab.race_lab import where_found
from tests.callbacks.conftest import SECRET, completed
from tests.helpers import collide, result

TEXT = 'Zorblax the unforgivable \U0001f419 \u00absaid\u00bb "things" about Qwertyuiop-Flange, twice over'
AUTHOR = "Vexillum-Stradivarius"


@pytest.fixture(autouse=True)
def callback_secret(settings):
    settings.CALLBACK_SECRETS = {"scripted": [SECRET]}


def deliver(body: dict, *, event_id: str):
    """A signed callback from the scripted provider (whose operations these are)."""
    raw = json.dumps(body).encode()
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in sign(SECRET, event_id=event_id, body=raw).items()}
    return APIClient().generic("POST", "/api/v1/callbacks/scripted/", raw, content_type="application/json", **headers)


def needles() -> list[str]:
    """The erased words, and a quote cut short (where_found also looks for them JSON-escaped)."""
    return [TEXT, TEXT[:30], AUTHOR]


def moderated_with_quotes(api_client, scripted, django_user_model) -> ContentReview:
    """A review whose content is quoted all over: a provider error, a callback body, a
    moderator's reason (so the decision, the transition log and the notification)."""
    api_client.webhook_url = "https://hooks.example.test/moderation"
    api_client.save(update_fields=["webhook_url"])
    review, _ = services.review_submit(
        client=api_client, external_id="post-1", kind="text", text=TEXT, metadata={"author": AUTHOR}
    )
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    scripted.script = [ProviderServerError(f'HTTP 500: {{"error": "cannot judge", "input": {json.dumps(TEXT)}}}'),
                       Accepted("prov-9")]
    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "retry_scheduled"
    ModerationRequest.objects.filter(pk=request.pk).update(next_attempt_at=timezone.now())  # the backoff is over
    assert services.request_dispatch(request_id=request.pk, worker_id="w1").action == "accepted"
    body = completed(request.idempotency_key, score=0.95, provider_id="prov-9")
    body["data"]["input"] = TEXT  # some providers echo what they judged
    assert deliver(body, event_id="evt-erase-1").status_code == 200
    moderator = django_user_model.objects.create_user("mod", is_staff=True)
    services.review_override(review_id=review.pk, label="approved", reason=f'"{TEXT[:40]}" is satire', moderator=moderator)
    review.refresh_from_db()
    return review


def erase_via_api(client, review_id, reason=None):
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {client.token}")
    query = f"?{urlencode({'reason': reason})}" if reason else ""
    return http.delete(f"/api/v1/reviews/{review_id}/content{query}")


@pytest.mark.django_db(transaction=True)
def test_erasure_leaves_the_content_in_no_column_and_keeps_the_audit_chain(api_client, scripted, django_user_model):
    review = moderated_with_quotes(api_client, scripted, django_user_model)
    before = where_found(needles())
    # The test can fail: the content really was stored and quoted in all these places.
    assert {"moderation_content.text", "moderation_content.metadata", "moderation_providerattempt.error",
            "moderation_moderationrequest.last_error", "callbacks_providercallback.payload_json",
            "moderation_decision.reason", "audit_reviewtransition.reason",
            "moderation_decisionnotification.payload"} <= before, before
    transitions = list(ReviewTransition.objects.filter(review=review).values_list("id", "cause", "to_status"))
    decisions = list(Decision.objects.filter(review=review).values_list("id", "label", "source"))

    response = erase_via_api(api_client, review.pk, reason="GDPR request #77")

    assert response.status_code == 200, response.content
    assert response.json()["reason"] == "GDPR request #77" and response.json()["status"] == "approved"
    assert where_found(needles()) == set()
    # The audit chain: the same review, transitions (none added) and decisions, with a tombstone.
    assert list(ReviewTransition.objects.filter(review=review).values_list("id", "cause", "to_status")) == transitions
    assert list(Decision.objects.filter(review=review).values_list("id", "label", "source")) == decisions
    tombstone = ContentErasure.objects.get(review=review)
    assert (tombstone.actor, tombstone.actor_id, tombstone.reason) == (Actor.API, "acme", "GDPR request #77")
    assert tombstone.redacted["moderation.Content.text"] == 1
    assert violations([review.pk]) == []
    # What stays of the callback still parses, with its ids and scores.
    event = parse(ProviderCallback.objects.get(provider_event_id="evt-erase-1").payload_json)
    assert event.provider_request_id == "prov-9" and event.result.category_scores == {"hate": 0.95}


@pytest.mark.django_db(transaction=True)
def test_a_callback_for_erased_content_is_still_a_duplicate_and_brings_nothing_back(api_client, scripted, django_user_model):
    review = moderated_with_quotes(api_client, scripted, django_user_model)
    erase_via_api(api_client, review.pk)
    key = ModerationRequest.objects.get(review=review).idempotency_key
    quoting = completed(key, score=0.95, provider_id="prov-9")
    quoting["data"]["input"] = TEXT

    again = deliver(quoting, event_id="evt-erase-1")  # the same event, re-delivered
    late = deliver(quoting, event_id="evt-erase-2")  # a new event for the same operation

    assert again.status_code == 200 and late.status_code == 200
    first = ProviderCallback.objects.get(provider_event_id="evt-erase-1")
    assert first.duplicate_count == 1 and ProviderCallback.objects.filter(provider_event_id="evt-erase-1").count() == 1
    assert ProviderCallback.objects.get(provider_event_id="evt-erase-2").outcome == ResultOutcome.DUPLICATE
    assert where_found(needles()) == set()
    assert violations([review.pk]) == []


@pytest.mark.django_db(transaction=True)
def test_after_erase_content_and_prune_for_real_the_checker_passes_no_column_holds_it_and_a_duplicate_is_known(
    api_client, scripted, django_user_model, capsys
):
    """Issue 18's acceptance on one database, through the two operator commands for real: the
    invariant checker passes, no text column holds what was erased, and a re-delivered callback
    for the erased review is still recognised as a duplicate."""
    review = moderated_with_quotes(api_client, scripted, django_user_model)
    key = ModerationRequest.objects.get(review=review).idempotency_key
    quoting = completed(key, score=0.95, provider_id="prov-9")
    quoting["data"]["input"] = TEXT
    assert deliver(quoting, event_id="evt-erase-0").status_code == 200  # a duplicate result: prunable later
    assert where_found(needles())  # the content really is quoted before
    # A year passes: the processed callbacks and events are past their retention.
    year_ago = timezone.now() - timedelta(days=400)
    ProviderCallback.objects.update(received_at=year_ago)
    PipelineEvent.objects.update(created_at=year_ago)

    call_command("erase_content", str(review.content_id), "--reason", "GDPR request #78", "--by", "ops-anna",
                 "--for-real")
    call_command("prune", "--for-real")

    out = capsys.readouterr().out
    assert "deleted         1  processed callbacks" in out and "  0  pipeline events" not in out, out
    assert set(ProviderCallback.objects.values_list("provider_event_id", flat=True)) == {"evt-erase-1"}  # cited
    every_review = list(ContentReview.objects.values_list("pk", flat=True))
    assert violations(every_review) == []
    assert where_found(needles()) == set()
    assert ContentErasure.objects.get(review=review).actor_id == "ops-anna"

    again = deliver(quoting, event_id="evt-erase-1")  # the decision's callback, re-delivered
    late = deliver(quoting, event_id="evt-erase-2")  # a new event for the same operation
    assert again.status_code == 200 and late.status_code == 200
    assert ProviderCallback.objects.get(provider_event_id="evt-erase-1").duplicate_count == 1
    assert ProviderCallback.objects.get(provider_event_id="evt-erase-2").outcome == ResultOutcome.DUPLICATE
    assert where_found(needles()) == set()
    assert violations(every_review) == []


@pytest.mark.django_db(transaction=True)
def test_erasing_content_under_review_stops_it_and_no_provider_sees_it(api_client, scripted, capsys):
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    request = services.review_claim(review_id=review.pk, worker_id="w1")

    call_command("erase_content", str(review.content_id), "--reason", "ticket 42", "--by", "ops-anna", "--for-real")

    assert "moderation stopped" in capsys.readouterr().out
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW and review.decision.source == DecisionSource.SYSTEM
    last = ReviewTransition.objects.filter(review=review).last()
    assert (last.cause, last.actor, last.actor_id) == (Cause.CONTENT_ERASED, Actor.COMMAND, "ops-anna")
    scripted.default = result(0.1)
    assert services.request_dispatch(request_id=request.pk, worker_id="w2").action == "skipped"
    assert scripted.calls == []
    # The provider's answer to the operation erasure cancelled changes nothing.
    late = completed(request.idempotency_key, score=0.1)
    late["data"]["input"] = TEXT
    deliver(late, event_id="evt-late")
    assert ProviderCallback.objects.get(provider_event_id="evt-late").outcome == ResultOutcome.ALREADY_FINAL
    assert where_found(needles()) == set()
    assert services.review_take_next(moderator=None) is None  # nothing for a human to judge
    with pytest.raises(ContentErased):
        services.review_reprocess(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops")
    assert violations([review.pk]) == []


@pytest.mark.django_db
def test_a_pending_review_erased_before_its_job_runs_is_never_sent(api_client, scripted):
    scripted.default = result(0.1)
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    assert tasks.moderate_review(review.pk) == "claim lost"
    assert scripted.calls == []
    assert violations([review.pk]) == []


@pytest.mark.django_db
def test_the_dry_run_erases_nothing_and_a_bad_id_stops_the_whole_run(api_client, capsys):
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)

    call_command("erase_content", str(review.pk), "--reason", "ticket 42")
    with pytest.raises(CommandError, match="no review or content"):
        call_command("erase_content", str(review.pk), "00000000-0000-0000-0000-000000000000", "--reason", "x",
                     "--for-real")

    out = capsys.readouterr().out
    assert "would erase moderation.Content.text x1" in out and "dry run" in out
    assert ContentErasure.objects.count() == 0 and where_found([TEXT]) == {"moderation_content.text"}
    review.refresh_from_db()
    assert review.status == ReviewStatus.PENDING


@pytest.mark.django_db
def test_only_the_owning_client_may_erase_and_a_second_erasure_answers_the_first(api_client, other_client):
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)

    assert erase_via_api(other_client, review.pk).status_code == 404
    first = erase_via_api(api_client, review.pk).json()
    second = erase_via_api(api_client, review.pk).json()

    assert first == second and first["stopped_moderation"] is True
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    assert http.get(f"/api/v1/reviews/{review.pk}/").json()["content_erased_at"] == first["erased_at"]
    assert erase_via_api(api_client, review.pk, reason="x" * 2001).status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_reviewtransition SET reason = 'edited'",  # the flag is needed
        "SET LOCAL moderation.erasure = 'on'; UPDATE audit_reviewtransition SET cause = 'edited'",  # reason only
        "SET LOCAL moderation.erasure = 'on'; DELETE FROM audit_reviewtransition",  # never a delete
    ],
)
def test_the_transition_log_accepts_only_the_sanctioned_redaction(api_client, statement):
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")
    rows = list(ReviewTransition.objects.values_list("id", "cause", "reason"))

    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)

    assert list(ReviewTransition.objects.values_list("id", "cause", "reason")) == rows


@pytest.mark.django_db(transaction=True)
def test_erasure_racing_the_moderation_job_never_lets_erased_content_reach_the_provider(api_client, scripted):
    scripted.default = result(0.1)
    reviews = [
        services.review_submit(client=api_client, external_id=f"race-{i}", kind="text", text=f"{TEXT} {i}")[0]
        for i in range(6)
    ]
    for review in reviews:

        def act(i: int, review=review):
            if i == 0:
                return content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="race").stopped_moderation
            return tasks.moderate_review(review.pk)

        outcomes = collide(2, act)
        assert not any(isinstance(o, BaseException) for o in outcomes), outcomes
    # Each call the provider got carried the content as submitted, never what erasure left.
    assert all(call.text.startswith(TEXT) for call in scripted.calls), [c.text for c in scripted.calls]
    assert violations([r.pk for r in reviews]) == []
    assert ContentReview.objects.filter(pk__in=[r.pk for r in reviews], content__erased_at__isnull=True).count() == 0


@pytest.mark.django_db
def test_the_history_copies_of_a_registered_column_are_redacted_with_it(api_client, monkeypatch):
    """A column added to the registry takes django-simple-history's copies of it along (here a
    review's worker id made to quote the content: every transition saves a history row)."""
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    services.review_claim(review_id=review.pk, worker_id=f"echo {TEXT[:40]}")
    columns = {"moderation_contentreview.worker_id", "moderation_historicalcontentreview.worker_id"}
    assert columns <= where_found([TEXT[:40]])
    monkeypatch.setattr(erasure, "REDACTED", (*erasure.REDACTED, Redact("moderation.ContentReview", "worker_id", review="pk")))

    report = content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    assert not columns & where_found([TEXT[:40]])
    assert report.redacted["moderation.ContentReview.worker_id"] == 1 + 2  # the row, and its two history rows
