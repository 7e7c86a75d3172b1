"""What erasure looks for in the text it keeps (docs/design.md, invariant 16): quotes of the
erased content, and of the words people wrote about it, and how a text loses them.

Pure functions, no database: moderation/privacy/erasure.py reads the rows and writes them back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from moderation.models import ERASED
from moderation.text.values import text_values

# A run of this many characters of the content, anywhere in other text, is a quote of it (an
# error body echoing the input, cut at either end). Shorter texts are looked for whole.
QUOTE_MIN = 16
# Metadata values shorter than this are not looked for inside other text (a "en" or a "1" would
# match everywhere); the metadata itself is cleared whatever its size.
METADATA_MIN_QUOTE = 4
# The keys of a stored body (a notification's payload, an event's detail) whose values are what
# people wrote, or what the platform said with their words: a moderator's or an operator's reason,
# and the explanation built from it (moderation.transparency.reasons). They are replaced whole.
WORDS_KEYS = frozenset({"reason", "explanation"})


@dataclass(frozen=True)
class Quotes:
    """What to look for in other columns: every QUOTE_MIN-character run of the longer texts
    (`runs`), and the shorter ones whole, longest first (`whole`)."""

    runs: frozenset[str]
    whole: tuple[str, ...]



def quote_runs(texts: Iterable[str]) -> frozenset[str]:
    """The runs of `texts` (people's words, replaced whole where they were written): a copy of
    them elsewhere is found from QUOTE_MIN characters. A shorter text is not looked for whole: a
    moderator's "spam" is also a category's name."""
    return _runs(_forms(texts))


def _forms(texts: Iterable[str]) -> set[str]:
    """Each text as written and as it appears inside JSON (escaped, with and without \\u escapes)."""
    forms = set()
    for s in texts:
        if s and s.strip():
            forms.update({s, json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]})
    return forms


def _runs(forms: set[str]) -> frozenset[str]:
    return frozenset(form[i:i + QUOTE_MIN] for form in forms for i in range(len(form) - QUOTE_MIN + 1))


def content_quotes(content, also=()) -> Quotes:
    """The quotes of the text, the media URL and the metadata's values (and `also`), each as
    written and as it appears inside JSON."""
    found = {content.text, content.media_url, *also}
    found.update(s for s in text_values(content.metadata) if len(s) >= METADATA_MIN_QUOTE)
    forms = _forms(found)
    return Quotes(_runs(forms), tuple(sorted((f for f in forms if len(f) < QUOTE_MIN), key=len, reverse=True)))


def scrub(value, quotes: Quotes):
    """`value` (text, or JSON-like data) with every quote of `quotes` replaced by ERASED."""
    if isinstance(value, str):
        value = _replace_runs(value, quotes.runs)
        for quote in quotes.whole:
            value = value.replace(quote, ERASED)
        return value
    if isinstance(value, list):
        return [scrub(item, quotes) for item in value]
    if isinstance(value, dict):
        return {scrub(k, quotes): scrub(v, quotes) for k, v in value.items()}
    return value


def words_erased(value: Any) -> Any:
    """JSON-like `value` with the text under each of WORDS_KEYS, at any depth, replaced whole by
    ERASED: its shape, ids, categories and codes stay."""
    if isinstance(value, list):
        return [words_erased(item) for item in value]
    if isinstance(value, dict):
        return {k: ERASED if k in WORDS_KEYS and isinstance(v, str) and v else words_erased(v) for k, v in value.items()}
    return value


def _replace_runs(text: str, runs: frozenset[str]) -> str:
    """`text` with each stretch covered by runs of the content replaced by one ERASED: a quote
    of any length (at least QUOTE_MIN), from anywhere in the content, cut anywhere."""
    stretches: list[list[int]] = []  # [start, end) of each stretch to replace
    for i in range(len(text) - QUOTE_MIN + 1) if runs else ():
        if text[i:i + QUOTE_MIN] in runs:
            if stretches and i <= stretches[-1][1]:
                stretches[-1][1] = i + QUOTE_MIN
            else:
                stretches.append([i, i + QUOTE_MIN])
    if not stretches:
        return text
    parts, pos = [], 0
    for start, end in stretches:
        parts += [text[pos:start], ERASED]
        pos = end
    return "".join([*parts, text[pos:]])
