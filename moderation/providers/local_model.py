"""The default model (training/, docs/model-card.md) run with NumPy alone.

It was trained with scikit-learn (`make model`, training/train.py): two `HashingVectorizer`s over
a text's normal form, character n-grams within words (`char_wb`, 2 to 5) and words and word pairs
(`(?u)\\b\\w\\w+\\b`, 1 to 2), each row scaled to unit length, then one linear model per
category whose Platt calibration (a sigmoid fitted on a held-out split) is folded into its
weights. A worker needs none of scikit-learn for that: this module cuts the same n-grams, hashes
them with the same MurmurHash3 (x86, 32-bit, seed 0, over the UTF-8 bytes), vectorised over every
n-gram of a batch, and multiplies. tests/moderation/test_local_model.py checks the features
against scikit-learn's on many texts (arbitrary Unicode among them) and the scores against the
fitted model's.

    index = |h| mod n_features, value = +1 if h >= 0 else -1   (alternate_sign)
    x     = counts per index / ||counts||_2, per vectorizer        (norm="l2")
    p_c   = 1 / (1 + exp(-(x . w_c + b_c)))                        (Platt folded into w_c, b_c)

The file (moderation/data/local_model.npz, about 2 MiB) is read once per process; the model
holds no state between calls, so threads share it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parents[1] / "data" / "local_model.npz"
FORMAT = 1

_WHITE_SPACES = re.compile(r"\s\s+")
_M = np.uint32(0xFFFFFFFF)
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


class ModelFileError(RuntimeError):
    """The model file is missing, damaged or of another format (see the message)."""


def char_wb_ngrams(text: str, low: int, high: int) -> list[str]:
    """scikit-learn's `_char_wb_ngrams`: n-grams inside each word padded with a space."""
    grams: list[str] = []
    append = grams.append
    for word in _WHITE_SPACES.sub(" ", text).split():
        w = f" {word} "
        size = len(w)
        for n in range(low, high + 1):
            if size <= n:
                append(w)  # a short word counts once, whatever n
                break
            grams.extend([w[i:i + n] for i in range(size - n + 1)])
    return grams


def word_ngrams(text: str, pattern: re.Pattern, low: int, high: int) -> list[str]:
    """scikit-learn's `_word_ngrams` over the token pattern's matches (no stop words)."""
    tokens = pattern.findall(text)
    grams = list(tokens) if low == 1 else []
    for n in range(max(low, 2), min(high, len(tokens)) + 1):
        grams.extend(" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return grams


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmurhash3_32(items: list[bytes]) -> np.ndarray:
    """MurmurHash3_x86_32 (seed 0) of each byte string, as signed 32-bit integers: scikit-learn's
    `murmurhash3_bytes_s32`. Vectorised over the strings of one length at a time."""
    out = np.empty(len(items), dtype=np.int32)
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        by_length[len(item)].append(i)
    with np.errstate(over="ignore"):
        for length, where in by_length.items():
            data = np.frombuffer(b"".join([items[i] for i in where]), dtype=np.uint8).reshape(len(where), length)
            h = np.zeros(len(where), dtype=np.uint32)
            blocks = length // 4
            if blocks:
                words = np.ascontiguousarray(data[:, :blocks * 4]).view("<u4").reshape(len(where), blocks)
                for b in range(blocks):
                    k = words[:, b].astype(np.uint32) * _C1
                    k = _rotl(k, 15) * _C2
                    h ^= k
                    h = _rotl(h, 13) * np.uint32(5) + np.uint32(0xE6546B64)
            tail = length & 3
            if tail:
                k = np.zeros(len(where), dtype=np.uint32)
                for t in range(tail - 1, -1, -1):
                    k = (k << np.uint32(8)) | data[:, blocks * 4 + t].astype(np.uint32)
                k = _rotl(k * _C1, 15) * _C2
                h ^= k
            h ^= np.uint32(length)
            h ^= h >> np.uint32(16)
            h *= np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h *= np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
            out[where] = h.view(np.int32)
    return out


def hashed(grams_per_text: list[list[str]], n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, index, value) of each distinct (text, index) pair, values summed and each row scaled
    to unit length: the rows of scikit-learn's `HashingVectorizer(norm="l2", alternate_sign=True)`."""
    lengths = np.fromiter((len(g) for g in grams_per_text), dtype=np.int64, count=len(grams_per_text))
    flat = [g.encode("utf-8", "surrogatepass") for grams in grams_per_text for g in grams]
    if not flat:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    h = murmurhash3_32(flat).astype(np.int64)
    index = np.where(h == -(2**31), (2**31 - 1 - (n_features - 1)) % n_features, np.abs(h) % n_features)
    sign = np.where(h >= 0, 1.0, -1.0)
    rows = np.repeat(np.arange(len(grams_per_text), dtype=np.int64), lengths)
    keys, inverse = np.unique(rows * n_features + index, return_inverse=True)
    values = np.bincount(inverse, weights=sign)
    rows, index = keys // n_features, keys % n_features
    norms = np.sqrt(np.bincount(rows, weights=values * values, minlength=len(grams_per_text)))
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(norms[rows] > 0, values / norms[rows], 0.0)
    return rows, index, values


@dataclass(frozen=True)
class OperatingPoint:
    """What one threshold gives on the held-out split of the model's training data: the share of
    texts scored at or above it that are the category (precision), the share of the category's
    texts scored at or above it (recall), and the share of all texts at or above it. None: no
    figure (nothing scored that high; no text of the category)."""

    threshold: float
    precision: float | None
    recall: float | None
    share: float | None


@dataclass(frozen=True)
class CategoryPoints:
    """One category's operating points (training/train.py, `operating_points`), over `texts`
    held-out texts whose source tells about the category, `positives` of them the category."""

    texts: int
    positives: int
    points: tuple[OperatingPoint, ...]


def _figure(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"not a figure between 0 and 1: {value!r}")
    return float(value)


def operating_points_of(meta: dict) -> dict[str, CategoryPoints]:
    """The operating points a model file's meta holds, per category; {} for a file trained before
    they were recorded. ValueError when they are malformed."""
    recorded = meta.get("operating_points", {})
    if not isinstance(recorded, dict):
        raise ValueError(f"operating points: expected an object per category, not {type(recorded).__name__}")
    found = {}
    for category, stored in recorded.items():
        try:
            points = tuple(OperatingPoint(float(_figure(t)), _figure(p), _figure(r), _figure(s))
                           for t, p, r, s in stored["points"])
            found[category] = CategoryPoints(int(stored["texts"]), int(stored["positives"]), points)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"operating points of {category}: {exc}") from exc
    return found


