"""Statements of reasons for the DSA Transparency Database, written with each restriction
(docs/transparency.md): one per restricting rejection and per suspension or ban, in the decision's
transaction, checked against the real database's rules (tests/fixtures/dsa_tdb_rules.json)."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from lab.transparency_rules import default_rules, validate_statement
from moderation import services
from moderation.errors import NotRequeueable
from moderation.models import (
    Decision,
    StatementStatus,
    TransparencyStatement,
    default_dsa_mapping,
    vocabulary,
)
from moderation.services.statements import statement_requeue
from moderation.transparency.statements import statement_body, validate_dsa_mapping
from tests.helpers import examples, SCORE_FOR, claimed, decided, result
from tests.moderation.test_authors import author, authored
from tests.moderation.test_reports_and_appeals import report

pytestmark = pytest.mark.django_db

RULES_FIXTURE = "tests/fixtures/dsa_tdb_rules.json"


@pytest.fixture
def moderators(db):
    users = get_user_model().objects
    return (users.create_user("mod-a", is_staff=True), users.create_user("mod-b", is_staff=True))


def statement_of(decision: Decision) -> TransparencyStatement:
    return TransparencyStatement.objects.get(decision=decision)


def assert_valid(statement: TransparencyStatement) -> dict:
    assert validate_statement(statement.body) == {}, statement.body
    assert statement.body["puid"] == statement.puid
    return statement.body


def test_the_vocabulary_is_the_databases_own_at_the_fixtures_commit():
    with open(RULES_FIXTURE, encoding="utf-8") as f:
        fixture = json.load(f)
    ours = vocabulary()
    assert ours["source"]["commit"] == fixture["source"]["commit"]
    for name, values in ours.items():
        if name not in ("_readme", "source"):
            assert values == fixture["enumerations"][name], name


def test_a_providers_rejection_is_fully_automated_and_of_its_own_initiative(api_client):
    review = decided(api_client, "rejected")

    body = assert_valid(statement_of(review.decision))

    assert body["puid"] == str(review.decision_id)
    assert (body["source_type"], body["automated_detection"], body["automated_decision"]) == (
        "SOURCE_VOLUNTARY", "Yes", "AUTOMATED_DECISION_FULLY")
    assert body["decision_visibility"] == ["DECISION_VISIBILITY_CONTENT_REMOVED"]
    assert body["category"] == "STATEMENT_CATEGORY_CYBER_VIOLENCE"  # harassment, by the default mapping
    assert body["content_type"] == ["CONTENT_TYPE_TEXT"]
    assert body["content_date"] == review.content.created_at.date().isoformat()


def test_a_rules_rejection_is_fully_automated(api_client):
    services.policy_publish_change(lambda p: {"term_lists": [
        {"category": "hate", "action": "reject", "language": "", "terms": ["zonkers"]}]})
    review, request = claimed(api_client)
    review.content.text = "you zonkers"
    review.content.save(update_fields=["text"])
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.01), cause="provider_result")
    review.refresh_from_db()
    assert review.status == "rejected"

    body = assert_valid(statement_of(review.decision))

    assert body["category"] == "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"
    assert body["category_specification"] == ["KEYWORD_HATE_SPEECH"]
    assert body["automated_decision"] == "AUTOMATED_DECISION_FULLY"
    assert "zonkers" not in json.dumps(body)


def test_a_moderators_rejection_on_a_model_flag_is_partially_automated(api_client, moderators):
    review = decided(api_client, "manual_review")

    decision = services.review_override(review_id=review.pk, label="rejected", reason="my own words here",
                                        moderator=moderators[0], category="hate")

    body = assert_valid(statement_of(decision))
    assert (body["automated_detection"], body["automated_decision"]) == ("Yes", "AUTOMATED_DECISION_PARTIALLY")
    assert body["category"] == "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"
    assert "my own words" not in json.dumps(body) and "mod-a" not in json.dumps(body)


@pytest.mark.parametrize(("kind", "source"), [("dsa_notice", "SOURCE_ARTICLE_16"),
                                              ("trusted_flagger", "SOURCE_TRUSTED_FLAGGER"),
                                              ("user", "SOURCE_ARTICLE_16")])
def test_a_rejection_on_a_notice_names_its_source_and_is_not_automated(http, api_client, moderators, kind, source):
    review = decided(api_client, "approved")
    for number in range(1 if kind != "user" else 3):  # three users reach the report threshold
        assert report(http, review, reporter=f"r{number}", kind=kind).status_code == 201
    review.refresh_from_db()
    assert review.status == "manual_review"

    decision = services.review_override(review_id=review.pk, label="rejected", reason="upheld the notice",
                                        moderator=moderators[0], category="harassment")

    body = assert_valid(statement_of(decision))
    assert (body["source_type"], body["automated_detection"], body["automated_decision"]) == (
        source, "No", "AUTOMATED_DECISION_NOT_AUTOMATED")
    for reporter in ("r0", "reporter"):
        assert reporter not in json.dumps(body)


@pytest.mark.parametrize("action", ["suspend", "ban"])
def test_a_moderators_suspension_or_ban_has_a_statement(api_client, moderators, action):
    authored(api_client, "person-1", "approved")
    taken = services.author_act(author_pk=author(api_client, "person-1").pk, moderator=moderators[0], action=action,
                                days=7 if action == "suspend" else None, reason="a private reason")

    statement = TransparencyStatement.objects.get(account_action=taken)
    body = assert_valid(statement)
    assert body["puid"] == str(taken.pk)
    expected = {"suspend": "DECISION_ACCOUNT_SUSPENDED", "ban": "DECISION_ACCOUNT_TERMINATED"}[action]
    assert body["decision_account"] == expected and "decision_visibility" not in body
    assert (body.get("end_date_account_restriction") is not None) == (action == "suspend")
    assert (body["automated_detection"], body["automated_decision"]) == ("No", "AUTOMATED_DECISION_NOT_AUTOMATED")
    assert "person-1" not in json.dumps(body) and "private reason" not in json.dumps(body)


def test_the_ladders_suspension_and_ban_are_fully_automated_and_count_their_strikes(api_client):
    for _ in range(8):  # 5 points suspend, 8 ban (the default ladder)
        authored(api_client, "person-2", "rejected")

    statements = TransparencyStatement.objects.filter(account_action__isnull=False).order_by("id")
    assert [s.body["decision_account"] for s in statements] == ["DECISION_ACCOUNT_SUSPENDED",
                                                                "DECISION_ACCOUNT_TERMINATED"]
    for statement in statements:
        body = assert_valid(statement)
        assert body["automated_decision"] == "AUTOMATED_DECISION_FULLY" and body["automated_detection"] == "Yes"
        assert "Cyber violence" in body["decision_facts"]
    # A warning restricts nothing: no statement; each rejection has its own.
    assert TransparencyStatement.objects.filter(decision__isnull=False).count() == 8


def test_an_approval_and_a_hand_off_write_no_statement(api_client):
    decided(api_client, "approved")
    decided(api_client, "manual_review")
    assert not TransparencyStatement.objects.exists()


def test_an_upheld_appeal_keeps_the_first_statement_and_an_overturn_records_the_correction(http, api_client,
                                                                                           moderators):
    review = decided(api_client, "rejected")
    first = statement_of(review.decision)
    assert http.post(f"/api/v1/reviews/{review.pk}/appeals/", {"appellant_id": "a", "statement": "no"},
                     format="json").status_code == 201

    services.review_override(review_id=review.pk, label="rejected", reason="stands", moderator=moderators[0],
                             category="harassment")
    assert TransparencyStatement.objects.count() == 1  # the restriction never lifted

    overturn = services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=moderators[1])
    first.refresh_from_db()
    assert (first.overturned_by_id, first.overturned_at) == (overturn.pk, overturn.created_at)
    assert TransparencyStatement.objects.count() == 1


def test_an_overturned_account_action_records_the_correction(api_client, moderators):
    authored(api_client, "person-3", "approved")
    ban = services.author_act(author_pk=author(api_client, "person-3").pk, moderator=moderators[0], action="ban",
                              reason="r")
    appeal = services.account_appeal_file(client=api_client, author_id="person-3", statement="please")
    services.account_appeal_resolve(appeal_id=appeal.pk, moderator=moderators[1], outcome="overturned", reason="ok")

    assert TransparencyStatement.objects.get(account_action=ban).overturned_at is not None


def test_a_statement_rolls_back_with_its_decision(api_client, monkeypatch):
    review, request = claimed(api_client)

    from moderation.services import decide

    written = decide.statement_after_decision_locked

    def write_then_fail(*args, **kwargs):  # the statement is written, then the transaction fails
        statement = written(*args, **kwargs)
        kwargs["writes"].execute()  # (the decision's statement after it, which decide_locked runs)
        assert TransparencyStatement.objects.filter(pk=statement.pk).exists()
        raise RuntimeError("after the statement")

    monkeypatch.setattr(decide, "statement_after_decision_locked", write_then_fail)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["rejected"]),
                                     cause="provider_result")
    assert not Decision.objects.filter(review=review).exists() and not TransparencyStatement.objects.exists()


def test_one_decision_has_at_most_one_statement(api_client):
    review = decided(api_client, "rejected")
    with pytest.raises(IntegrityError), transaction.atomic():
        TransparencyStatement.objects.create(decision=review.decision, review=review, facts={}, body={},
                                             policy=review.decision.policy, dsa_category="x", automated_decision="x",
                                             source_type="x")


def test_publishing_refuses_unknown_dsa_values():
    mapping = default_dsa_mapping()
    mapping["categories"]["hate"]["category"] = "STATEMENT_CATEGORY_PORNOGRAPHY"  # gone since 1 July 2025
    mapping["categories"]["hate"]["keywords"] = ["KEYWORD_NOT_A_KEYWORD"]
    mapping["accounts"]["ban"] = "DECISION_ACCOUNT_BANNED"
    mapping["territorial_scope"] = ["DE", "US"]

    with pytest.raises(ValidationError) as refused:
        services.policy_publish_change(lambda p: {"dsa_mapping": mapping})

    text = " ".join(refused.value.messages)
    for expected in ("STATEMENT_CATEGORY_PORNOGRAPHY", "keywords", "accounts", "territorial_scope"):
        assert expected in text
    assert validate_dsa_mapping(default_dsa_mapping()) == []


def test_a_mapping_of_the_wrong_shapes_is_refused_not_raised():
    mapping = default_dsa_mapping()
    mapping["categories"]["hate"] |= {"category": {"a": 1}, "keywords": [{"b": 2}], "ground": ["x"],
                                      "visibility": {}}
    mapping["accounts"]["ban"], mapping["territorial_scope"] = [], [["DE"]]

    errors = " ".join(validate_dsa_mapping(mapping))

    for expected in ("category {'a': 1}", "keywords", "ground ['x']", "visibility {}", "accounts", "territorial_scope"):
        assert expected in errors


def test_a_refused_statement_is_rebuilt_with_the_fixed_mapping_when_requeued(api_client, moderators):
    review = decided(api_client, "rejected")
    statement = statement_of(review.decision)
    with pytest.raises(NotRequeueable):
        statement_requeue(statement_id=statement.pk, by=moderators[0])
    TransparencyStatement.objects.filter(pk=statement.pk).update(
        status=StatementStatus.REJECTED, errors={"statement_0": {"category": ["The selected category is invalid."]}})
    services.policy_publish_change(lambda p: {"dsa_mapping": {**p.dsa_mapping, "categories": {
        **p.dsa_mapping["categories"], "harassment": {**p.dsa_mapping["categories"]["harassment"],
                                                      "category": "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN"}}}})

    requeued = statement_requeue(statement_id=statement.pk, by=moderators[0])

    assert requeued.status == StatementStatus.PENDING and requeued.errors == {}
    assert requeued.body["category"] == "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN"
    assert requeued.body["puid"] == statement.puid and requeued.facts == statement.facts
    assert_valid(requeued)


_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=600)


@hypothesis_settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ground=_text, explanation=_text, language=st.sampled_from(["", "en", "id", "xx", "zh"]),
       kind=st.sampled_from(["text", "image", "audio", "metadata"]))
def test_any_mapping_the_validator_accepts_builds_statements_the_database_accepts(ground, explanation, language, kind):
    mapping = default_dsa_mapping()
    mapping["default"] |= {"ground_text": ground, "explanation": explanation}
    facts = {"kind": "decision", "category": "", "content_type": kind, "content_date": "2026-11-30",
             "application_date": "2026-12-01", "language": language, "source": "voluntary", "detection": True,
             "automation": "fully"}
    if validate_dsa_mapping(mapping):
        return
    body = statement_body(puid=str(uuid.uuid4()), facts=facts, mapping=mapping)
    assert validate_statement(body, default_rules()) == {}


def _reprocessed_to_a_human(review):
    services.review_reprocess(review_id=review.pk, actor="admin", actor_id="x", reason="again")
    request = services.review_claim(review_id=review.pk, worker_id="w2")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["manual_review"]),
                             cause="provider_result")


def test_a_restriction_stays_in_force_through_a_hand_off_to_a_human_until_an_approval_lifts_it(api_client,
                                                                                               moderators):
    rejected_again, lifted = decided(api_client, "rejected"), decided(api_client, "rejected")
    for review in (rejected_again, lifted):
        _reprocessed_to_a_human(review)

    services.review_override(review_id=rejected_again.pk, label="rejected", reason="still", moderator=moderators[0],
                             category="harassment")
    approval = services.review_override(review_id=lifted.pk, label="approved", reason="fine", moderator=moderators[0])

    assert TransparencyStatement.objects.filter(review=rejected_again).count() == 1  # the first one stands
    corrected = TransparencyStatement.objects.get(review=lifted)
    assert corrected.overturned_by_id == approval.pk
    from moderation.invariants import violations

    assert violations([rejected_again.pk, lifted.pk]) == []


def test_a_restricted_authors_content_rejected_by_the_policy_was_not_detected_by_automated_means(api_client,
                                                                                                  moderators):
    services.policy_publish_change(lambda p: {"while_restricted": "reject"})
    authored(api_client, "person-4", "approved")
    services.author_act(author_pk=author(api_client, "person-4").pk, moderator=moderators[0], action="suspend",
                        days=7, reason="spam wave")

    review = authored(api_client, "person-4", "approved")  # the model approves; the policy rejects

    body = assert_valid(statement_of(review.decision))
    assert (body["automated_detection"], body["automated_decision"]) == ("No", "AUTOMATED_DECISION_FULLY")
    assert "suspended or terminated" in body["decision_facts"]
    assert body["category"] == "STATEMENT_CATEGORY_OTHER_VIOLATION_TC"


def test_a_moderators_rejection_of_content_the_model_approved_is_not_automated(http, api_client, moderators):
    review, request = claimed(api_client)
    assert report(http, review, reporter="hotline", kind="dsa_notice").status_code == 201  # while processing
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["approved"]),
                             cause="provider_result")  # to a human, whatever the model said
    decision = services.review_override(review_id=review.pk, label="rejected", reason="illegal", moderator=moderators[0],
                                        category="hate")

    body = assert_valid(statement_of(decision))
    assert (body["source_type"], body["automated_detection"], body["automated_decision"]) == (
        "SOURCE_ARTICLE_16", "No", "AUTOMATED_DECISION_NOT_AUTOMATED")


def test_a_suspension_past_the_databases_last_date_is_stated_to_that_date(api_client, moderators):
    authored(api_client, "person-5", "approved")
    taken = services.author_act(author_pk=author(api_client, "person-5").pk, moderator=moderators[0],
                                action="suspend", days=3650, reason="r")
    statement = TransparencyStatement.objects.get(account_action=taken)
    statement.facts["until"] = "2040-06-01"
    body = statement_body(puid=statement.puid, facts=statement.facts, mapping=default_dsa_mapping())

    assert body["end_date_account_restriction"] == "2038-01-01"
    assert validate_statement(body) == {}
