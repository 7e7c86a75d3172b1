"""Erasure keeps the audit chain (docs/design.md, invariant 16): the content is gone from every
column of the database, the review, its decisions, transitions and ids stay, with a tombstone."""

from __future__ import annotations

import json
import socket
from io import StringIO
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest
from hypothesis import assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from PIL.PngImagePlugin import PngInfo
from rest_framework.test import APIClient

from audit.models import Actor, PipelineEvent, ReviewTransition
from callbacks.models import ProviderCallback
from callbacks.payload import parse
from moderation import netguard, services, tasks
from moderation.privacy import erasure
from moderation.text import quotes
from moderation.services import media as media_services
from moderation.privacy.erasure import Redact, content_erase
from moderation.errors import ContentErased, NotAppealable
from moderation.invariants import violations
from moderation.models import (
    ERASED,
    Appeal,
    Content,
    Cause,
    ContentErasure,
    ContentReview,
    Decision,
    DecisionNotification,
    DecisionSource,
    MediaRemoval,
    ModerationRequest,
    NotificationKind,
    ResultOutcome,
    ReviewMedia,
    ReviewStatus,
)
from moderation.providers import Accepted
from moderation.providers.base import ProviderServerError
from moderation.signing import sign
from lab.race_lab import where_found
from tests.callbacks.conftest import SECRET, completed
from tests.helpers import examples, collide, decided, result
from tests.helpers_media import encoded, image_header, picture

TEXT = 'Zorblax the unforgivable \U0001f419 \u00absaid\u00bb "things" about Qwertyuiop-Flange, twice over'
AUTHOR = "Vexillum-Stradivarius"


@pytest.fixture(autouse=True)
def callback_secret(settings):
    settings.CALLBACK_SECRETS = {"scripted": [SECRET]}


