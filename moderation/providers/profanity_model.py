"""alt-profanity-check's model as plain numbers: its probabilities without scikit-learn.

The package ships a fitted `TfidfVectorizer` and a `CalibratedClassifierCV` (sigmoid calibration
of `LinearSVC` folds) as joblib pickles. Unpickling them imports scikit-learn, SciPy and NumPy:
about 95 MiB of a worker's memory for a model of some 15,000 words (`python -m bench.memory`).
A prediction needs only, per vocabulary word, its idf and its weight in each fold, and per fold
an intercept and the calibration's (a, b). `extract()` reads them, in a subprocess so the
worker never imports scikit-learn, and `CompactModel` predicts with them in pure Python:

    x_w  = count of word w in the lowercased text * idf_w, then x / ||x||_2    (TfidfVectorizer)
    d_k  = sum_w x_w * coef_kw + intercept_k                                  (LinearSVC fold k)
    p_k  = 1 / (1 + exp(a_k * d_k + b_k))                                     (sigmoid calibration)
    p    = mean of p_k over the folds                                         (CalibratedClassifierCV)

`extract()` refuses a fitted model whose settings this arithmetic does not cover (other
n-grams, norms, calibrations...), so a new package version cannot silently predict otherwise;
tests/moderation/test_profanity_model.py compares with `profanity_check.predict_prob` to 1e-9.

The parameters are cached as JSON under `var/cache/`, keyed by a hash of the package's pickles;
where that directory is read-only (a hardened unit) each process extracts them again (a second
or two, once).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
from array import array
from collections import Counter
from pathlib import Path

logger = logging.getLogger(__name__)

FORMAT = 1  # bump when the extracted fields or the arithmetic change
SOURCE_FILES = ("vectorizer.joblib", "model.joblib")
CACHE_DIR = Path(__file__).resolve().parents[2] / "var" / "cache"


class ModelConversionError(RuntimeError):
    """The installed model cannot be read into the compact form (see the message)."""


class CompactModel:
    """Probabilities of profanity for a list of texts, from the extracted parameters."""

    def __init__(self, params: dict):
        words = params["words"]
        self._index = {word: i for i, word in enumerate(words)}
        self._idf = array("d", params["idf"])
        self._folds = [(array("d", f["coef"]), f["intercept"], f["a"], f["b"]) for f in params["folds"]]
        if not self._folds or any(len(coef) != len(words) for coef, *_ in self._folds) or len(self._idf) != len(words):
            raise ModelConversionError("the extracted parameters are inconsistent: extract them again")
        self._token = re.compile(params["token_pattern"])

    def __call__(self, texts) -> list[float]:
        return [self._predict(text) for text in texts]

    def _predict(self, text: str) -> float:
        index, idf = self._index, self._idf
        counts = Counter(index[t] for t in self._token.findall(text.lower()) if t in index)
        # In feature order, as scikit-learn's sparse rows are, so the sums add up in the same order.
        features = sorted(counts)
        weights = [counts[j] * idf[j] for j in features]
        norm = math.sqrt(sum(w * w for w in weights))
        if norm:
            weights = [w / norm for w in weights]
        total = 0.0
        for coef, intercept, a, b in self._folds:
            decision = sum(w * coef[j] for w, j in zip(weights, features, strict=True)) + intercept
            total += _expit(-(a * decision + b))
        return total / len(self._folds)


def _expit(z: float) -> float:
    """1 / (1 + e^-z) without overflow for large |z| (scipy.special.expit)."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def source_dir() -> Path:
    """The installed package's data directory, found without importing it (importing loads the model)."""
    spec = importlib.util.find_spec("profanity_check")
    if spec is None or not spec.submodule_search_locations:
        raise ModelConversionError("alt-profanity-check is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def fingerprint() -> str:
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    for name in SOURCE_FILES:
        digest.update((source_dir() / name).read_bytes())
    return digest.hexdigest()


def load() -> CompactModel:
    """The compact model: from the cache when it matches the installed pickles, else extracted."""
    key = fingerprint()
    path = CACHE_DIR / f"profanity-check-{key[:24]}.json"
    try:
        params = json.loads(path.read_text())
        if params.get("fingerprint") == key:
            return CompactModel(params)
    except (OSError, ValueError):
        pass  # no cache yet, or a damaged one: extract again
    params = _extract_in_subprocess()
    params["fingerprint"] = key
    _store(path, params)
    return CompactModel(params)


def _extract_in_subprocess() -> dict:
    # -I: no user site, no PYTHON* variables, and not this file's directory on sys.path (its
    # http.py would shadow the standard library's).
    run = subprocess.run([sys.executable, "-I", __file__], capture_output=True, text=True, timeout=300)
    if run.returncode:
        raise ModelConversionError(f"extracting the local model's parameters failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def _store(path: Path, params: dict) -> None:
    """Write the cache atomically (a reader sees the old file or the whole new one); a read-only
    directory only costs the next process an extraction."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump(params, out)
        os.chmod(out.name, 0o644)  # web and worker units may run as different users
        os.replace(out.name, path)
    except OSError as exc:
        logger.info("local model: parameters not cached (%s); each process extracts them", exc)


def extract() -> dict:
    """Read the fitted pickles (imports scikit-learn) into plain lists; refuse what the compact
    arithmetic does not reproduce."""
    import joblib
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
    from sklearn.svm import LinearSVC

    vectorizer = joblib.load(source_dir() / "vectorizer.joblib")
    model = joblib.load(source_dir() / "model.joblib")
    expected = {"analyzer": "word", "lowercase": True, "ngram_range": (1, 1), "norm": "l2", "use_idf": True,
                "sublinear_tf": False, "binary": False, "tokenizer": None, "preprocessor": None,
                "strip_accents": None, "input": "content"}
    settings = vectorizer.get_params()
    wrong = {k: settings.get(k) for k, v in expected.items() if settings.get(k) != v}
    if not isinstance(vectorizer, TfidfVectorizer) or wrong:
        raise ModelConversionError(f"unsupported vectorizer {type(vectorizer).__name__} {wrong}")
    vocabulary = vectorizer.vocabulary_
    stop_words = ENGLISH_STOP_WORDS if settings["stop_words"] == "english" else set(settings["stop_words"] or ())
    if stop_words & vocabulary.keys():  # unigrams: stop words matter only if the vocabulary has some
        raise ModelConversionError("the vocabulary holds stop words: the compact tokenizer would count them")
    if (not isinstance(model, CalibratedClassifierCV) or model.method != "sigmoid"
            or list(model.classes_) != [0, 1]):
        raise ModelConversionError(f"unsupported classifier {model!r}")
    folds = []
    for fold in model.calibrated_classifiers_:
        svc, (calibrator,) = fold.estimator, fold.calibrators
        if not isinstance(svc, LinearSVC) or svc.coef_.shape != (1, len(vocabulary)):
            raise ModelConversionError(f"unsupported fold estimator {svc!r}")
        folds.append({"coef": svc.coef_[0].tolist(), "intercept": float(svc.intercept_[0]),
                      "a": float(calibrator.a_), "b": float(calibrator.b_)})
    words = sorted(vocabulary, key=vocabulary.get)
    if [vocabulary[w] for w in words] != list(range(len(words))):
        raise ModelConversionError("the vocabulary's indices are not 0..n-1")
    return {"format": FORMAT, "token_pattern": settings["token_pattern"], "words": words,
            "idf": vectorizer.idf_.tolist(), "folds": folds}


if __name__ == "__main__":
    json.dump(extract(), sys.stdout)
