"""A long text cut into the parts a model judges one by one: sentences, or windows of words.

A model that scores a text as a whole dilutes it: one insult in five kilobytes of kind words
weighs little against them (docs/workplace.md, "Long texts"). `parts(text)` cuts a text into
spans (start, end) of character offsets into the text itself (so a part found offensive can be
shown where it lies):

- **sentences**, ended by a run of terminal punctuation (. ! ? … and the CJK, Arabic and Devanagari
  ones) followed by a space or the end, or by a line break. A full stop after a known
  abbreviation (English "Mr.", "e.g.", Indonesian "dll.", "Jl.", "Bpk.") or a single letter (an
  initial) ends nothing. Chat is often written in lowercase, so a lowercase word after a stop
  does not join the sentences: cutting one sentence in two costs nothing, joining two dilutes;
- **windows** of WINDOW_WORDS words, overlapping by half, for a sentence longer than that (text
  without punctuation, one giant line): a phrase of up to half a window always lies whole in one;
- a "word" longer than MAX_WORD_CHARS (a line with no spaces at all) counts as one word per
  MAX_WORD_CHARS characters.

A text of more than MAX_PARTS parts is cut more coarsely instead: consecutive parts are joined
into MAX_PARTS groups, so the parts still cover all of it and the model's work per text stays
bounded (a 100 KB text costs about three times its whole-text scoring, not a thousand calls).

Pure, and never raises: every part is non-empty, lies inside the text, starts and ends on a
non-space character, and together the parts cover every non-space character of the text.
"""

from __future__ import annotations

import re

WINDOW_WORDS = 24
MAX_WORD_CHARS = 64
MAX_PARTS = 200

# Terminal punctuation, then closing quotes and brackets, then a space or the end. The CJK and
# fullwidth stops end a sentence without a space (those scripts write none).
_TERMINAL = ".!?…‽؟।॥"
_CLOSERS = "\"'”’)]}»›"
# The look-behind starts a match only at the start of a run, and the possessive quantifiers never
# give back: a run of a million full stops with no space after is read once, not a million times.
_BOUNDARY = re.compile(
    rf"(?<![{re.escape(_TERMINAL)}])[{re.escape(_TERMINAL)}]++[{re.escape(_CLOSERS)}]*+(?=\s|$)|[。！？]+[{re.escape(_CLOSERS)}」』]*|[\n\r\u2028\u2029\u0085\v\f]+"
)
# A full stop after these ends no sentence (lowercased, without the stop).
ABBREVIATIONS = frozenset({
    # English
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "eg", "ie", "no", "nos", "fig",
    "approx", "dept", "est", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "mt", "ave", "rd", "p", "pp", "vol", "ed", "cf", "al", "a.m", "p.m", "u.s", "u.k",
    # Indonesian
    "dll", "dsb", "dst", "dkk", "tsb", "yth", "jl", "jln", "bpk", "sdr", "sdri", "kec", "kab", "prov", "hlm",
    "tgl", "drs", "ir", "h", "hj", "s.h", "s.e", "s.kom", "s.pd", "m.si", "a.n", "u.p", "bln", "thn", "pt", "cv",
    "kel", "gg", "rt", "rw",
})
_WORD = re.compile(r"\S+")
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD_CHARS + 1}}}")
_ABBREVIATION_MAX = max(map(len, ABBREVIATIONS)) + 2  # and an opening quote or bracket


def parts(text: str, *, window: int = WINDOW_WORDS, max_parts: int = MAX_PARTS) -> list[tuple[int, int]]:
    """The spans (start, end) of `text` a model judges one by one, in order (see the module)."""
    if not isinstance(text, str) or not text:
        return []
    found: list[tuple[int, int]] = []
    for start, end in sentences(text):
        found.extend(_windows(text, start, end, max(2, window)))
    if len(found) > max_parts >= 1:
        found = _coarser(found, max_parts)
    return found


def sentences(text: str) -> list[tuple[int, int]]:
    """The sentences of `text` as spans, trimmed of the spaces around them, in order."""
    spans, start = [], 0
    for match in _BOUNDARY.finditer(text):
        if match.group()[0] == "." and len(match.group()) == 1 and not _ends_sentence(text, match.start()):
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    return [trimmed for span in spans if (trimmed := _trim(text, *span))]


def _ends_sentence(text: str, stop: int) -> bool:
    """Whether the single full stop at `stop` ends its sentence: not after a known abbreviation
    or an initial. Looks back a few characters only (a text of many stops stays linear)."""
    begin = stop
    while begin > 0 and stop - begin <= _ABBREVIATION_MAX and not text[begin - 1].isspace():
        begin -= 1
    if begin > 0 and not text[begin - 1].isspace():
        return True  # a word longer than any abbreviation
    word = text[begin:stop].lstrip("(\"'“‘[").lower()
    return not (word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()))


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The words of text[start:end] as spans, a long one cut every MAX_WORD_CHARS characters."""
    words = []
    for match in _WORD.finditer(text, start, end):
        for at in range(match.start(), match.end(), MAX_WORD_CHARS):
            words.append((at, min(at + MAX_WORD_CHARS, match.end())))
    return words


def _windows(text: str, start: int, end: int, window: int) -> list[tuple[int, int]]:
    """A sentence as it is, or windows of `window` words overlapping by half when it is longer."""
    # Most sentences are short: counted by the regex engine, without a tuple per word.
    if len(_WORD.findall(text, start, end)) <= window and not _LONG_WORD.search(text, start, end):
        return [(start, end)]
    words = _words(text, start, end)
    if len(words) <= window:
        return [(start, end)]
    step = window // 2
    spans = []
    for first in range(0, len(words), step):
        last = min(first + window, len(words)) - 1
        spans.append((words[first][0], words[last][1]))
        if last == len(words) - 1:
            break
    return spans


def _coarser(found: list[tuple[int, int]], max_parts: int) -> list[tuple[int, int]]:
    """`found` joined into at most `max_parts` runs of consecutive parts (each from its first's
    start to the furthest end in it), so that they still cover the same characters."""
    size = -(-len(found) // max_parts)
    return [(group[0][0], max(end for _, end in group)) for group in
            (found[i:i + size] for i in range(0, len(found), size))]