def deliver(body: dict | bytes, *, event_id: str):
    """A signed callback from the scripted provider (whose operations these are)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
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
    services.review_override(review_id=review.pk, label="approved", reason=f'"{TEXT[:40]}" is satire', moderator=moderator,
                             share_reason=True)  # sent to the user: the webhook's payload quotes it too
    review.refresh_from_db()
    return review


def erase_via_api(client, review_id, reason=None):
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {client.token}")
    query = f"?{urlencode({'reason': reason})}" if reason else ""
    return http.delete(f"/api/v1/reviews/{review_id}/content{query}")


@pytest.mark.usefixtures("on_commit_callbacks_run")
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


@pytest.mark.usefixtures("on_commit_callbacks_run")
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


@pytest.mark.usefixtures("on_commit_callbacks_run")
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


@pytest.mark.usefixtures("on_commit_callbacks_run")
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
    # The row and the claim's history row; the history row of the erasure's own decision (the
    # review was processing) is written after the redaction, from the review as redacted.
    assert report.redacted["moderation.ContentReview.worker_id"] == 1 + 1


# --- issue 22: nothing quotes the matched words; every column is searched for a marker --------

MARKER = "Qu4ntumB4n4n4"  # how the user spelt the watched term "quantumbanana": never policy text
WATCHED = "quantumbanana"
PATTERN = "re:<<[^>]{20,}>>"  # matches a long span, far from the content's first characters
MARKED = (f"Morning all, nothing to see here. zorp {MARKER} said the one at the back, "
          f"<<and then a long aside in which {MARKER} hides in the middle of it all>> and that was it.")
TERMS = [{"category": "harassment", "action": "reject", "language": "",
          "terms": [WATCHED, f"zorp {WATCHED}", PATTERN]}]


def columns_holding(marker: str) -> set[str]:
    """Every column of every table, found by introspection, whose value holds `marker` in any
    case: text, character, JSON, arrays (as text) and bytea (as UTF-8 bytes)."""
    found = set()
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        cursor.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = "
            "current_schema() AND data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', "
            "'ARRAY', 'USER-DEFINED', 'xml', 'bytea')"
        )
        columns = [row for row in cursor.fetchall() if row[0] in tables]
        assert {"moderation_content", "callbacks_providercallback", "audit_reviewtransition"} <= {c[0] for c in columns}
        for table, column, kind in columns:
            table, column = connection.ops.quote_name(table), connection.ops.quote_name(column)
            if kind == "bytea":
                cursor.execute(f"SELECT 1 FROM {table} WHERE position(convert_to(%s, 'UTF8') in {column}) > 0 LIMIT 1",
                               [marker])
            else:
                cursor.execute(f"SELECT 1 FROM {table} WHERE strpos(lower({column}::text), lower(%s)) > 0 LIMIT 1",
                               [marker])
            if cursor.fetchone():
                found.add(f"{table}.{column}".replace('"', ""))
    return found


def marked_review(api_client, scripted, *, echo: bool = False) -> tuple[ContentReview, ModerationRequest]:
    """A review rejected by the policy's rules (a term spelt with evasions, a phrase, a pattern
    over a long span), each match holding MARKER, through a provider's signed callback (`echo`:
    whose model and a category name quote the content)."""
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=TERMS)
    api_client.webhook_url = "https://hooks.example.test/moderation"
    api_client.save(update_fields=["webhook_url"])
    review, _ = services.review_submit(client=api_client, external_id="marked", kind="text", text=MARKED)
    request = services.review_claim(review_id=review.pk, worker_id="w1")  # the scripted provider's operation
    body = completed(request.idempotency_key, score=0.1, provider_id="prov-m")
    body["data"]["input"] = MARKED  # some providers echo what they judged
    if echo:  # a hostile or careless one, in names too
        body["data"]["model"] = f"echo: {MARKED[20:80]}"
        body["data"]["results"][0]["category_scores"][MARKED[30:70]] = 0.1
    assert deliver(body, event_id="evt-m-1").status_code == 200
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED, review.decision.explanation
    return review, request


def malformed(key, event_id: str):
    """A correctly signed callback naming the operation `key`, whose body quotes the content
    and is not a result (stored as invalid)."""
    body = completed(key, score=0.9, provider_id="prov-m")
    body["data"]["results"] = f"echo: {MARKED}"
    response = deliver(body, event_id=event_id)
    assert response.status_code == 400, response.content
    return ProviderCallback.objects.get(provider_event_id=event_id)


def quoting_result(key) -> dict:
    """A result for the operation `key` whose model and category names quote the content."""
    body = completed(key, score=0.9, provider_id="prov-m")
    body["data"].update(input=MARKED, model=f"echo-{MARKER}")
    body["data"]["results"] = [{"flagged": True, "categories": {MARKER: True, "hate": True},
                                "category_scores": {MARKER: 0.9, "hate": 0.9}}]
    return body


@pytest.mark.django_db
def test_explanations_transition_reasons_and_payloads_name_the_rule_term_and_span_never_the_words(api_client, scripted):
    review, _ = marked_review(api_client, scripted)

    first = MARKED.index(MARKER)
    pattern_start = MARKED.index("<<")
    explanation = review.decision.explanation
    assert f'rule harassment:reject matched term "{WATCHED}" at {first}-{first + len(MARKER)} (category harassment) (2 times)' in explanation
    assert f'matched term "zorp {WATCHED}" at {first - 5}-{first + len(MARKER)}' in explanation
    assert f'matched term "{PATTERN}" at {pattern_start}-{MARKED.index(">>") + 2}' in explanation
    reason = ReviewTransition.objects.filter(review=review).last().reason
    payloads = list(DecisionNotification.objects.filter(review=review).values_list("payload", flat=True))
    assert payloads
    for text in (explanation, reason, *payloads, json.dumps(review.decision.rule_matches)):
        assert MARKER.lower() not in text.lower(), text
    assert reason == explanation


@pytest.mark.django_db
def test_the_review_page_quotes_the_matched_words_from_the_content_only_while_it_exists(api_client, scripted, admin_client):
    review, _ = marked_review(api_client, scripted)
    page = f"/admin/moderation/contentreview/{review.pk}/timeline/"

    before = admin_client.get(page).content.decode()
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")
    after = admin_client.get(page).content.decode()

    assert f"\u201c{MARKER}\u201d (term \u201c{WATCHED}\u201d)" in before  # the quote, cut from the content
    assert MARKER.lower() not in after.lower()


@pytest.mark.django_db
def test_erasure_leaves_a_marker_in_no_column_of_any_table(api_client, scripted, django_user_model):
    """The marker sits in the content, in each rule's matched words, in a report, a moderator's
    note, an appeal and callbacks (valid, signed but malformed, and both again after the erasure):
    afterwards no text, JSON, array or bytea column of the database holds it, in any case."""
    review, request = marked_review(api_client, scripted, echo=True)
    key = request.idempotency_key
    malformed(key, "evt-m-2")
    moderator = django_user_model.objects.create_user("mod", is_staff=True)
    services.report_file(review_id=review.pk, reporter_id="reader-1", reason="harassment",
                         detail=f"they wrote {MARKER} again")
    services.review_note_add(review_id=review.pk, author=moderator, text=f"{MARKER} is a known slur here")
    services.appeal_file(review_id=review.pk, appellant_id="author-1", statement=f"I only said {MARKER} in jest")
    # The test can fail: the marker really is stored (nothing the platform writes quotes it).
    assert columns_holding(MARKER) == {"moderation_content.text", "callbacks_providercallback.payload_json",
                                       "moderation_report.detail", "moderation_moderatornote.text",
                                       "moderation_appeal.statement", "moderation_decision.model",
                                       "moderation_decision.category_scores",
                                       "moderation_decisionnotification.payload"}  # the provider's names

    assert erase_via_api(api_client, review.pk, reason="GDPR request #79").status_code == 200
    assert deliver(quoting_result(key), event_id="evt-m-3").status_code == 200
    late_malformed = malformed(key, "evt-m-4")

    assert columns_holding(MARKER) == set()
    assert violations([review.pk]) == []
    # What stays of the late result still parses, with its ids and scores; both late callbacks
    # are linked to the operation they name.
    late = ProviderCallback.objects.get(provider_event_id="evt-m-3")
    assert late.outcome == ResultOutcome.DUPLICATE and parse(late.payload_json).provider_request_id == "prov-m"
    assert late_malformed.idempotency_key == key and late_malformed.outcome == ResultOutcome.INVALID


@pytest.mark.django_db
def test_a_signed_but_malformed_callback_is_linked_to_the_operation_it_names(api_client, scripted):
    review, request = marked_review(api_client, scripted)

    stored = malformed(request.idempotency_key, "evt-m-2")
    unjson = deliver(b'{"type": "moderation.completed", "data": {"idempotency_key": "%s", "input": "cut'
                     % str(request.idempotency_key).encode(), event_id="evt-m-5")

    assert stored.idempotency_key == request.idempotency_key
    assert unjson.status_code == 400
    assert ProviderCallback.objects.get(provider_event_id="evt-m-5").idempotency_key == request.idempotency_key
    assert ProviderCallback.objects.get(provider_event_id="evt-m-2").outcome == ResultOutcome.INVALID


@pytest.mark.django_db
def test_a_callback_after_erasure_keeps_no_quote_in_its_model_category_names_or_body(api_client, scripted):
    review, request = marked_review(api_client, scripted)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    assert deliver(quoting_result(request.idempotency_key), event_id="evt-m-3").status_code == 200

    stored = ProviderCallback.objects.get(provider_event_id="evt-m-3")
    assert MARKER.lower() not in stored.payload_json.lower(), stored.payload_json
    event = parse(stored.payload_json)
    assert event.idempotency_key == request.idempotency_key and event.result.category_scores["hate"] == 0.9


def appealed(api_client, scripted) -> tuple[ContentReview, Appeal]:
    review, _ = marked_review(api_client, scripted)
    appeal = services.appeal_file(review_id=review.pk, appellant_id="author-1", statement="it was a joke")
    assert Appeal.objects.get(pk=appeal.pk).status == "open"
    return review, appeal


@pytest.mark.django_db
def test_erasure_takes_the_matched_words_that_explanations_quoted_before_issue_22(api_client):
    review = decided(api_client, "rejected")
    words = "zq1d10tzq"  # shorter than a quote run, inside a longer text: found only as quoted
    Content.objects.filter(pk=review.content_id).update(text=f"well, you are a {words} and everyone knows it")
    legacy = f'policy v1: rule insult:reject matched "{words}" (category insult, term "idiot")'
    match = {"rule": "insult:reject", "category": "insult", "action": "reject", "language": "", "term": "idiot",
             "matched": words, "start": 16, "end": 16 + len(words)}
    Decision.objects.filter(pk=review.decision_id).update(explanation=legacy, rule_matches=[match])
    notification = DecisionNotification.objects.get(decision_id=review.decision_id)
    DecisionNotification.objects.filter(pk=notification.pk).update(
        payload=notification.payload.replace('"explanation": "', '"explanation": ' + json.dumps(legacy)[:-1], 1))
    assert where_found([words])

    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna", reason="GDPR request #82")

    assert where_found([words]) == set()
    # The explanation goes whole (it is free text); what the rule matched stays, without the words.
    decision = Decision.objects.get(pk=review.decision_id)
    assert decision.explanation == ERASED
    assert decision.rule_matches == [{k: v for k, v in match.items() if k != "matched"}]


@pytest.mark.django_db
def test_erasing_again_closes_an_appeal_an_older_erasure_left_open(api_client, scripted, monkeypatch):
    review, appeal = appealed(api_client, scripted)
    # Erasure before issue 22 left the appeal open, in a queue no moderator is offered.
    with monkeypatch.context() as m:
        m.setattr("moderation.privacy.erasure._close_appeal_locked", lambda review, **kw: False)
        content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna", reason="GDPR request #81")
    assert any("no queue offers it (its content was erased: erase_content again closes it)" in v
               for v in violations([review.pk]))

    out = StringIO()
    call_command("erase_content", str(review.pk), "--reason", "repair", stdout=out)  # a dry run
    assert "its open appeal would be closed" in out.getvalue()
    assert Appeal.objects.get(pk=appeal.pk).status == "open"
    out = StringIO()
    call_command("erase_content", str(review.pk), "--reason", "repair", "--for-real", stdout=out)

    assert "already erased at" in out.getvalue() and "its open appeal closed, the rejection stands" in out.getvalue()
    appeal.refresh_from_db()
    review.refresh_from_db()
    assert (appeal.status, review.status) == ("upheld", ReviewStatus.REJECTED)
    assert ContentErasure.objects.get(review=review).reason == "GDPR request #81"  # the first erasure stands
    assert violations([review.pk]) == []


@pytest.mark.django_db
def test_erasing_content_under_appeal_closes_the_appeal_with_a_reason_and_tells_the_client(api_client, scripted):
    review, appeal = appealed(api_client, scripted)
    appealed_decision = review.decision
    moderator = get_user_model().objects.create_user("mia", is_staff=True)
    assert services.review_take_next(moderator=moderator).pk == review.pk  # a moderator holds its lease

    # One transaction: a dry run, rolled back, leaves the appeal open; the erasure closes it.
    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna", reason="x", for_real=False)
    assert Appeal.objects.get(pk=appeal.pk).status == "open"
    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna", reason="GDPR request #80")

    appeal.refresh_from_db()
    review.refresh_from_db()
    closing = review.decision
    assert (appeal.status, appeal.resolution_id, review.status) == ("upheld", closing.pk, ReviewStatus.REJECTED)
    assert closing.source == DecisionSource.SYSTEM and closing.pk != appealed_decision.pk
    # In the platform's words, written after the redaction that replaces every other reason whole.
    assert closing.reason.startswith(f"content erased while appeal {appeal.pk} was open")
    last = ReviewTransition.objects.filter(review=review).last()
    assert (last.from_status, last.to_status, last.cause, last.actor_id) == (
        ReviewStatus.MANUAL_REVIEW, ReviewStatus.REJECTED, Cause.CONTENT_ERASED, "ops-anna")
    told = DecisionNotification.objects.get(decision=closing)
    body = json.loads(told.payload)
    assert told.kind == NotificationKind.APPEAL_RESOLVED
    assert body["data"]["appeal_id"] == str(appeal.pk) and body["data"]["outcome"] == "upheld"
    assert body["data"]["decision"]["explanation"] == erasure.ERASED_UNDER_APPEAL
    assert review.queue == "" and Appeal.objects.filter(review=review, status="open").count() == 0
    assert (review.leased_to, review.lease_expires_at) == (None, None)
    assert violations([review.pk]) == []


@pytest.mark.django_db
def test_the_checker_flags_an_open_appeal_that_no_queue_offers(api_client, scripted, monkeypatch):
    review, appeal = appealed(api_client, scripted)
    # Erasure as it was: the review left its queue, its appeal stayed open.
    monkeypatch.setattr(erasure, "_close_appeal_locked", lambda review, **kwargs: False, raising=False)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    assert any(f"appeal {appeal.pk}" in problem and "no queue" in problem for problem in violations([review.pk])), \
        violations([review.pk])


@pytest.mark.django_db
def test_the_tombstone_keeps_why_without_a_quote_of_what_was_erased(api_client, django_user_model):
    review = decided(api_client, ReviewStatus.REJECTED)
    moderator = django_user_model.objects.create_user("mod", is_staff=True)
    said = "doxxing: the phone number +48 601 234 567"
    services.review_override(review_id=review.pk, label="rejected", category="harassment", reason=said,
                             moderator=moderator)

    report = content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna",
                           reason=f"ticket 7: {said} must go")

    assert report.reason == f"ticket 7: {ERASED} must go"
    assert ContentErasure.objects.get(review=review).reason == report.reason
    assert where_found([said]) == set()


@pytest.mark.django_db
def test_an_escalations_reason_goes_from_the_decision_the_log_and_the_operation_it_closed(api_client, django_user_model):
    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    services.review_claim(review_id=review.pk, worker_id="w1")
    moderator = django_user_model.objects.create_user("mod", is_staff=True)
    services.review_escalate(review_id=review.pk, reason="Wrzeszczyk again, see his other posts", moderator=moderator)
    assert {"moderation_moderationrequest.last_error", "moderation_decision.reason",
            "audit_reviewtransition.reason"} <= where_found(["Wrzeszczyk"])

    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops-anna", reason="GDPR request #83")

    assert where_found(["Wrzeszczyk"]) == set()


@pytest.mark.django_db
def test_an_auditor_sees_erasure_tombstones(api_client, django_user_model):
    from django.contrib.auth.models import Group
    from django.test import Client

    review, _ = services.review_submit(client=api_client, external_id="p", kind="text", text=TEXT)
    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="GDPR request #81")
    tombstone = ContentErasure.objects.get(review=review)
    auditor = django_user_model.objects.create_user("ada", is_staff=True)
    auditor.groups.add(Group.objects.get(name="auditor"))
    browser = Client()
    browser.force_login(auditor)

    listing = browser.get("/admin/moderation/contenterasure/")
    detail = browser.get(f"/admin/moderation/contenterasure/{tombstone.pk}/change/")

    assert listing.status_code == 200 and str(review.pk) in listing.content.decode()
    assert detail.status_code == 200 and "GDPR request #81" in detail.content.decode()
    assert browser.post(f"/admin/moderation/contenterasure/{tombstone.pk}/delete/").status_code == 403


QUOTED = 16  # the promise: a quote this long, from anywhere in the content, is found (quotes.QUOTE_MIN)


@given(content=st.text(min_size=QUOTED), cut=st.tuples(st.integers(0), st.integers(0)),
       before=st.text(max_size=40), after=st.text(max_size=40), escaped=st.booleans())
@hypothesis_settings(max_examples=examples(300), deadline=None)
def test_a_quote_of_the_content_from_anywhere_in_it_is_scrubbed_from_any_text(content, cut, before, after, escaped):
    """Any run of at least QUOTED characters of the content, cut anywhere, in any Unicode, as
    written or JSON-escaped, is gone from a text quoting it."""
    start = cut[0] % (len(content) - QUOTED + 1)
    end = start + QUOTED + cut[1] % (len(content) - start - QUOTED + 1)
    quote = content[start:end]
    if escaped:
        quote = json.dumps(quote)[1:-1]
    assume(quote not in f"{before}{after}")  # what was not quoted (Hypothesis may write it anyway)
    found = quotes.content_quotes(SimpleNamespace(text=content, media_url="", metadata={}))

    scrubbed = quotes.scrub(f"{before}{quote}{after}", found)

    assert quote not in scrubbed
    assert quotes.QUOTE_MIN <= QUOTED


@pytest.mark.django_db
def test_erased_content_cannot_be_appealed_and_its_reports_keep_no_detail_and_reach_no_human(api_client, scripted):
    """Found by the stateful test: an appeal of erased content would wait in the appeals queue
    for ever, and reports reaching the threshold would send it to the reports queue."""
    rejected, _ = marked_review(api_client, scripted)
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, report_threshold=1)
    approved = decided(api_client, ReviewStatus.APPROVED)
    for review in (rejected, approved):
        content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    with pytest.raises(NotAppealable, match="erased"):
        services.appeal_file(review_id=rejected.pk, appellant_id="author-1", statement=f"but {MARKER} is fine")
    filed = services.report_file(review_id=approved.pk, reporter_id="reader-1", reason="harassment",
                                 detail=f"it said {MARKER}")

    approved.refresh_from_db()
    assert (approved.status, approved.queue, filed.report_count) == (ReviewStatus.APPROVED, "", 1)
    assert filed.report.detail == "[erased]" and columns_holding(MARKER) == set()
    assert violations([rejected.pk, approved.pk]) == []


# --- images: the bytes go, and what was read of them; the PDQ hash stays ----------------------

def marked_image() -> bytes:
    """A PNG whose bytes hold MARKER (a text chunk), so that a search of every bytea column
    finds them; the pixels are a picture with a full-quality hash."""
    info = PngInfo()
    info.add_text("Comment", f"taken by {MARKER}")
    return encoded(picture(11), "PNG", pnginfo=info)


def image_review(api_client, data: bytes) -> ContentReview:
    review, _ = services.review_submit(client=api_client, external_id="img", kind="image",
                                       image=(data, image_header(data)))
    tasks.moderate_review(review.pk)  # no provider here judges images: image_fallback decides
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW, review.decision.explanation
    return review


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_erasing_an_image_removes_its_bytes_and_what_was_read_of_them_and_keeps_its_hash(api_client, scripted):
    review = image_review(api_client, marked_image())
    before = ReviewMedia.objects.get(pk=review.content_id)
    assert columns_holding(MARKER) == {"moderation_reviewmedia.data"}  # the test can fail
    assert before.pdq_quality >= 50 and before.sha256 and before.width == 320 and before.thumbnail

    report = content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="GDPR request #80")

    assert columns_holding(MARKER) == set()
    media = ReviewMedia.objects.get(pk=review.content_id)
    assert (media.data, media.sha256, media.mime, media.byte_size, media.width, media.height) == (None, "", "", 0, None, None)
    assert media.thumbnail is None  # a small copy of the image is a copy of the image
    assert (media.pdq, media.pdq_quality) == (before.pdq, before.pdq_quality)  # hashes stay
    assert media.removed_why == MediaRemoval.ERASURE and media.removed_at == report.erased_at
    assert report.redacted["moderation.ReviewMedia.data"] == 1
    assert violations([review.pk]) == []


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_erasure_takes_a_media_urls_quotes_from_the_error_the_job_kept(api_client, scripted, monkeypatch):
    url = f"https://cdn-{MARKER.lower()}.example/picture.png"

    def nowhere(host, *args, **kwargs):  # (no test resolves a name for real)
        raise socket.gaierror(socket.EAI_NONAME, f"{host}: no such name")

    monkeypatch.setattr(netguard.socket, "getaddrinfo", nowhere)
    review, _ = services.review_submit(client=api_client, external_id="by-url", kind="image", media_url=url)
    tasks.moderate_review(review.pk)
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW and "could not be read" in review.decision.explanation
    assert {"moderation_content.media_url", "moderation_moderationrequest.media"} <= columns_holding(MARKER)

    content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")

    assert columns_holding(MARKER) == set()


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_bytes_fetched_while_the_content_was_erased_are_never_stored(api_client, scripted, monkeypatch):
    """The fetch of a media_url takes seconds, with no lock held: an erasure that commits meanwhile
    finds nothing to remove, so the job must not store the bytes after it."""
    review, _ = services.review_submit(client=api_client, external_id="by-url", kind="image",
                                       media_url="https://cdn.example.test/picture.png")

    def fetch_while_erased(url):
        content_erase(review_id=review.pk, actor=Actor.API, actor_id="acme", reason="withdrawn")
        return marked_image(), "image/png"

    monkeypatch.setattr(media_services, "media_fetch", fetch_while_erased)
    tasks.moderate_review(review.pk)

    assert not ReviewMedia.objects.filter(pk=review.content_id).exists()
    assert columns_holding(MARKER) == set()
    request = ModerationRequest.objects.get(review=review)
    assert request.media["error"] == "the content was erased" and request.attempts.count() == 1


def test_every_column_of_an_images_row_is_redacted_or_kept_on_purpose():
    """A column added to ReviewMedia must be decided on: listed in REDACTED, or here as kept."""
    kept = {"content", "source", "pdq", "pdq_quality", "hashed_at", "never_display", "created_at", "fetched_at",
            "removed_at", "removed_why"}
    redacted = {entry.field for entry in erasure.REDACTED if entry.model == "moderation.ReviewMedia"}
    columns = {field.name for field in ReviewMedia._meta.concrete_fields}
    assert redacted == {"data", "thumbnail", "sha256", "mime", "byte_size", "width", "height", "error"}
    assert columns == kept | redacted and not kept & redacted
