"""Canned reasons (docs/workplace.md, "Canned reasons"): the policy's field and its validation,
the decision's reason rules, and the client's statement built from the canned texts in the
content's language, with the moderator's own words only when they ticked "send to the user"."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.utils.html import escape
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from lab.transparency_rules import default_rules, validate_statement
from moderation import services
from moderation.transparency.canned_reasons import canned_texts, validate_canned_reasons
from moderation.errors import ReasonRequired, UnknownReason
from moderation.invariants import statement_violations
from moderation.observability.timeline import review_timeline
from moderation.models import (
    APPROVAL_KEY,
    DEFAULT_CATEGORIES,
    Content,
    DecisionNotification,
    TransparencyStatement,
    default_canned_reasons,
)
from moderation.transparency.reasons import statement_of_reasons
from moderation.validation import validate_policy
from tests.helpers import examples, decided

SLUR_EN = "The content uses a slur against a protected group."
SLUR_ID = "Konten ini memakai sebutan merendahkan terhadap kelompok yang dilindungi."


@pytest.fixture
def mia(db, django_user_model):
    return django_user_model.objects.create_user("mia")


def in_language(review, language: str):
    Content.objects.filter(pk=review.content_id).update(language=language)
    return review


class TestTheDefaults:
    def test_every_default_category_and_approvals_have_reasons_in_english_and_indonesian(self):
        defaults = default_canned_reasons()
        assert set(defaults) == {*DEFAULT_CATEGORIES, APPROVAL_KEY}
        for key, listed in defaults.items():
            assert listed, key
            for entry in listed:
                assert set(entry["texts"]) == {"en", "id"} and all(t.strip() for t in entry["texts"].values())
        assert validate_canned_reasons(defaults) == []

    @pytest.mark.django_db
    def test_the_published_default_policy_carries_them_and_asks_no_reason_of_an_approval(self):
        policy = services.policy_active()
        assert policy.canned_reasons == default_canned_reasons() and policy.approval_needs_reason is False


class TestValidation:
    @pytest.mark.parametrize(("canned", "error"), [
        ([], "must be an object"),
        ({"Hate!": []}, "not a category name"),
        ({"hate": {"code": "slur"}}, "a list of at most 50"),
        ({"hate": [{"code": "slur"}]}, 'exactly "code" and "texts"'),
        ({"hate": [{"code": "Slur", "texts": {"en": "x"}}]}, "the code is lowercase"),
        ({"hate": [{"code": "slur", "texts": {"id": "x"}}]}, 'an English ("en") text'),
        ({"hate": [{"code": "slur", "texts": {"en": "  "}}]}, "the en text is required"),
        ({"hate": [{"code": "slur", "texts": {"en": "x" * 501}}]}, "at most 500"),
        ({"hate": [{"code": "slur", "texts": {"en": "x", "klingon": "y"}}]}, "not a language the detector knows"),
        ({"hate": [{"code": "slur", "texts": {"en": "x"}}, {"code": "slur", "texts": {"en": "y"}}]}, "listed twice"),
        ({"hate": [{"code": "slur", "texts": {"en": 7}}]}, "the en text is required"),
        ({"hate": [{"code": "slur", "texts": {"en": "a\x00b"}}]}, "with no NUL character"),
    ])
    def test_a_malformed_entry_is_refused_with_a_message_that_says_where(self, canned, error):
        errors = validate_canned_reasons(canned)
        assert any(error in e for e in errors), errors

    def test_the_same_code_under_two_categories_is_allowed_and_a_category_the_policy_lacks_offers_nothing(self):
        canned = {"spam": [{"code": "scam", "texts": {"en": "A scam."}}],
                  "fraud": [{"code": "scam", "texts": {"en": "Fraud."}}]}
        assert validate_canned_reasons(canned) == []

    def test_the_policy_validator_reports_them_with_the_policys_other_errors(self):
        errors = validate_policy({"review_threshold": 0.9, "reject_threshold": 0.5, "canned_reasons": {"hate": 3},
                                  "approval_needs_reason": "yes"})
        assert "thresholds must satisfy 0 <= review <= reject <= 1" in errors
        assert any("canned_reasons 'hate'" in e for e in errors)
        assert "approval_needs_reason must be true or false" in errors

    @pytest.mark.django_db
    def test_publishing_refuses_a_bad_version_and_publishes_a_good_one(self):
        with pytest.raises(ValidationError, match="listed twice"):
            services.policy_publish_change(lambda active: {"canned_reasons": {"spam": [
                {"code": "ad", "texts": {"en": "An ad."}}, {"code": "ad", "texts": {"en": "Again."}}]}})
        published = services.policy_publish_change(lambda active: {
            "canned_reasons": {"spam": [{"code": "ad", "texts": {"en": "An ad.", "id": "Iklan."}}]},
            "approval_needs_reason": True})
        assert published.canned_reasons["spam"][0]["texts"]["id"] == "Iklan." and published.approval_needs_reason


@pytest.mark.django_db
class TestTheDecisionsReason:
    def test_a_rejection_with_only_a_canned_reason_records_its_code_and_no_text(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate",
                                            reason_codes=["slur", "dehumanising", "slur"], moderator=mia)
        assert (decision.reason_codes, decision.reason, decision.reason_shared) == (["slur", "dehumanising"], "", False)
        assert review.transitions.last().reason == "slur; dehumanising"

    def test_a_rejection_needs_a_canned_reason_or_free_text(self, api_client, mia):
        review = decided(api_client, "manual_review")
        with pytest.raises(ReasonRequired, match="needs a canned reason or a reason in your words"):
            services.review_override(review_id=review.pk, label="rejected", category="hate", reason=" ", moderator=mia)
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate",
                                            reason="slur in the second line", moderator=mia)
        assert decision.reason_codes == [] and decision.reason == "slur in the second line"

    def test_a_reason_of_another_category_or_one_the_policy_lacks_is_refused_and_changes_nothing(self, api_client, mia):
        review = decided(api_client, "manual_review")
        for codes in (["commercial"], ["no-such-reason"]):  # commercial is spam's
            with pytest.raises(UnknownReason, match="not a canned reason of the category hate"):
                services.review_override(review_id=review.pk, label="rejected", category="hate", reason_codes=codes,
                                         moderator=mia)
        with pytest.raises(UnknownReason, match="not a canned reason of an approval"):
            services.review_override(review_id=review.pk, label="approved", reason_codes=["slur"], moderator=mia)
        review.refresh_from_db()
        assert review.status == "manual_review" and review.decisions.count() == 1

    def test_an_approval_needs_no_reason_unless_the_policy_asks_for_one(self, api_client, mia):
        first, second = decided(api_client, "manual_review"), decided(api_client, "manual_review")
        assert services.review_override(review_id=first.pk, label="approved", moderator=mia).reason == ""
        services.policy_publish_change(lambda active: {"approval_needs_reason": True})
        with pytest.raises(ReasonRequired, match="the policy asks for one"):
            services.review_override(review_id=second.pk, label="approved", moderator=mia)
        decision = services.review_override(review_id=second.pk, label="approved", reason_codes=["context"],
                                            moderator=mia)
        assert decision.reason_codes == ["context"]


@pytest.mark.django_db
class TestTheClientsStatement:
    @pytest.mark.parametrize(("language", "text"), [("en", SLUR_EN), ("id", SLUR_ID), ("ms", SLUR_EN), ("", SLUR_EN)])
    def test_it_says_the_canned_text_in_the_contents_language_else_in_english(self, api_client, mia, language, text):
        review = in_language(decided(api_client, "manual_review"), language)
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate",
                                            reason_codes=["slur"], moderator=mia)
        stated = statement_of_reasons(decision)
        assert stated["explanation"] == f"A moderator reviewed this content: {text}"
        assert stated["reasons"] == [{"category": "hate", "score": None}]

    def test_free_text_reaches_the_client_only_when_ticked(self, api_client, http, mia):
        kept, sent = decided(api_client, "manual_review"), in_language(decided(api_client, "manual_review"), "id")
        services.review_override(review_id=kept.pk, label="rejected", category="hate", reason_codes=["slur"],
                                 reason="lol what a clown", moderator=mia)
        services.review_override(review_id=sent.pk, label="rejected", category="hate", reason_codes=["slur"],
                                 reason="Lihat baris kedua.", share_reason=True, moderator=mia)
        for review, explanation in ((kept, f"A moderator reviewed this content: {SLUR_EN}"),
                                    (sent, f"A moderator reviewed this content: {SLUR_ID} Lihat baris kedua.")):
            api = http.get(f"/api/v1/reviews/{review.pk}/").json()["decision"]
            payload = json.loads(DecisionNotification.objects.filter(review=review).latest("id").payload)
            assert api["explanation"] == payload["data"]["decision"]["explanation"] == explanation
        assert "clown" not in http.get(f"/api/v1/reviews/{kept.pk}/timeline/").content.decode()
        internal = [e for e in review_timeline(kept) if e.kind == "decision"][-1].detail
        assert (internal["canned_reasons"], internal["reason"], internal["reason_sent"]) == (
            "slur", "lol what a clown", "no")

    def test_an_approval_with_no_reason_says_only_that_a_moderator_reviewed_it(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="approved", reason="internal only",
                                            moderator=mia)
        assert statement_of_reasons(decision)["explanation"] == "A moderator reviewed this content."

    def test_the_transparency_statement_states_the_canned_text_in_english_and_never_the_free_text(self, api_client, mia):
        review = in_language(decided(api_client, "manual_review"), "id")
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate",
                                            reason_codes=["slur"], reason="a slur, see line two", share_reason=True,
                                            moderator=mia)
        statement = TransparencyStatement.objects.get(decision=decision)
        assert statement.facts["canned_reasons"] == [SLUR_EN]
        assert SLUR_EN in statement.body["decision_facts"] and "line two" not in json.dumps(statement.body)
        assert validate_statement(statement.body, default_rules()) == {}
        assert statement_violations([review.pk]) == []

    def test_the_checker_still_sees_a_statement_that_quotes_the_free_text(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate",
                                            reason_codes=["slur"], reason="called them vermin twice", moderator=mia)
        statement = TransparencyStatement.objects.get(decision=decision)
        body = {**statement.body, "decision_facts": statement.body["decision_facts"] + " called them vermin twice"}
        TransparencyStatement.objects.filter(pk=statement.pk).update(body=body)
        assert any("quotes" in problem for problem in statement_violations([review.pk]))

    def test_free_text_that_repeats_a_canned_sentence_is_not_taken_for_a_quote(self, api_client, mia):
        review = decided(api_client, "manual_review")
        services.review_override(review_id=review.pk, label="rejected", category="hate", reason_codes=["slur"],
                                 reason="uses a slur against a protected group", moderator=mia)
        assert statement_violations([review.pk]) == []  # the policy's own sentence, not the moderator's words

    def test_a_decision_from_before_the_tick_still_states_its_reason(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="approved", reason="satire", moderator=mia)
        type(decision).objects.filter(pk=decision.pk).update(reason_shared=None)  # as migration 0023 left old rows
        decision.refresh_from_db()
        assert statement_of_reasons(decision)["explanation"] == "A moderator reviewed this content: satire"


def test_canned_texts_keep_the_order_picked_and_skip_what_the_policy_does_not_list():
    canned = {"spam": [{"code": "a", "texts": {"en": "A.", "id": "A id."}}, {"code": "b", "texts": {"en": "B."}}]}
    assert canned_texts(canned, "spam", ["b", "a", "zz"], "id") == ["B.", "A id."]
    assert canned_texts(canned, "hate", ["a"], "en") == [] and canned_texts("not a dict", "spam", ["a"], "en") == []


@pytest.mark.django_db
class TestThePolicyForm:
    ADD = "/admin/moderation/moderationpolicy/add/"

    @pytest.fixture
    def boss(self, client, django_user_model):
        client.force_login(django_user_model.objects.create_superuser("boss", password="pw-12345-long"))
        return client

    def base(self) -> dict:
        from tests.moderation.test_admin import WORKPLACE_FIELDS

        return {"reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}",
                "flagged_label": "manual_review", "report_threshold": 3, **WORKPLACE_FIELDS}

    def test_it_is_prefilled_from_the_active_version_refuses_errors_and_publishes(self, boss):
        initial = boss.get(self.ADD).context["adminform"].form.initial
        assert initial["canned_reasons"] == default_canned_reasons() and initial["approval_needs_reason"] is False
        bad = {"spam": [{"code": "ad", "texts": {"id": "Iklan."}}]}
        refused = boss.post(self.ADD, {**self.base(), "canned_reasons": json.dumps(bad)})
        assert refused.status_code == 200 and "an English (&quot;en&quot;) text" in refused.content.decode()
        good = {"spam": [{"code": "ad", "texts": {"en": "An ad.", "id": "Iklan."}}]}
        published = boss.post(self.ADD, {**self.base(), "canned_reasons": json.dumps(good),
                                         "approval_needs_reason": "on"})
        assert published.status_code == 302
        newest = services.policy_active()
        assert (newest.version, newest.canned_reasons, newest.approval_needs_reason) == (2, good, True)

    def test_left_empty_it_keeps_the_active_versions_reasons(self, boss):
        assert boss.post(self.ADD, {**self.base(), "canned_reasons": ""}).status_code == 302
        assert services.policy_active().canned_reasons == default_canned_reasons()


@pytest.mark.django_db
@hypothesis_settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=200), language=st.sampled_from(["en", "id"]))
def test_any_canned_text_is_refused_or_shown_escaped_on_the_page_and_in_the_statement(
    api_client, django_user_model, text, language
):
    from tests.helpers import staff_browser

    canned = {"hate": [{"code": "any", "texts": {"en": "English.", language: text}}]}
    if validate_canned_reasons(canned):
        assert not text.strip() or "\x00" in text  # the only texts refused
        return
    services.policy_publish_change(lambda active: {"canned_reasons": canned})
    review = in_language(decided(api_client, "manual_review"), language)
    browser = staff_browser(django_user_model, f"m{django_user_model.objects.count()}", "moderator")
    page = browser.get(f"/admin/moderation/contentreview/{review.pk}/timeline/")
    assert page.status_code == 200
    if language == "en":
        assert escape(f"any: {text}") in page.content.decode()
    decision = services.review_override(review_id=review.pk, label="rejected", category="hate", reason_codes=["any"],
                                        moderator=browser.user)
    assert statement_of_reasons(decision)["explanation"] == f"A moderator reviewed this content: {text}"
