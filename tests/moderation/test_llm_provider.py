"""The `llm` provider against the lab's fake chat-completions server (lab/fake_llm.py): what it
sends (the policy's definitions as the prompt, structured output asked for), how it reads each
answer a real server gives, and how every failure is classified. No database: the provider
never touches one."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import HealthCheck, given, settings as hypothesis_settings
from hypothesis import strategies as st

from lab.fake_llm import FakeLlmServer
from moderation.models.definitions import DEFAULT_CATEGORY_DEFINITIONS
from moderation.providers import ModerationInput, Rationale
from moderation.providers import base as errors
from moderation.providers.http import retry_after
from moderation.providers.llm import FORMATS, REDACTED, LlmProvider, answer_text, chat_url, quote_span

KEY = "sk-test-5f1d9c0a7e3b4f21"


@pytest.fixture
def fake(settings):
    server = FakeLlmServer(api_key=KEY)
    settings.PROVIDER_URL, settings.PROVIDER_API_KEY, settings.PROVIDER_MODEL = server.url, KEY, "fake-safeguard"
    settings.PROVIDER_TIMEOUT_S, settings.PROVIDER_CONNECT_TIMEOUT_S, settings.PROVIDER_HTTP_RETRIES = 0.5, 0.5, 0
    yield server
    server.stop()


def ask(text: str = "You absolute moron, read the thread", *, definitions=None, version: int | None = 4,
        kind: str = "text", **extra) -> ModerationInput:
    fields = {"text": text} if kind == "text" else {"metadata": extra.pop("metadata")}
    return ModerationInput(idempotency_key="0f6c7a4e-6b1e-4a57-9d38-1d7a1a0d3c11", content_type=kind,
                           category_definitions=dict(DEFAULT_CATEGORY_DEFINITIONS if definitions is None else definitions),
                           policy_version=version, **fields, **extra)


def test_the_prompt_is_the_policys_definitions_and_a_schema_names_its_categories(fake):
    result = LlmProvider().moderate(ask())

    sent = fake.requests[0]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["idempotency-key"] == "0f6c7a4e-6b1e-4a57-9d38-1d7a1a0d3c11"
    body = sent.body
    assert body["model"] == "fake-safeguard" and body["temperature"] == 0
    system, user = body["messages"]
    assert (system["role"], user) == ("system", {"role": "user", "content": "You absolute moron, read the thread"})
    assert "policy version 4" in system["content"]
    for category, definition in DEFAULT_CATEGORY_DEFINITIONS.items():
        assert f"- {category}: {' '.join(definition.split())}" in system["content"]
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["properties"]["category"]["enum"] == [*DEFAULT_CATEGORY_DEFINITIONS, "none"]
    assert schema["required"] == ["category", "score", "rationale", "quote"] and schema["additionalProperties"] is False
    # The answer: the named category scored, the others 0, the quote's span in the text.
    assert result.category_scores == {"insult": 0.93, "threat": 0.0, "hate": 0.0, "sexual": 0.0, "profanity": 0.0}
    assert result.flagged and result.categories["insult"] and not result.categories["threat"]
    assert result.model == "fake-safeguard" and result.provider_request_id.startswith("chatcmpl-")
    assert result.rationale == Rationale(category="insult", score=0.93, start=13, end=18, policy_version=4,
                                         text="Saying \u201cmoron\u201d to someone falls under insult as the policy defines it.")
    assert "You absolute moron"[13:18] == "moron"


def test_a_text_that_violates_nothing_is_approved_material_with_no_span(fake):
    result = LlmProvider().moderate(ask("What a lovely afternoon"))
    assert not result.flagged and set(result.category_scores.values()) == {0.0}
    assert (result.rationale.category, result.rationale.start, result.rationale.end) == ("none", None, None)


def test_only_the_versions_own_categories_are_asked_for_and_answered(fake):
    result = LlmProvider().moderate(ask("you moron, I will kill you", definitions={"insult": "Demeaning words."}))
    assert fake.requests[0].body["response_format"]["json_schema"]["schema"]["properties"]["category"]["enum"] == [
        "insult", "none"]
    assert result.category_scores == {"insult": 0.93}  # the threat is no category of this version


def test_metadata_is_judged_as_the_rules_read_it_and_the_span_points_there(fake):
    result = LlmProvider().moderate(ask(kind="metadata", metadata={"title": "hello", "bio": ["fine", "total LOSER"]}))
    assert fake.requests[0].body["messages"][1]["content"] == "hello\nfine\ntotal LOSER"
    assert "hello\nfine\ntotal LOSER"[result.rationale.start:result.rationale.end] == "LOSER"


def test_a_reasoning_models_fenced_answer_with_its_thinking_is_read(fake):
    fake.mode = "fenced"
    result = LlmProvider().moderate(ask())
    assert result.rationale.category == "insult" and result.category_scores["insult"] == 0.93


@pytest.mark.parametrize(("mode", "words"), [
    ("malformed_json", "not the verdict asked for"),
    ("wrong_schema", "not the verdict asked for"),
    ("bad_score", "not the verdict asked for"),
    ("bad_category", "'spam', which is none of the policy's categories"),
    ("span_not_in_text", "quote does not occur in the text"),
    ("empty", "no content (it stopped at its token limit"),
])
def test_every_malformed_answer_is_a_retryable_provider_error_never_a_verdict(fake, mode, words):
    fake.mode = mode
    with pytest.raises(errors.MalformedAnswer) as raised:
        LlmProvider().moderate(ask())
    assert words in str(raised.value) and raised.value.retryable


@pytest.mark.parametrize(("mode", "error", "status"), [
    ("error_500", errors.ProviderServerError, 500),
    ("rate_limited", errors.ProviderError, 429),
])
def test_server_errors_and_rate_limits_are_retryable_and_a_retry_after_is_read(fake, mode, error, status):
    fake.mode = mode
    with pytest.raises(error) as raised:
        LlmProvider().moderate(ask())
    assert type(raised.value) is error and raised.value.retryable and raised.value.http_status == status
    assert raised.value.retry_after_s == (7.0 if mode == "rate_limited" else None)


def test_a_wrong_key_is_a_client_error_not_retried(fake, settings):
    settings.PROVIDER_API_KEY = "sk-wrong"
    with pytest.raises(errors.ProviderClientError) as raised:
        LlmProvider().moderate(ask())
    assert raised.value.http_status == 401 and not raised.value.retryable


def test_a_server_that_refuses_the_schema_is_asked_for_json_and_that_is_remembered(fake):
    fake.mode = "no_schema"
    provider = LlmProvider()

    first = provider.moderate(ask())
    second = provider.moderate(ask("loser"))

    formats = [(r.body.get("response_format") or {}).get("type") for r in fake.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert first.rationale.category == second.rationale.category == "insult"
    assert provider.form == FORMATS[1]


def test_a_slow_answer_within_the_timeout_is_read_and_a_hanging_one_times_out(fake, settings):
    fake.mode, fake.delay_s = "slow", 0.2
    assert LlmProvider().moderate(ask()).rationale.category == "insult"

    fake.mode = "hang"
    started = time.monotonic()
    with pytest.raises(errors.ProviderTimeout):
        LlmProvider().moderate(ask())
    assert time.monotonic() - started < 3


def test_a_server_trickling_its_answer_is_cut_off_at_the_calls_deadline(fake, settings):
    # Each byte comes within the read timeout (0.5 s), so only the overall deadline can end it:
    # connect 0.5 s + 2 x 0.5 s (moderation.retry_budget.provider_worst_case_s).
    fake.mode, fake.delay_s = "trickle", 0.2
    started = time.monotonic()
    with pytest.raises(errors.ProviderTimeout) as raised:
        LlmProvider().moderate(ask())
    assert time.monotonic() - started < 2.5
    assert "overall deadline" in str(raised.value)


def test_no_definitions_is_content_it_cannot_judge_and_nothing_is_sent(fake):
    with pytest.raises(errors.UnsupportedContent):
        LlmProvider().moderate(ask(definitions={}))
    with pytest.raises(errors.UnsupportedContent):
        LlmProvider().moderate(ModerationInput(idempotency_key="k", content_type="image", image_base64="AA==",
                                               media_mime="image/png", category_definitions={"insult": "x"}))
    assert fake.requests == []


def test_the_key_never_appears_in_an_error_or_the_providers_repr(fake):
    fake.mode = "echo_key"  # a careless proxy quoting the header it got
    provider = LlmProvider()
    with pytest.raises(errors.ProviderClientError) as raised:
        provider.moderate(ask())
    assert KEY not in str(raised.value) and REDACTED in str(raised.value)
    assert KEY not in repr(provider) and KEY not in repr(vars(provider))


@pytest.mark.parametrize(("base", "url"), [
    ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1/chat/completions"),
])
def test_the_url_may_be_the_server_its_v1_base_or_the_endpoint(base, url):
    assert chat_url(base) == url


def test_a_quote_is_found_as_written_or_re_spaced_and_re_cased_never_elsewhere():
    text = "First line.\nYou  ABSOLUTE\tmoron, honestly."
    assert quote_span(text, "ABSOLUTE\tmoron") == (17, 31)
    assert quote_span(text, " you absolute moron ") == (12, 31)
    assert quote_span(text, "absolute idiot") is None
    assert quote_span(text, "   ") is None


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(codec="utf-8"), max_size=60),  # (JSON carries no lone surrogate)
       word=st.sampled_from(["", "moron", "KILL YOU", "\u202eidiot", "bodoh\u200b"]))
def test_any_unicode_text_is_judged_and_a_span_always_points_at_the_quote(fake, text, word):
    text = f"{text} {word} {text[::-1]}"
    fake.requests.clear()
    result = LlmProvider().moderate(ask(text))  # the fake quotes as written: never refused as malformed
    rationale = result.rationale
    if rationale is None:  # nothing to read: no call was made
        assert not text.strip() and not fake.requests
        return
    if rationale.category == "none":
        assert rationale.start is None
    else:
        assert 0 <= rationale.start < rationale.end <= len(text)
        assert text[rationale.start:rationale.end].casefold().split() == rationale.text.split("\u201c")[1].split(
            "\u201d")[0].casefold().split()


VERDICT = '{"category": "none", "score": 0, "rationale": "fine", "quote": ""}'


@pytest.mark.parametrize("content", [
    VERDICT,
    f"<think>hmm</think>{VERDICT}",
    f"```json\n{VERDICT}\n```",
    f"<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>{VERDICT}<|return|>",
])
def test_the_verdict_is_found_in_what_reasoning_models_send(content):
    message = {"role": "assistant", "content": content, "reasoning": "not read"}
    assert answer_text({"id": "c1", "model": "m", "choices": [{"message": message}]}) == (VERDICT, "c1", "m")


@pytest.mark.parametrize(("data", "words"), [
    ({"choices": []}, "no choices"),
    ({"choices": [{"message": {"content": "<think>still going"}}]}, "reasoning never ended"),
    ({"choices": [{"message": {"content": None, "refusal": "I can't help with that."}}]}, "refused"),
    ({"object": "error"}, "not a chat completion"),
    ([1, 2], "not a chat completion"),
    ({"id": "c" * 256, "choices": [{"message": {"content": VERDICT}}]}, "not a chat completion"),
    ({"model": "m" * 101, "choices": [{"message": {"content": VERDICT}}]}, "not a chat completion"),
])
def test_a_completion_without_an_answer_is_malformed(data, words):
    with pytest.raises(errors.MalformedAnswer, match=words):
        answer_text(data)


@pytest.mark.parametrize(("header", "seconds"), [
    ("120", 120.0), ("0", 0.0), (" 7 ", 7.0), ("-5", None), ("soon", None), ("", None), ("1.5", None),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date long past: no wait
])
def test_a_retry_after_is_read_as_seconds_or_a_date_and_anything_else_is_ignored(header, seconds):
    response = httpx.Response(429, headers={"Retry-After": header} if header else {})
    assert retry_after(response) == seconds


def test_a_retry_after_date_ahead_is_the_seconds_until_then():
    ahead = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 85 <= retry_after(httpx.Response(429, headers={"Retry-After": ahead})) <= 90
