"""The default provider runs the real alt-profanity-check model, offline."""

from __future__ import annotations

import pytest

from moderation.providers import ModerationInput, UnsupportedContent, get_provider
from tests.helpers import count_model_calls


def moderate(**fields):
    return get_provider("local").moderate(ModerationInput(idempotency_key="k", **fields))


def test_friendly_text_scores_low_and_is_not_flagged():
    result = moderate(content_type="text", text="Thanks for the lovely dinner, see you on Sunday!")
    assert result.category_scores["profanity"] < 0.2
    assert result.flagged is False
    assert result.model.startswith("alt-profanity-check-")


def test_abusive_text_scores_high_and_is_flagged():
    result = moderate(content_type="text", text="shut up you fucking idiot")
    assert result.category_scores["profanity"] > 0.9
    assert result.flagged is True and result.categories == {"profanity": True}


def test_metadata_is_judged_by_its_worst_string_value():
    clean = moderate(content_type="metadata", metadata={"title": "Holiday photos", "tags": ["beach", "sun"]})
    dirty = moderate(content_type="metadata", metadata={"title": "Holiday", "comments": [{"body": "you piece of shit"}]})
    assert clean.category_scores["profanity"] < 0.5 < dirty.category_scores["profanity"]


@pytest.mark.parametrize("kind", ["image", "audio"])
def test_media_is_refused_as_unsupported(kind):
    with pytest.raises(UnsupportedContent) as error:
        moderate(content_type=kind, media_url="https://example.com/file")
    assert error.value.retryable is False


def test_the_result_has_the_openai_moderation_shape():
    result = moderate(content_type="text", text="hello")
    assert set(result.categories) == set(result.category_scores) == {"profanity"}
    assert 0.0 <= result.category_scores["profanity"] <= 1.0


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
    assert together[3].category_scores == {"profanity": 0.0}  # nothing to judge: as alone
