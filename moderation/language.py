"""Which language a text is in: lingua's offline detector, loaded once per process.

It tells apart only the configured languages (`MODERATION_LANGUAGES`, default en, id, ms: the
model's language and those the rules name), in lingua's high-accuracy mode: about 25 MiB of
models per language, loaded in the worker on first use. A wrong "not English" would keep
English abuse from the model, and lingua's low-accuracy mode (trigrams only, 3 MiB per
language; `MODERATION_LANGUAGE_LOW_ACCURACY`) made that mistake on short texts: "shut up you
stupid moron" read as Indonesian (0.87) even among these three languages. Texts of fewer than
MIN_WORDS words are unsure whatever the detector says; the policy treats an unsure detection as
"could be any language".

Memory (`python -m bench.memory`): the three languages' models take about 75 MiB as lingua loads
them, of which some 27 MiB are its loading's freed scratch that glibc keeps; the detector is
therefore loaded whole when it is built and the heap trimmed after, leaving about 48 MiB. A
worker keeps it (every review is detected). Web processes detect only in a policy's dry run
(reviews carry the language their worker detected): the dry run detects inside `transient()`,
which drops the models again when it ends, unless the process keeps them for its own use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

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
_resident = False  # a detection outside transient() happened: this process keeps the models
_transient_users = 0
_in_transient = threading.local()


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


def _build():
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    codes = configured_languages()
    languages = []
    for code in codes:
        try:
            languages.append(Language.from_iso_code_639_1(getattr(IsoCode639_1, code.upper())))
        except (AttributeError, ValueError):
            raise ImproperlyConfigured(f"MODERATION_LANGUAGES: {code!r} is not a language the detector knows") from None
    if len(languages) < 2:
        raise ImproperlyConfigured("MODERATION_LANGUAGES needs at least two languages to tell apart")
    builder = LanguageDetectorBuilder.from_languages(*languages)
    if settings.MODERATION_LANGUAGE_LOW_ACCURACY:
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
    global _detector, _resident
    if not getattr(_in_transient, "depth", 0):
        _resident = True
    if _detector is None:
        with _lock:
            if _detector is None:
                _detector = _build()
    return _detector


@contextmanager
def transient():
    """Detections inside do not keep the detector's models in memory: when the last transient
    user leaves, the models are unloaded, unless a detection outside transient() made this
    process keep them. Results are the same; a later detection loads the models again."""
    global _transient_users, _detector
    with _lock:
        _transient_users += 1
    _in_transient.depth = getattr(_in_transient, "depth", 0) + 1
    try:
        yield
    finally:
        _in_transient.depth -= 1
        with _lock:
            _transient_users -= 1
            if _transient_users == 0 and not _resident and _detector is not None:
                # A detection running in another thread still holds the old detector; lingua
                # reloads what it needs for it, and the next one builds a new detector.
                _detector.unload_language_models()
                _detector = None
                _trim_heap()


def detect(text: str) -> Detection:
    values = detector().compute_language_confidence_values(text[:SAMPLE_CHARS])
    top = values[0].value if values else 0.0
    if top <= 0:
        return Detection(language="", candidates=())
    leading = tuple(
        (v.language.iso_code_639_1.name.lower(), round(v.value, 3))
        for v in values[:MAX_CANDIDATES]
        if v.value >= top * LEADING_RATIO
    )
    sure = top >= SURE_AT and len(_WORD.findall(text, 0, SAMPLE_CHARS)) >= MIN_WORDS
    return Detection(language=leading[0][0] if sure else "", candidates=leading)
