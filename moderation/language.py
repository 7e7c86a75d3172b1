"""Which language a text is in: lingua's offline detector, loaded once per process.

It tells apart only the configured languages (`MODERATION_LANGUAGES`, default en, id, ms: the
model's language and those the rules name), in lingua's high-accuracy mode: about 25 MiB of
models per language, loaded in the worker on first use. A wrong "not English" would keep
English abuse from the model, and lingua's low-accuracy mode (trigrams only, 3 MiB per
language; `MODERATION_LANGUAGE_LOW_ACCURACY`) made that mistake on short texts: "shut up you
stupid moron" read as Indonesian (0.87) even among these three languages. Texts of fewer than
MIN_WORDS words are unsure whatever the detector says; the policy treats an unsure detection as
"could be any language".
"""

from __future__ import annotations

import re
import threading
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

_lock = threading.Lock()
_detector = None
_languages: tuple[str, ...] = ()


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
    return builder.build()


def detector():
    """The process's detector, built on first use (its models load lazily, per language seen)."""
    global _detector
    if _detector is None:
        with _lock:
            if _detector is None:
                _detector = _build()
    return _detector


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
