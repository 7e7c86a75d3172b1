"""The `llm` provider end to end through the real pipeline (submit -> job -> provider -> decision)
against the lab's fake chat-completions server: the policy's definitions as its prompt, versioned
with the policy; the rationale on the decision, in its explanation and on the review page; every
failure a provider error under the retry budget and the circuit breaker, never a verdict; and the
API key nowhere it could leak."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from lab.fake_llm import FakeLlmServer
from moderation import providers, services, tasks
from moderation.models import (
    AttemptOutcome, CircuitState, ContentReview, Decision, DecisionSource, ModerationPolicy, ModerationRequest,
    ProviderAttempt, ReviewStatus,
)
from moderation.models.definitions import DEFAULT_CATEGORY_DEFINITIONS
from moderation.observability.dry_run import model_results
from moderation.privacy.erasure import content_erase
from moderation.providers.llm import LlmProvider
from moderation.verdicts import thresholds_for
from tests.helpers import submit
from tests.moderation.test_erasure import columns_holding
from tests.moderation.test_workplace_pages import moderator, page_of  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

KEY = "sk-live-0d9b1f6e2c7a4b58a3e1"
INSULT = "Honestly, you absolute moron."


@pytest.fixture
def fake(settings):
    server = FakeLlmServer(api_key=KEY)
    settings.MODERATION_PROVIDER, settings.PROVIDER_URL = "llm", server.url
    settings.PROVIDER_API_KEY, settings.PROVIDER_MODEL = KEY, "fake-safeguard"
    settings.PROVIDER_TIMEOUT_S, settings.PROVIDER_CONNECT_TIMEOUT_S, settings.PROVIDER_HTTP_RETRIES = 0.5, 0.5, 0
    providers.register("llm", LlmProvider)  # a fresh instance, reading these settings
    yield server
    server.stop()
    providers.register("llm", LlmProvider)


def moderated(client, text: str = INSULT) -> ContentReview:
    review = submit(client, text=text)
    tasks.moderate_review(review.pk)
    return ContentReview.objects.select_related("decision").get(pk=review.pk)


def test_a_submission_is_decided_by_the_policys_definitions_with_the_rationale_explained(api_client, http, fake):
    review = moderated(api_client)

    assert review.status == ReviewStatus.REJECTED  # insult 0.93 >= the policy's reject threshold
    decision = review.decision
    assert (decision.source, decision.model, decision.category_scores["insult"]) == (
        DecisionSource.PROVIDER, "fake-safeguard", 0.93)
    policy = services.policy_active()
    version, (_, reject_at) = policy.version, thresholds_for(policy, "insult")
    assert decision.rationale == {
        "category": "insult", "score": 0.93, "start": 23, "end": 28, "policy_version": version,
        "text": "Saying \u201cmoron\u201d to someone falls under insult as the policy defines it."}
    assert INSULT[23:28] == "moron"
    assert decision.explanation == (
        f"policy v{version}: insult=0.930 >= reject {reject_at}; the model's rationale (insult 0.930, quoting 23-28): "
        "Saying \u201cmoron\u201d to someone falls under insult as the policy defines it.")
    # The prompt was the version's own definitions.
    system = fake.requests[0].body["messages"][0]["content"]
    assert f"policy version {version}" in system and DEFAULT_CATEGORY_DEFINITIONS["insult"].split()[0] in system
    # The client reads the rationale in its statement of reasons' explanation.
    body = http.get(f"/api/v1/reviews/{review.pk}/").json()
    assert body["decision"]["explanation"] == decision.explanation
    assert body["decision"]["reasons"] == [{"category": "insult", "score": 0.93}]


def test_a_text_that_violates_nothing_is_approved_and_says_so(api_client, fake):
    review = moderated(api_client, "Thanks for the lovely dinner")
    assert review.status == ReviewStatus.APPROVED
    assert review.decision.rationale["category"] == "none"
    assert review.decision.explanation.endswith(
        "every category below its thresholds; the model found no violation: Nothing in it matches a category's definition.")


FAILURES = [
    ("malformed_json", AttemptOutcome.MALFORMED), ("wrong_schema", AttemptOutcome.MALFORMED),
    ("bad_category", AttemptOutcome.MALFORMED), ("bad_score", AttemptOutcome.MALFORMED),
    ("span_not_in_text", AttemptOutcome.MALFORMED), ("empty", AttemptOutcome.MALFORMED),
    ("error_500", AttemptOutcome.HTTP_5XX), ("rate_limited", AttemptOutcome.ERROR), ("hang", AttemptOutcome.TIMEOUT),
]


@pytest.mark.parametrize(("mode", "outcome"), FAILURES)
def test_every_failure_is_retried_with_the_same_key_then_goes_to_a_human_never_a_verdict(api_client, fake, settings,
                                                                                          mode, outcome):
    settings.MODERATION_MAX_ATTEMPTS = 2
    fake.mode = mode
    review = submit(api_client, text=INSULT)

    assert tasks.moderate_review(review.pk).startswith("retry_scheduled")
    request = ModerationRequest.objects.get(review=review)
    later = request.next_attempt_at + timedelta(seconds=1)
    assert services.request_dispatch(request_id=request.pk, worker_id="w2", now=later).action == "escalated"

    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW and review.decision.source == DecisionSource.SYSTEM
    assert not Decision.objects.filter(review=review, source=DecisionSource.PROVIDER).exists()
    assert list(ProviderAttempt.objects.filter(request=request).values_list("outcome", flat=True)) == [outcome] * 2
    keys = {r.headers["idempotency-key"] for r in fake.requests}
    assert keys == {str(request.idempotency_key)} and len(fake.requests) == 2


def test_a_failed_attempt_then_a_good_answer_decides_on_the_retry(api_client, fake):
    fake.script("error_500")
    review = submit(api_client, text=INSULT)
    assert tasks.moderate_review(review.pk).startswith("retry_scheduled")
    request = ModerationRequest.objects.get(review=review)

    report = services.request_dispatch(request_id=request.pk, worker_id="w2",
                                       now=request.next_attempt_at + timedelta(seconds=1))

    assert (report.action, report.detail) == ("finalized", "applied")
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED and review.decision.rationale["category"] == "insult"


def test_a_fenced_reasoning_answer_decides_as_a_plain_one(api_client, fake):
    fake.mode = "fenced"
    assert moderated(api_client).decision.rationale["category"] == "insult"


@pytest.mark.parametrize(("retry_after_s", "waits_at_least", "waits_at_most"), [(30, 29, 31), (86_400, 299, 301)])
def test_a_rate_limit_is_waited_out_as_asked_but_never_past_the_backoffs_cap(api_client, fake, settings, retry_after_s,
                                                                             waits_at_least, waits_at_most):
    settings.MODERATION_RETRY_BACKOFF_S, settings.MODERATION_RETRY_BACKOFF_MAX_S = 1, 300
    fake.mode, fake.retry_after_s = "rate_limited", retry_after_s
    review = submit(api_client, text=INSULT)
    before = timezone.now()

    tasks.moderate_review(review.pk)

    wait = (ModerationRequest.objects.get(review=review).next_attempt_at - before).total_seconds()
    assert waits_at_least <= wait <= waits_at_most


def test_malformed_answers_open_the_circuit_and_then_nothing_is_sent(api_client, fake, settings):
    settings.BREAKER_MIN_CALLS, settings.BREAKER_FAILURE_RATIO, settings.BREAKER_WINDOW_S = 4, 0.5, 60
    settings.BREAKER_COOLDOWN_S, settings.BREAKER_MAX_WAIT_S = 30, 0
    fake.mode = "wrong_schema"
    for _ in range(4):
        moderated(api_client)
    assert services.circuit_get("llm").state == CircuitState.OPEN

    waiting = moderated(api_client)

    assert waiting.status == ReviewStatus.PENDING and len(fake.requests) == 4


def test_the_api_key_never_appears_in_logs_errors_the_admin_or_a_repr(api_client, fake, admin_client, caplog):
    caplog.set_level(logging.DEBUG)
    moderated(api_client)  # a good answer, its request logged
    fake.mode = "echo_key"  # a careless proxy quoting the Authorization header in its 401
    failed = moderated(api_client)

    assert failed.status == ReviewStatus.MANUAL_REVIEW  # a client error: not retried, a human decides
    request = ModerationRequest.objects.get(review=failed)
    attempt = ProviderAttempt.objects.get(request=request)
    assert "[redacted]" in attempt.error and "401" in attempt.error
    assert KEY not in caplog.text and "[redacted]" in caplog.text
    stored = [request.last_error, attempt.error, failed.decision.reason, failed.decision.explanation,
              *failed.transitions.values_list("reason", flat=True)]
    assert not [text for text in stored if KEY in (text or "")]
    for page in (f"/admin/moderation/moderationrequest/{request.pk}/change/", "/admin/moderation/providerattempt/",
                 f"/admin/moderation/providerattempt/{attempt.pk}/change/", page_of(failed),
                 "/admin/moderation/providercircuit/"):
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert KEY not in response.content.decode(), page
    assert KEY not in repr(providers.get_provider("llm"))


def test_the_definitions_are_versioned_with_the_policy_and_each_version_prompts_its_own(api_client, fake):
    first = services.policy_active()
    wording = "Any word that belittles the person addressed, however mild."
    second = services.policy_publish_change(
        lambda active: {"category_definitions": {**active.category_definitions, "insult": wording}},
        notes="a stricter wording of insult")

    review = moderated(api_client)

    system = fake.requests[-1].body["messages"][0]["content"]
    assert f"policy version {second.version}" in system and f"- insult: {wording}" in system
    assert review.decision.rationale["policy_version"] == second.version
    first.refresh_from_db()
    assert first.category_definitions == DEFAULT_CATEGORY_DEFINITIONS  # a version is never edited

    # Measuring a version (evaluate_policy, and a backtest) sends that version's wording.
    fake.requests.clear()
    for policy in (first, second):
        (answer,) = model_results([INSULT], provider=providers.get_provider("llm"), policy=policy)
        assert answer.rationale.policy_version == policy.version
    sent = [r.body["messages"][0]["content"] for r in fake.requests]
    assert wording not in sent[0] and f"- insult: {wording}" in sent[1]


@pytest.mark.parametrize(("definitions", "error"), [
    ({"spam-ish": "Unsolicited ads."}, "'spam-ish' is not one of the version's categories"),
    ({"none": "Nothing."}, "'none' is the answer for no violation, not a category"),
    ({"insult": "   "}, "'insult' needs a definition in words"),
    ({"insult": 7}, "'insult' needs a definition in words"),
    ({"insult": "x" * 4001}, "'insult' is longer than 4000 characters"),
    (["insult"], "category_definitions must be an object"),
])
def test_a_version_with_bad_definitions_is_refused_and_nothing_is_published(db, definitions, error):
    before = ModerationPolicy.objects.count()
    with pytest.raises(ValidationError) as raised:
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, category_definitions=definitions)
    assert any(error in message for message in raised.value.messages)
    assert ModerationPolicy.objects.count() == before


def test_a_version_that_leaves_the_definitions_out_gets_the_shipped_ones_of_its_categories(db):
    published = services.policy_publish(reject_threshold=0.9, review_threshold=0.5, categories=["spam", "threat"])
    assert published.category_definitions == {"threat": DEFAULT_CATEGORY_DEFINITIONS["threat"]}


def test_the_admin_publishes_a_new_wording_as_a_new_version(admin_client, db):
    active = services.policy_active()
    form = admin_client.get("/admin/moderation/moderationpolicy/add/")
    assert form.status_code == 200 and "category_definitions" in form.content.decode()
    data = {name: value for name, value in form.context["adminform"].form.initial.items() if value is not None}
    posted = {name: json.dumps(value) if isinstance(value, dict | list) else value for name, value in data.items()}
    posted["category_definitions"] = json.dumps({"insult": "Only name-calling counts."})
    posted["notes"] = "insult reworded"
    response = admin_client.post("/admin/moderation/moderationpolicy/add/", posted)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert services.policy_active().version == active.version + 1
    assert services.policy_active().category_definitions == {"insult": "Only name-calling counts."}


def test_the_review_page_shows_the_rationale_with_the_quoted_passage_highlighted(api_client, fake, moderator):  # noqa: F811
    review = moderated(api_client, "<b>Honestly</b>, you absolute\u200b moron.")

    page = moderator.get(page_of(review)).content.decode()

    assert 'id="model-rationale"' in page and "(insult 0.930, by policy v1's definitions)" in page
    assert ('<span class="flagged-part flagged-quote" id="flagged-part-0" title="Quoted by the model for insult">'
            "moron</span>") in page
    assert "Quoted: \u201cmoron\u201d, highlighted below." in page
    assert "&lt;b&gt;Honestly&lt;/b&gt;" in page and "<b>Honestly" not in page
    assert '<script src="/static/moderation/flagged_parts.js" defer></script>' in page


def test_erasure_takes_the_rationale_and_every_quote_of_it_with_the_content(api_client, fake):
    review = moderated(api_client)
    # The policy's own term lists may name the word: only the rest of the database counts.
    quoting = {column for column in columns_holding("moron") if "moderationpolicy" not in column}
    assert {"moderation_decision.rationale", "moderation_decision.explanation",
            "audit_reviewtransition.reason"} <= quoting  # the test can fail: the quotes are there

    content_erase(review_id=review.pk, actor="client", actor_id="acme", reason="user request")

    assert {column for column in columns_holding("moron") if "moderationpolicy" not in column} == set()
    assert Decision.objects.get(pk=review.decision_id).rationale == {}


def test_the_admin_form_left_without_definitions_keeps_the_active_ones_of_its_categories(admin_client, db):
    from tests.moderation.test_admin import WORKPLACE_FIELDS

    response = admin_client.post("/admin/moderation/moderationpolicy/add/", {
        "reject_threshold": 0.9, "review_threshold": 0.5, "category_thresholds": "{}", "flagged_label": "manual_review",
        "report_threshold": 3, **WORKPLACE_FIELDS, "categories": '["insult", "spam"]'})

    assert response.status_code == 302
    assert services.policy_active().category_definitions == {"insult": DEFAULT_CATEGORY_DEFINITIONS["insult"]}


def test_a_backtest_asks_each_wording_of_the_definitions_once_and_keeps_the_answers(fake, api_client,
                                                                                   django_user_model):
    """Two versions' wordings are two prompts: a backtest asks the model once per text for each,
    keyed by the wording's digest, and a second backtest of them asks nothing."""
    import time

    from moderation.models import BacktestStatus, ProviderAnswer
    from moderation.quality import backtests

    moderator_user = django_user_model.objects.create_user("mod-llm", password="pw-long-enough-1", is_staff=True)
    active = services.policy_active()
    for text in ["you absolute moron", "a lovely morning at the market"]:
        review = moderated(api_client, text)
        services.review_override(review_id=review.pk, label=ReviewStatus.REJECTED if "moron" in text else
                                 ReviewStatus.APPROVED, reason="checked", category="insult" if "moron" in text else "",
                                 moderator=moderator_user, expected_version=review.version)
    reworded = {**active.category_definitions, "insult": "Name-calling aimed at a person, in any language."}
    draft = services.policy_publish(**{**services.policy_fields(active), "category_definitions": reworded},
                                    draft=True)
    asked_before = len(fake.requests)

    def run():
        backtest = backtests.backtest_start(candidate=draft, provider_name="llm", enqueue=False)
        backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 30, enqueue_rest=False)
        backtest.refresh_from_db()
        return backtest

    first = run()
    assert first.status == BacktestStatus.DONE and first.total == 2
    prompts = [r.body["messages"][0]["content"] for r in fake.requests[asked_before:]]
    assert len(prompts) == 4 and sum("Name-calling aimed at a person" in p for p in prompts) == 2
    assert ProviderAnswer.objects.count() == 4
    second = run()
    assert len(fake.requests) == asked_before + 4 and second.cached == 4 and second.figures == first.figures
