"""The default model run with NumPy alone (moderation/providers/local_model.py) reads each text
exactly as scikit-learn's HashingVectorizers did when it was trained (training/train.py), and
scores what the fitted weights score; the worker process never imports scikit-learn."""

from __future__ import annotations

import functools
import random
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moderation.providers import local_model
from moderation.text.normal import normalize

pytest.importorskip("sklearn")

from training.train import featurize  # noqa: E402 - after the skip: training needs scikit-learn


def random_texts(count: int, seed: int) -> list[str]:
    """Texts over ASCII, Latin, Cyrillic, Arabic, CJK, emoji (with skin tones and joiners) and
    whitespace of every kind, up to 80 characters; some in the normal form, as the provider sends."""
    rng = random.Random(seed)
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x400, 0x4FF), (0x600, 0x6FF), (0x4E00, 0x9FFF), (0x1F300, 0x1FAFF),
             (0x1F3FB, 0x1F3FF), (0x2000, 0x200F), (0x9, 0xD), (0xE000, 0xE0FF), (0x10000, 0x10FFF)]
    texts = []
    for k in range(count):
        chars = []
        for _ in range(rng.randint(0, 80)):
            low, high = rng.choice(pools)
            chars.append(chr(rng.randint(low, high)))
        text = "".join(chars)
        texts.append(normalize(text).text if k % 2 else text)
    return texts


FIXED = ["", " ", "a", "ab", "a b c", "  you   idiot  ", "dasar tolol", "🖕🖕🖕", "Terima kasih atas bantuannya",
         "x\u00a0y\u2003z", "日本語のテキスト", "كلمة عربية", "I will k1ll you", "f.u.c.k you", "l'été déjà",
         "word " * 300]


model_once = functools.cache(local_model.load)


def as_dict(rows, columns, values) -> dict[tuple[int, int], float]:
    return {(int(r), int(c)): float(v) for r, c, v in zip(rows, columns, values, strict=True) if v != 0}


def test_features_equal_scikit_learns_on_many_texts():
    texts = FIXED + random_texts(3000, seed=47)
    model = local_model.load()
    reference = featurize(texts).tocoo()

    got = model.features(texts)

    expected = as_dict(reference.row, reference.col, reference.data)
    found = as_dict(*got)
    assert found.keys() == expected.keys()
    assert max(abs(found[k] - expected[k]) for k in expected) < 1e-12


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60), min_size=1, max_size=8))
def test_features_equal_scikit_learns_on_any_unicode(texts):
    model = model_once()
    reference = featurize(texts).tocoo()
    expected = as_dict(reference.row, reference.col, reference.data)
    found = as_dict(*model.features(texts))
    assert found.keys() == expected.keys()
    assert all(abs(found[k] - expected[k]) < 1e-12 for k in expected)


def test_scores_equal_the_fitted_weights_over_scikit_learns_features():
    texts = FIXED + random_texts(500, seed=7)
    model = local_model.load()
    weights = model.weights.astype(np.float64)
    expected = 1.0 / (1.0 + np.exp(-(featurize(texts) @ weights + model.bias)))

    assert np.abs(model.predict(texts) - expected).max() < 1e-9


def test_murmurhash_equals_scikit_learns():
    from sklearn.utils import murmurhash3_32

    items = [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", "日本".encode(), "🖕🏽".encode(), bytes(range(256))]
    items += [bytes(random.Random(k).getrandbits(8) for _ in range(k % 40)) for k in range(500)]
    assert local_model.murmurhash3_32(items).tolist() == [murmurhash3_32(i, positive=False) for i in items]


def test_a_batch_scores_each_text_as_it_would_alone():
    model = local_model.load()
    texts = ["you idiot", "selamat pagi", "", "🖕", "a" * 500]
    together = model.predict(texts)
    for k, text in enumerate(texts):
        assert np.allclose(together[k], model.predict([text])[0], atol=1e-12)


def test_the_worker_reads_the_model_without_importing_scikit_learn_or_scipy():
    code = ("import sys; from moderation.providers.local import predictor; p = predictor()(['you idiot']); "
            "assert p[0]['insult'] > 0.5, p; "
            "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_a_damaged_or_foreign_model_file_is_refused_with_a_clear_error(tmp_path):
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a model")
    with pytest.raises(local_model.ModelFileError, match="cannot read the local model"):
        local_model.load(broken)
    with pytest.raises(local_model.ModelFileError, match="scores"):
        local_model.load(categories=("toxicity",))


def test_the_default_policy_takes_the_thresholds_the_training_chose():
    # `make model` chooses them on its calibration split and writes them into the model file; the
    # initial policy (moderation/services/policy.py) must say the same, or a retrained model would
    # be judged by the last one's thresholds.
    from moderation.services.policy import DEFAULT_POLICY

    chosen = local_model.load().meta["thresholds"]
    assert DEFAULT_POLICY["category_thresholds"] == {
        category: {"review": levels["review"], "reject": levels["reject"]} for category, levels in chosen.items()}


def test_the_model_file_ships_its_held_out_operating_points():
    from training.train import OPERATING_THRESHOLDS

    model = local_model.load()
    assert set(model.operating_points) == set(model.categories)
    for category, found in model.operating_points.items():
        stored = model.meta["operating_points"][category]
        assert (found.texts, found.positives) == (stored["texts"], stored["positives"]) and 0 < found.positives < found.texts
        assert tuple(p.threshold for p in found.points) == OPERATING_THRESHOLDS
        assert [[p.threshold, p.precision, p.recall, p.share] for p in found.points] == stored["points"]
        # Raising a threshold flags fewer texts and finds fewer of the category, never more.
        recalls, shares = [p.recall for p in found.points], [p.share for p in found.points]
        assert recalls == sorted(recalls, reverse=True) and shares == sorted(shares, reverse=True), category


def test_malformed_operating_points_are_refused_with_a_clear_error(tmp_path):
    import io
    import json

    with np.load(local_model.MODEL_PATH, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    meta = json.loads(str(arrays["meta"]))
    meta["operating_points"]["hate"]["points"][3] = [0.2, 1.5, 0.3, 0.1]
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, "meta": np.array(json.dumps(meta))})
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(buffer.getvalue())

    with pytest.raises(local_model.ModelFileError, match="operating points of hate: not a figure between 0 and 1: 1.5"):
        local_model.load(damaged)
    with pytest.raises(local_model.ModelFileError, match="operating points of hate: not a figure between 0 and 1: 1.5"):
        local_model.read_operating_points(damaged)  # the policy page's reader refuses it alike
    del meta["operating_points"]
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, "meta": np.array(json.dumps(meta))})
    damaged.write_bytes(buffer.getvalue())
    assert local_model.load(damaged).operating_points == {}  # a file from before they were recorded


def test_the_operating_points_read_from_the_meta_alone_are_the_loaded_models():
    assert local_model.read_operating_points() == local_model.load().operating_points
    with pytest.raises(local_model.ModelFileError, match=r"scores \['insult', 'threat'.*not \['harassment'"):
        local_model.read_operating_points(categories=("harassment", "violence", "hate", "sexual", "profanity"))
