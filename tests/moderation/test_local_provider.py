"""The default provider runs the project's own multilingual model (moderation/data/local_model.npz), offline."""

from __future__ import annotations

import pytest

from moderation.providers import ModerationInput, UnsupportedContent, get_provider
from tests.helpers import count_model_calls


def moderate(**fields):
    return get_provider("local").moderate(ModerationInput(idempotency_key="k", **fields))


CATEGORIES = {"insult", "threat", "hate", "sexual", "profanity"}


@pytest.mark.parametrize("text", ["Thanks for the lovely dinner, see you on Sunday!",
                                  "Terima kasih atas bantuannya kemarin", "Selamat pagi semua"])
def test_friendly_text_scores_low_in_every_category_and_is_not_flagged(text):
    result = moderate(content_type="text", text=text)
    assert max(result.category_scores.values()) < 0.2
    assert result.flagged is False
    assert result.model == "local-multilingual-2"


@pytest.mark.parametrize("text, category", [
    ("shut up you fucking idiot", "insult"),
    ("dasar tolol", "insult"),
    ("kamu b0d0h", "insult"),
    ("🖕🖕🖕", "profanity"),
])
def test_abusive_text_scores_high_in_its_category_and_is_flagged(text, category):
    result = moderate(content_type="text", text=text)
    assert result.category_scores[category] > 0.9
    assert result.flagged is True and result.categories[category] is True


def test_a_threat_scores_as_threat_not_as_profanity():
    result = moderate(content_type="text", text="I will kill you and your family tonight")
    assert result.category_scores["threat"] > 0.5 > result.category_scores["profanity"]


def test_metadata_is_judged_by_its_worst_string_value_per_category():
    clean = moderate(content_type="metadata", metadata={"title": "Holiday photos", "tags": ["beach", "sun"]})
    dirty = moderate(content_type="metadata", metadata={"title": "Holiday", "comments": [{"body": "you piece of shit"}]})
    assert max(clean.category_scores.values()) < 0.5 < dirty.category_scores["insult"]


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_media_is_refused_as_unsupported(kind):
    with pytest.raises(UnsupportedContent) as error:
        moderate(content_type=kind, media_url="https://example.com/file")
    assert error.value.retryable is False


def test_the_result_has_the_openai_moderation_shape():
    result = moderate(content_type="text", text="hello")
    assert set(result.categories) == set(result.category_scores) == CATEGORIES
    assert all(0.0 <= score <= 1.0 for score in result.category_scores.values())


def test_many_inputs_are_judged_by_one_model_call_as_each_would_be_alone(monkeypatch):
    provider = get_provider("local")
    inputs = [
        ModerationInput(idempotency_key="a", content_type="text", text="Thanks for the lovely dinner!"),
        ModerationInput(idempotency_key="b", content_type="image", media_url="https://example.com/cat.png"),
        ModerationInput(idempotency_key="c", content_type="metadata",
                        metadata={"title": "Holiday", "comments": [{"body": "you piece of shit"}, "  "]}),
        ModerationInput(idempotency_key="d", content_type="text", text="   "),
        ModerationInput(idempotency_key="e", content_type="text", text="shut up you fucking idiot"),
    ]
    alone = []
    for request in inputs:
        try:
            alone.append(provider.moderate(request))
        except UnsupportedContent as exc:
            alone.append(type(exc))
    calls = count_model_calls(monkeypatch)

    together = provider.moderate_many(inputs)

    assert len(calls) == 1  # every text of every input, once
    # Each in its normal form (moderation.text.normal): what the model reads.
    assert sorted(calls[0]) == sorted(["thanks for the lovely dinner!", "holiday", "you piece of shit",
                                       "shut up you fucking idiot"])
    assert [type(a) if isinstance(a, UnsupportedContent) else a for a in together] == alone
    assert together[3].category_scores == dict.fromkeys(CATEGORIES, 0.0)  # nothing to judge: as alone


@pytest.mark.parametrize(("text", "expected"), [
    ("dasar tolol", "rejected"),                              # too short to tell its language
    ("🖕🖕🖕", "rejected"),                                     # no language at all
    ("Terima kasih atas bantuannya kemarin", "approved"),     # surely Indonesian: the model judges it
    ("Selamat pagi semua", "approved"),
    ("kamu memang bodoh dan tidak berguna", "rejected"),
])
def test_the_initial_policy_judges_what_the_issue_saw_passed_or_held(text, expected):
    # With nothing configured (no rules): the language detected as a worker detects it, then the
    # one decision function. A text of unsure language is judged by the model all the same.
    from moderation.models import ModerationPolicy
    from moderation.services.policy import DEFAULT_POLICY
    from moderation.text.language import detect
    from moderation.verdicts import decide

    policy = ModerationPolicy(version=1, **DEFAULT_POLICY)
    verdict = decide(policy, moderate(content_type="text", text=text), text=text, detection=detect(text))
    assert verdict.model_used and verdict.label == expected, verdict.explanation