@dataclass(frozen=True)
class LocalModel:
    categories: tuple[str, ...]
    weights: np.ndarray      # (char features + word features, categories), float32
    bias: np.ndarray         # (categories,), float64
    char_features: int
    word_features: int
    char_range: tuple[int, int]
    word_range: tuple[int, int]
    token_pattern: re.Pattern
    meta: dict
    # Per category, precision, recall and the share flagged at thresholds 0.05 to 0.95 on the
    # held-out split (docs/model-card.md, "Operating points"); {} for an older file.
    operating_points: dict[str, CategoryPoints]

    def features(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stacked rows (char then word features) of each text, as (row, column, value)."""
        char = hashed([char_wb_ngrams(t, *self.char_range) for t in texts], self.char_features)
        word = hashed([word_ngrams(t, self.token_pattern, *self.word_range) for t in texts], self.word_features)
        return (np.concatenate([char[0], word[0]]), np.concatenate([char[1], word[1] + self.char_features]),
                np.concatenate([char[2], word[2]]))

    def decision(self, texts: list[str]) -> np.ndarray:
        rows, columns, values = self.features(texts)
        contributions = self.weights[columns] * values[:, None]
        totals = np.zeros((len(texts), len(self.categories)))
        np.add.at(totals, rows, contributions)
        return totals + self.bias

    def predict(self, texts: list[str]) -> np.ndarray:
        """Calibrated probabilities, (texts, categories), for texts in their normal form."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, len(self.categories)))
        return 1.0 / (1.0 + np.exp(-self.decision(texts)))

    def __call__(self, texts: list[str]) -> list[dict[str, float]]:
        return [dict(zip(self.categories, map(float, row), strict=True)) for row in self.predict(texts)]


def _meta(stored: np.lib.npyio.NpzFile, path: Path) -> dict:
    meta = json.loads(str(stored["meta"]))
    if meta.get("format") != FORMAT:
        raise ModelFileError(f"{path}: format {meta.get('format')}, this code reads format {FORMAT}: run `make model`")
    return meta


def _check_categories(meta: dict, path: Path, categories: tuple[str, ...] | None) -> tuple[str, ...]:
    if categories is not None and tuple(meta["categories"]) != tuple(categories):
        raise ModelFileError(f"{path} scores {meta['categories']}, not {list(categories)}: run `make model`")
    return tuple(meta["categories"])


def _points(meta: dict, path: Path) -> dict[str, CategoryPoints]:
    try:
        return operating_points_of(meta)
    except ValueError as exc:
        raise ModelFileError(f"{path}: {exc}: run `make model`") from exc


def read_operating_points(path: Path = MODEL_PATH, *, categories: tuple[str, ...] | None = None) -> dict[str, CategoryPoints]:
    """The operating points in the model file `path`, read from its `meta` member alone: the
    weights are neither decompressed nor kept (the policy page's web process needs only these
    figures). ModelFileError as `load`."""
    try:
        with np.load(path, allow_pickle=False) as stored:  # an NpzFile reads a member when asked for it
            meta = _meta(stored, path)
    except (OSError, KeyError, ValueError) as exc:
        raise ModelFileError(f"cannot read the local model {path}: {exc}") from exc
    _check_categories(meta, path, categories)
    return _points(meta, path)


def load(path: Path = MODEL_PATH, *, categories: tuple[str, ...] | None = None) -> LocalModel:
    """The model in `path`; ModelFileError when it is unreadable, or scores other `categories`
    than the caller's."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            meta = _meta(stored, path)
            weights = stored["weights"].astype(np.float32)
            bias = stored["bias"].astype(np.float64)
    except (OSError, KeyError, ValueError) as exc:
        raise ModelFileError(f"cannot read the local model {path}: {exc}") from exc
    categories = _check_categories(meta, path, categories)
    points = _points(meta, path)
    expected = (meta["char_features"] + meta["word_features"], len(categories))
    if weights.shape != expected or bias.shape != (len(categories),):
        raise ModelFileError(f"{path}: weights {weights.shape}, bias {bias.shape}; expected {expected}")
    return LocalModel(categories=categories, weights=weights, bias=bias, char_features=meta["char_features"],
                      word_features=meta["word_features"], char_range=tuple(meta["char_range"]),
                      word_range=tuple(meta["word_range"]), token_pattern=re.compile(meta["token_pattern"]), meta=meta,
                      operating_points=points)
