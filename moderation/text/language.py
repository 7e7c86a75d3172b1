"""Which language a text is in: lingua's offline detector, loaded once per process.

It tells apart only the configured languages (`MODERATION_LANGUAGES`, default en, id, ms: the
model's language and those the rules name), in lingua's high-accuracy mode. A wrong "not English" would keep
English abuse from the model, and lingua's low-accuracy mode (trigrams only, 3 MiB per
language; `MODERATION_LANGUAGE_LOW_ACCURACY`) made that mistake on short texts: "shut up you
stupid moron" read as Indonesian (0.87) even among these three languages. Texts of fewer than
MIN_WORDS words are unsure whatever the detector says; the policy treats an unsure detection as
"could be any language".

Memory (`python -m bench.memory`): lingua holds the three languages' models in about 48 MiB, but
loading them peaks near 90 MiB and leaves some 27 MiB of freed scratch that glibc keeps. So the
detector is loaded whole when it is built and the heap trimmed after. A django-q2 worker keeps it
(it detects every review before the provider call, and stores the answer on the content). A web
worker detects only in a policy's dry run, and does that in a short-lived subprocess
(`detect_many`), so it never holds the models.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from moderation.text.normal import normal_text

# Languages short texts rarely separate: a rule scoped to one applies to the others too.
CLOSE_LANGUAGES = {
    "id": {"ms"}, "ms": {"id"},
    "nb": {"nn", "da"}, "nn": {"nb"}, "da": {"nb"},
    "hr": {"sr", "bs"}, "sr": {"hr", "bs"}, "bs": {"hr", "sr"},
    "cs": {"sk"}, "sk": {"cs"},
}
SURE_AT = 0.5          # the leading candidate's confidence from which detection counts as sure
LEADING_RATIO = 0.5    # a candidate leads when its confidence is at least this share of the top one
MAX_CANDIDATES = 3
SAMPLE_CHARS = 2000    # detection reads the start of a long text: the language rarely changes after it
MIN_WORDS = 3          # "lol ok" read as Indonesian (0.91): too few words to tell
_WORD = re.compile(r"[^\W\d_]{2,}")

# Loads every n-gram model of every configured language (short texts use all of them).
WARM_UP_TEXT = "warm up the detector"

_lock = threading.Lock()
_detector = None


@dataclass(frozen=True)
class Detection:
    language: str                        # ISO 639-1 code when sure, "" when unsure
    candidates: tuple[tuple[str, float], ...]   # the leading candidates, best first

    @property
    def sure(self) -> bool:
        return bool(self.language)

    def leads(self, code: str) -> bool:
        """True when `code` or a language close to it is among the leading candidates."""
        near = {code} | CLOSE_LANGUAGES.get(code, set())
        return any(c in near for c, _ in self.candidates)

    def as_json(self) -> list:
        return [[c, v] for c, v in self.candidates]


def configured_languages() -> tuple[str, ...]:
    return tuple(settings.MODERATION_LANGUAGES)


def _build(codes: tuple[str, ...], low_accuracy: bool):
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    languages = []
    for code in codes:
        try:
            languages.append(Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())))
        except (AttributeError, ValueError):
            raise ImproperlyConfigured(f"MODERATION_LANGUAGES: {code!r} is not a language the detector knows") from None
    if len(languages) < 2:
        raise ImproperlyConfigured("MODERATION_LANGUAGES needs at least two languages to tell apart")
    builder = LanguageDetectorBuilder.from_languages(*languages)
    if low_accuracy:
        builder = builder.with_low_accuracy_mode()
    built = builder.build()
    built.compute_language_confidence_values(WARM_UP_TEXT)
    _trim_heap()
    return built


def _trim_heap() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing)."""
    libc = ctypes.util.find_library("c")
    trim = getattr(ctypes.CDLL(libc), "malloc_trim", None) if libc else None
    if trim is not None:
        trim(0)


def detector():
    """The process's detector, built on first use with every model loaded."""
    global _detector
    if _detector is None:
        with _lock:
            if _detector is None:
                _detector = _build(configured_languages(), settings.MODERATION_LANGUAGE_LOW_ACCURACY)
    return _detector


def _confidences(built, text: str) -> list[tuple[str, float]]:
    # Read in the normal form (docs/design.md, "The normal form"), as the rules and the model read
    # it: Cyrillic look-alikes sprinkled over an English insult no longer make it unsure which
    # language it is in.
    values = built.compute_language_confidence_values(normal_text(text[:SAMPLE_CHARS]))
    return [(v.language.iso_code_639_1.name.lower(), v.value) for v in values]


def detect_many(texts: list[str]) -> list[Detection]:
    """Detections of several texts, for a process that does not detect on its own (a web
    worker's policy dry run): in a short-lived subprocess, so this process never holds the
    detector's models (about 50 MiB, 90 while loading), unless it has them already. The same
    answers as `detect`: the subprocess reads the same settings and returns lingua's values."""
    texts = list(texts)
    if _detector is not None or not texts:
        return [detect(text) for text in texts]
    request = {"languages": configured_languages(), "low_accuracy": settings.MODERATION_LANGUAGE_LOW_ACCURACY,
               "texts": [text[:SAMPLE_CHARS] for text in texts]}
    run = subprocess.run([sys.executable, "-m", "moderation.text.language"], input=json.dumps(request),
                         capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    if run.returncode:
        raise RuntimeError(f"language detection in a subprocess failed:\n{run.stderr[-2000:]}")
    values = json.loads(run.stdout)
    return [_detection(text, [tuple(v) for v in text_values]) for text, text_values in zip(texts, values, strict=True)]


def detect(text: str) -> Detection:
    return _detection(text, _confidences(detector(), text))


def _detection(text: str, values: list[tuple[str, float]]) -> Detection:
    """The detection lingua's confidence values (best first) make of a text."""
    top = values[0][1] if values else 0.0
    if top <= 0:
        return Detection(language="", candidates=())
    leading = tuple((code, round(value, 3)) for code, value in values[:MAX_CANDIDATES] if value >= top * LEADING_RATIO)
    sure = top >= SURE_AT and len(_WORD.findall(text, 0, SAMPLE_CHARS)) >= MIN_WORDS
    return Detection(language=leading[0][0] if sure else "", candidates=leading)


if __name__ == "__main__":  # detect_many's subprocess: a JSON request on stdin, lingua's values out
    _request = json.load(sys.stdin)
    _built = _build(tuple(_request["languages"]), _request["low_accuracy"])
    json.dump([_confidences(_built, text) for text in _request["texts"]], sys.stdout)
