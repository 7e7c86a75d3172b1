"""Notices to the affected user (docs/design.md, "Statements of reasons"): every rejection and
every account action carries `appealable_until` and a `notice` rendered from the policy's
templates; an appeal after the window is 409 `appeal_window_closed`."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import AccountAction, Appeal, Author, Content, Decision, DecisionNotification, ModerationPolicy
from moderation.transparency.notices import BUILT_IN_TEMPLATES, PLACEHOLDERS, notice, render
from moderation.transparency.reasons import statement_of_reasons
from moderation.validation import validate_policy
from tests.helpers import examples, decided
from tests.moderation.test_authors import authored

pytestmark = pytest.mark.django_db

EN_TEXT = "We restricted your content or account under our rules. Reasons: {}. You can appeal until {}."
ID_TEXT = "Kami membatasi konten atau akun Anda berdasarkan aturan kami. Alasan: {}. Anda dapat mengajukan banding hingga {}."


def stamp(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


def publish(**changes) -> ModerationPolicy:
    return services.policy_publish_change(lambda active: changes)


def banned(client, author_id: str) -> AccountAction:
    moderator = get_user_model().objects.create_user("mod-a", is_staff=True)
    authored(client, author_id, "approved")
    return services.author_act(author_pk=Author.objects.get(client=client, author_id=author_id).pk,
                               moderator=moderator, action="ban", reason="ban evasion")


def test_a_rejection_in_the_api_carries_its_appeal_window_and_an_english_notice(http, api_client):
    review = decided(api_client, "rejected")
    decision = Decision.objects.get(pk=review.decision_id)
    until = decision.created_at + timedelta(days=183)

    stated = http.get(f"/api/v1/reviews/{review.pk}/").json()["decision"]

    assert stated["appealable_until"] == stamp(until)
    category = stated["reasons"][0]["category"]
    assert stated["notice"] == {"language": "en", "text": EN_TEXT.format(category, until.date().isoformat())}


@pytest.mark.parametrize("label", ["approved", "manual_review"])
def test_a_decision_that_restricts_nothing_has_no_window_and_no_notice(api_client, label):
    """manual_review only sends the content to a human: nothing is taken down, so nothing to appeal."""
    review = decided(api_client, label)
    stated = statement_of_reasons(Decision.objects.get(pk=review.decision_id))
    assert stated["appealable_until"] is None and stated["notice"] is None


@pytest.mark.parametrize(("language", "candidates", "expected"), [
    ("id", None, "id"), ("ms", None, "en"), ("", None, "en"),
    # An unsure language: the likeliest candidate with a template (issue: an Indonesian text, its
    # language unsure, got an English notice); none with a template: English.
    ("", [["ms", 0.41], ["id", 0.38], ["en", 0.1]], "id"), ("", [["ms", 0.6], ["de", 0.3]], "en"),
    ("ms", [["ms", 0.9], ["id", 0.05]], "en"),  # a sure language without a template stays English
])
def test_the_notice_is_in_the_contents_language_when_a_template_exists_else_english(api_client, language, candidates,
                                                                                   expected):
    review = decided(api_client, "rejected")
    Content.objects.filter(review=review).update(language=language, language_candidates=candidates)
    decision = Decision.objects.get(pk=review.decision_id)
    text = statement_of_reasons(decision)["notice"]
    until = (decision.created_at + timedelta(days=183)).date().isoformat()
    category = statement_of_reasons(decision)["reasons"][0]["category"]
    assert text == {"language": expected, "text": (ID_TEXT if expected == "id" else EN_TEXT).format(category, until)}


@override_settings(POLICY_URL="https://example.test/rules")
def test_the_policys_templates_and_window_replace_the_built_in_ones(api_client):
    publish(appeal_window_days=30, notice_templates={
        "ms": "Kandungan anda disekat ({category}; {reasons}). Rayuan: {appeal_route} sebelum {appealable_until}. "
              "{policy_url}",
    })
    review = decided(api_client, "rejected")
    Content.objects.filter(review=review).update(language="ms")
    decision = Decision.objects.get(pk=review.decision_id)
    stated = statement_of_reasons(decision)

    until = decision.created_at + timedelta(days=30)
    category = stated["reasons"][0]["category"]
    assert stated["appealable_until"] == stamp(until)
    assert stated["notice"] == {"language": "ms", "text": (
        f"Kandungan anda disekat ({category}; {category}). Rayuan: /api/v1/reviews/{review.pk}/appeals/ "
        f"sebelum {until.date().isoformat()}. https://example.test/rules")}
    # The built-in English one, for another language, links the rules when POLICY_URL is set.
    Content.objects.filter(review=review).update(language="")
    assert statement_of_reasons(Decision.objects.get(pk=decision.pk))["notice"]["text"].endswith(" Our rules: https://example.test/rules")


def test_the_webhooks_carry_the_same_notice_as_the_api(http, api_client):
    review = decided(api_client, "rejected")
    body = json.loads(DecisionNotification.objects.get(review=review).payload)
    assert body["data"]["decision"] == http.get(f"/api/v1/reviews/{review.pk}/").json()["decision"]
    assert body["data"]["decision"]["notice"]["language"] == "en"


def test_an_account_action_carries_its_window_and_notice_in_the_api_and_the_webhook(http, api_client):
    action = banned(api_client, "ann")
    until = action.created_at + timedelta(days=183)
    expected = {"language": "en", "text": EN_TEXT.format("-", until.date().isoformat())}

    [listed] = [a for a in http.get("/api/v1/authors/ann/").json()["actions"] if a["action_id"] == str(action.pk)]
    webhook = json.loads(DecisionNotification.objects.filter(client=api_client, review=None).latest("id").payload)

    for statement in (listed["statement"], webhook["data"]["statement"]):
        assert statement["appealable_until"] == stamp(until)
        assert statement["notice"] == expected


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"appeal_window_days": 0}, "appeal_window_days must be a whole number from 1 to 3650"),
        ({"appeal_window_days": True}, "appeal_window_days must be a whole number from 1 to 3650"),
        ({"notice_templates": ["en"]}, "notice_templates must be an object of {language: template}"),
        ({"notice_templates": {"en": "until {appealable_until} {user.password}"}},
         "notice_templates.en: unknown placeholders {user.password}"),
        ({"notice_templates": {"en": "{0} {reasons!r}"}}, "notice_templates.en: unknown placeholders {0}, {reasons!r}"),
        ({"notice_templates": {"en": "Appeal until {appealable_until"}},
         "notice_templates.en: the brace at character 14 has no pair"),
        ({"notice_templates": {"id": "{{reasons}}"}}, "notice_templates.id: the brace at character 1 has no pair"),
        ({"notice_templates": {"xx": "hello"}}, "notice_templates: 'xx' is not a language the detector knows"),
        ({"notice_templates": {"en": "  "}}, "notice_templates.en: a non-empty text of at most 2000 characters"),
    ],
)
def test_publishing_refuses_a_bad_window_or_template_with_a_clear_error(fields, error):
    with pytest.raises(ValidationError) as refused:
        publish(**fields)
    assert any(message.startswith(error) for message in refused.value.messages), refused.value.messages


def test_every_placeholder_is_accepted():
    assert validate_policy({"reject_threshold": 0.9, "review_threshold": 0.5,
                            "notice_templates": {"en": " ".join("{" + n + "}" for n in PLACEHOLDERS)}}) == []


def test_an_appeal_after_the_window_is_409_appeal_window_closed_and_files_nothing(http, api_client):
    publish(appeal_window_days=1)
    review = decided(api_client, "rejected")
    path = f"/api/v1/reviews/{review.pk}/appeals/"
    decided_at = Decision.objects.get(pk=review.decision_id).created_at
    Decision.objects.filter(pk=review.decision_id).update(created_at=decided_at - timedelta(days=1, seconds=1))

    answer = http.post(path, {"appellant_id": "u9", "statement": "late"}, format="json")

    assert answer.status_code == 409 and answer.json()["error"] == "appeal_window_closed"
    assert not Appeal.objects.filter(review=review).exists()
    review.refresh_from_db()
    assert review.status == "rejected"
    # Within the window the same appeal is filed.
    Decision.objects.filter(pk=review.decision_id).update(created_at=decided_at)
    assert http.post(path, {"appellant_id": "u9", "statement": "in time"}, format="json").status_code == 201


def test_an_account_appeal_after_the_window_is_409_appeal_window_closed(http, api_client):
    publish(appeal_window_days=1)
    action = banned(api_client, "ann")
    AccountAction.objects.filter(pk=action.pk).update(created_at=action.created_at - timedelta(days=1, seconds=1))

    answer = http.post("/api/v1/authors/ann/appeals/", {"statement": "late"}, format="json")

    assert answer.status_code == 409 and answer.json()["error"] == "appeal_window_closed"
    AccountAction.objects.filter(pk=action.pk).update(created_at=action.created_at)
    assert http.post("/api/v1/authors/ann/appeals/", {"statement": "in time"}, format="json").status_code == 201


# --- rendering any text ---------------------------------------------------------------------------

class _Policy:
    def __init__(self, templates, days=183):
        self.notice_templates, self.appeal_window_days = templates, days


@given(template=st.text(), categories=st.lists(st.text()), language=st.text(max_size=4))
@example(template="{category.__class__} {reasons[0]} {0} {} {{reasons}} {reasons", categories=["{reasons}"],
         language="en")
@example(template="%(reasons)s $reasons {appeal_route!r:>10}", categories=[], language="id")
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_rendering_any_template_with_any_categories_never_raises_and_reads_no_attribute(template, categories,
                                                                                        language):
    from django.utils import timezone

    until = timezone.now()
    stated = notice(_Policy({"en": template, "id": template}), language, categories=categories, until=until,
                    appeal_route="/api/v1/reviews/x/appeals/")
    assert stated["language"] in ("en", "id")
    assert isinstance(stated["text"], str)
    # A value is put in once and never read as a template: a category naming a placeholder stays as written.
    assert render("{reasons}", {"reasons": "{category}", "category": "x"}) == "{category}"
    if "{" not in template:
        assert stated["text"] == template


def test_a_draft_with_templates_that_are_not_text_falls_back_to_the_built_in_ones():
    from django.utils import timezone

    until = timezone.now()
    assert notice(_Policy(["en"]), "en", categories=["spam"], until=until, appeal_route="r")["text"] == \
        render(BUILT_IN_TEMPLATES["en"], {"reasons": "spam", "appealable_until": until.date().isoformat()})
