"""The local model read into plain numbers predicts what alt-profanity-check predicts, without
scikit-learn in the process (moderation/providers/profanity_model.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from moderation.providers import profanity_model
from moderation.providers.local import predictor

HANDWRITTEN = [
    "", " ", "hello", "Thanks for the lovely dinner, see you on Sunday!", "shut up you fucking idiot",
    "SHUT UP YOU FUCKING IDIOT", "you piece of shit", "what the hell is this", "I love puppies and kittens",
    "fuck fuck fuck fuck fuck fuck", "f u c k", "a", "the and of to", "idiot idiot nice nice nice",
    "kamu bodoh sekali", "du bist ein Idiot", "😀 🙃 ✨", "123 456 7890", "crap!!!???", "damn_it", "ass-hat",
    "Ünïcödé wörds and naïve café", "x" * 5000, "stupid " * 300, "http://example.com/shit?x=1",
    "line one\nline two\tfuck\r\nend", "You're an absolute moron, aren't you?",
]


@pytest.fixture(scope="module")
def reference():
    from profanity_check import predict_prob  # imports scikit-learn: only the test process does

    return predict_prob


@pytest.fixture(scope="module")
def corpus():
    """The handwritten texts and 3,000 generated from the model's own vocabulary (every word it
    knows can appear), stop words, unknown words, punctuation and case."""
    words = _vocabulary()
    noise = ["the", "and", "you", "zzqx", "lol", "!!", ",", "...", "DAMN", "Fuck", "42", "é", "\n"]
    rng = random.Random(17)
    generated = [" ".join(rng.choice(words if rng.random() < 0.7 else noise) for _ in range(rng.randint(1, 40)))
                 for _ in range(3000)]
    return HANDWRITTEN + generated


def _vocabulary() -> list[str]:
    from profanity_check.profanity_check import vectorizer

    return sorted(vectorizer.vocabulary_)


def test_probabilities_equal_alt_profanity_checks_to_1e_9(corpus, reference):
    expected = reference(corpus)
    got = predictor()(corpus)
    assert len(got) == len(expected) == len(corpus)
    worst = max(range(len(corpus)), key=lambda i: abs(got[i] - expected[i]))
    assert abs(got[worst] - expected[worst]) <= 1e-9, corpus[worst]
    # The corpus exercises both sides of the flag, not only clean text.
    assert sum(p >= 0.5 for p in expected) > 300 and sum(p < 0.5 for p in expected) > 300


def test_a_batch_scores_each_text_as_alone(corpus):
    texts = corpus[:200]
    assert predictor()(texts) == [predictor()([t])[0] for t in texts]


def test_the_worker_does_not_import_scikit_learn():
    code = ("import sys; from moderation.providers.local import predictor; p = predictor()(['you idiot']); "
            "print(sorted(m for m in ('sklearn', 'scipy', 'numpy', 'joblib') if m in sys.modules)); print(p[0])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, score = run.stdout.split("\n")[:2]
    assert imported == "[]"
    assert float(score) > 0.5


def test_a_stale_or_damaged_cache_is_replaced_by_a_fresh_extraction(tmp_path, monkeypatch, corpus, reference):
    monkeypatch.setattr(profanity_model, "CACHE_DIR", tmp_path)
    profanity_model.load()
    (cached,) = tmp_path.glob("profanity-check-*.json")
    cached.write_text('{"fingerprint": "')  # cut short mid-write by hand: the real writer renames atomically
    model = profanity_model.load()
    assert json.loads(cached.read_text())["fingerprint"] == profanity_model.fingerprint()
    assert abs(model(corpus[:50])[4] - reference(corpus[:50])[4]) <= 1e-9


def test_a_read_only_cache_directory_still_loads_the_model(tmp_path, monkeypatch):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    monkeypatch.setattr(profanity_model, "CACHE_DIR", blocked / "cache")
    assert profanity_model.load()(["you idiot"])[0] > 0.5


def test_a_model_the_arithmetic_does_not_cover_is_refused(monkeypatch):
    from sklearn.feature_extraction.text import TfidfVectorizer

    original = TfidfVectorizer.get_params

    def bigrams(self, deep=True):
        return {**original(self, deep), "ngram_range": (1, 2)}

    monkeypatch.setattr(TfidfVectorizer, "get_params", bigrams)
    with pytest.raises(profanity_model.ModelConversionError, match="ngram_range"):
        profanity_model.extract()


def test_inconsistent_parameters_are_refused():
    with pytest.raises(profanity_model.ModelConversionError, match="inconsistent"):
        profanity_model.CompactModel({"words": ["a", "b"], "idf": [1.0], "token_pattern": r"\w+",
                                      "folds": [{"coef": [1.0, 2.0], "intercept": 0.0, "a": 1.0, "b": 0.0}]})
