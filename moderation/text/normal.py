"""The normal form of a text: what every judge reads (docs/design.md, "The normal form").

`"id\\u200biot"`, `"f.u.c.k"`, `"fuuuuck"`, a Cyrillic "і" in "idiot", `"ｆｕｃｋ"` and `"b0d0h"` read
to a person as the words they imitate, and to a matcher or a model as other strings. The normal
form undoes those disguises, in this order:

1. **hidden characters** removed: the bidirectional controls, zero-width and invisible characters,
   stray tags and variation selectors that moderation.text.visible marks for the moderator, by
   its own classification (`hidden_characters`): a joiner in an emoji sequence or between the
   letters of a script that shapes with it (Persian, Devanagari...) is kept, as is an emoji's
   variation selector;
2. **NFKC and case folding**, per base character and its combining marks (full-width and
   mathematical letters become plain ones; diacritics stay: "é" is not "e" here, the matcher folds
   them itself);
3. **letters spelt apart**: a run of three or more single letters with the same separator between
   them (space, `.`, `-`, `_`, `*`, `·`, `•`, `~`) is one word: "f u c k", "f.u.c.k", "b-0-d-0-h".
   Two are left alone ("e.g.", "I a"): single-letter words are common; three in a row, with
   one separator, are not. A one-letter word right before or after letters spelt apart with
   spaces cannot be told from their first or last letter: "I k i l l you" reads "ikill you",
   "a s s" reads "ass". Such a text has other `readings` besides, with that letter kept apart
   ("i kill you"), and every judge reads them all: the worst counts (up to READINGS_UP_TO
   characters);
4. **leetspeak** inside a word that also has letters: 0 o, 1 i, 3 e, 4 a, 5 s, 7 t, 8 b, 9 g,
   @ a, $ s ("b0d0h", "k1ll", "a$$", "5h1t", "4ss"). Numbers stay numbers ("1488", "call 455"), and
   so does a number with a unit or an ordinal ("4th", "10am", "5g", "45s": NUMBER_SUFFIXES).
   These are glin-profanity's "basic" digits and the "@" and "$" of its "moderate" level; its
   brackets, "+" and "#" would read "(untucked)", "c++" and "#tag" as letters, and "!" between
   letters ("sh!t") is read by the matcher's second pass (moderation.text.matching);
5. **look-alike letters** folded into the alphabet of their word (Unicode's confusables, UTS #39,
   moderation/data/confusables.txt): a Cyrillic "і" or "о" in a Latin word is read as the Latin
   letter, a Latin "p" in a Cyrillic word as the Cyrillic "р". A word of one alphabet is left
   alone, whatever it looks like: Russian stays Russian (and so does an English word written
   wholly in Cyrillic look-alikes). The word's alphabet is the one that can spell all its
   letters; when two can, Latin (the disguises this undoes are Latin words dressed in
   look-alikes), else the one most of its letters are in;
6. **repeats**: a letter three or more times in a row is written once ("fuuuuck" -> "fuck",
   "sooo" -> "so"); the character is listed in `repeated`, so that a matcher can read it as one
   or two ("goooood" is "good" too: moderation.text.matching).

Each character of the normal form knows the characters of the original it came from
(`origin`, `origin_end`), so a span found in the normal form is shown and stored as the span of
the original (`original_span`): the original is what is stored and shown.

Pure, never raises on any string, and linear in the length of the text (bench/normal_form.py).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import NamedTuple

from moderation.text.visible import BIDI, INVISIBLE, TAGS, VARIATION, hidden_characters, letter_script, words

CONFUSABLES_PATH = Path(__file__).resolve().parent.parent / "data" / "confusables.txt"


# Any character moderation.text.visible may call hidden: one set, which the regex engine scans for
# fast, where visible's own pattern (four kinds, in groups) costs a step at every character.
_MAY_HIDE = re.compile(f"[{BIDI}{INVISIBLE}{TAGS}{VARIATION}]")


class _Step(NamedTuple):
    """One step's edits, by where each replacement lies in the text after it: enough to walk a
    character back to the one it came from, without a list of offsets per step (rebuilding one
    per step cost more than the steps themselves)."""

    starts: tuple[int, ...]  # each replacement's start in the new text, in order
    edits: tuple[tuple[int, int, int, int, Sequence[int] | None], ...]  # new start, new end, old start, old end, sources

    def back(self, at: int) -> tuple[int, int]:
        """The span of the text before this step that character `at` of the text after it came from."""
        k = bisect_right(self.starts, at) - 1
        if k < 0:
            return at, at + 1
        new_start, new_end, old_start, old_end, sources = self.edits[k]
        if at >= new_end:  # past the edit: shifted by what it changed the length by
            at += old_end - new_end
            return at, at + 1
        if sources is None:
            return old_start, old_end
        return sources[at - new_start], sources[at - new_start] + 1


@dataclass(frozen=True)
class NormalText:
    """A text's normal form and the way back to the original: `original_span`, and for each
    character of `text`, `origin[i]:origin_end[i]`, the span of the original it came from (one
    character, or several: a base and its marks, a run of repeats). Both are non-decreasing."""

    text: str
    length: int  # of the original
    repeated: frozenset[int] = field(default_factory=frozenset)
    steps: tuple[_Step, ...] = field(default=(), repr=False)
    # The same text read with the first, the last, or both letters of each run spelt apart with
    # spaces kept apart as one-letter words (step 3 of the module): each a NormalText of its own.
    readings: tuple[NormalText, ...] = field(default=(), repr=False)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that text[start:end] came from: it starts where the first of
        those characters came from and ends where the last did, so it covers each of them. An
        empty span stays empty, at the place it lies."""
        size = len(self.text)
        start = min(max(start, 0), size)
        end = min(max(end, start), size)
        if start == end:
            at = self._back(start)[0] if start < size else self.length
            return at, at
        return self._back(start)[0], self._back(end - 1)[1]

    def _back(self, at: int) -> tuple[int, int]:
        low, high = at, at + 1
        for step in reversed(self.steps):
            low, high = step.back(low)[0], step.back(high - 1)[1]
        return low, high

    @cached_property
    def origin(self) -> tuple[int, ...]:
        return tuple(self._back(i)[0] for i in range(len(self.text)))

    @cached_property
    def origin_end(self) -> tuple[int, ...]:
        return tuple(self._back(i)[1] for i in range(len(self.text)))


def normal_text(text: str) -> str:
    """`normalize(text).text`: the normal form alone (a model's input, a term list's key)."""
    return normalize(text).text


def normalize(text: str) -> NormalText:
    """The normal form of `text` and where each of its characters came from (see the module)."""
    if len(text) <= _CACHED_CHARS:
        return _normalize_cached(text)
    return _normalize(text)


_CACHED_CHARS = 2_000  # a term, a short comment: looked up again and again; a long text is not


@lru_cache(maxsize=8192)
def _normalize_cached(text: str) -> NormalText:
    return _normalize(text)


class _Draft:
    """The text between two steps, and the steps' edits so far."""

    def __init__(self, text: str):
        self.text, self.length, self.steps = text, len(text), []

    def fork(self) -> _Draft:
        """A draft that goes on from this one's text and steps, leaving this one as it is."""
        other = _Draft(self.text)
        other.length, other.steps = self.length, list(self.steps)
        return other

    def apply(self, edits, plain=None) -> list[int]:
        """Replace spans of the text, given in order and apart: `(start, end, new, sources)`,
        where `sources` names, for each character of `new`, the character it comes from (None: each
        comes from the whole span). `plain`, a function that keeps lengths, is applied to the text
        between them. Answers where each edit's `new` starts in the new text."""
        if not edits:
            if plain is not None:
                self.text = plain(self.text)
            return []
        text, pieces, placed, table, pos, size = self.text, [], [], [], 0, 0
        for start, end, new, sources in edits:
            kept = text[pos:start]
            pieces += [plain(kept) if plain is not None else kept, new]
            size += start - pos
            placed.append(size)
            table.append((size, size + len(new), start, end, sources))
            size += len(new)
            pos = end
        kept = text[pos:]
        pieces.append(plain(kept) if plain is not None else kept)
        self.text = "".join(pieces)
        self.steps.append(_Step(tuple(placed), tuple(table)))
        return placed


# A text longer than this gets no other readings: each costs a normal form and a model pass
# over the whole text (a 100,000-character text of letters spelt apart would take three times
# as long to judge), and a text this long is also judged by its parts.
READINGS_UP_TO = 20_000


def _normalize(text: str) -> NormalText:
    draft, ascii_only = _folded(text)
    # Before the look-alikes: "k.і.l.l" and "рr0сеss" are one word, with a Cyrillic "і" or "р"
    # in it, only once joined and read as letters.
    spelt = _spelt_apart(draft.text)
    normal = _finished(draft.fork(), spelt, ascii_only)
    # A run spelt apart with spaces, of four letters or more, may begin or end with a one-letter
    # word: read it both ways. (A run starts with a letter: what follows it is its separator.)
    if len(text) > READINGS_UP_TO or not any(
            len(new) >= 4 and draft.text[start + 1].isspace() for start, _, new, _ in spelt):
        return normal
    readings, seen = [], {normal.text}
    for keep_apart in ("first", "last", "both"):  # steps 1 and 2 are the same for every reading
        reading = _finished(draft.fork(), _spelt_apart(draft.text, keep_apart), ascii_only)
        if reading.text not in seen:
            seen.add(reading.text)
            readings.append(reading)
    return replace(normal, readings=tuple(readings))


def _folded(text: str) -> tuple[_Draft, bool]:
    """Steps 1 and 2 (hidden characters, NFKC and case folding), and whether the text is ASCII."""
    draft = _Draft(text if isinstance(text, str) else "")
    ascii_only = draft.text.isascii()  # every hidden character, every look-alike lies outside ASCII
    if ascii_only:
        draft.text = draft.text.lower()
    else:
        if _MAY_HIDE.search(draft.text):
            draft.apply([(m.start, m.end, "", None) for m in hidden_characters(draft.text)])
        folded = _folded_alone(draft.text)
        if folded is not None:
            draft.text = folded
        else:
            draft.apply(_folded_clusters(draft.text), plain=_lower_ascii)
    return draft, ascii_only


def _finished(draft: _Draft, spelt: list, ascii_only: bool) -> NormalText:
    """Steps 3 to 6 on a folded draft, with the runs spelt apart that `spelt` joins."""
    draft.apply(spelt)
    draft.apply(_leetspeak(draft.text))
    if not ascii_only:
        draft.apply(_confusables(draft.text))
    placed = draft.apply(_repeats(draft.text))
    return NormalText(draft.text, draft.length, frozenset(placed), tuple(draft.steps))


# --- 2. NFKC and case folding ---------------------------------------------------------------------

_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_ASCII_UPPER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _lower_ascii(text: str) -> str:
    """A-Z lowercased, nothing else (what lies between the folded clusters)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_UPPER)


def _folded_alone(text: str) -> str | None:
    """The fold of `text` when each of its characters folds to one character (most texts: in C,
    with no offset moving), else None."""
    if unicodedata.is_normalized("NFKC", text):
        # Case folding reads no context: the same length means each character stayed one.
        folded = text.casefold()
        if len(folded) == len(text) and unicodedata.is_normalized("NFKC", folded):
            return folded
    return None


@lru_cache(maxsize=65536)
def _fold(cluster: str) -> str:
    """NFKC_Casefold, near enough: NFKC, case folding, NFKC again."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", cluster).casefold())


def _folded_clusters(text: str) -> list[tuple[int, int, str, None]]:
    """An edit for each base character with its combining marks whose fold differs from it."""
    edits: list[tuple[int, int, str, None]] = []
    _fold_span(text, 0, len(text), edits)
    return edits


_SPAN_READ_ALONE = 64


def _fold_span(text: str, start: int, end: int, edits: list) -> None:
    """text[start:end] folded, in halves cut at a space until each half folds character by
    character in C (`_folded_alone`) or is short enough to read base by base: a "ß" or a
    combining mark costs the reading of its neighbourhood, not of the whole text."""
    chunk = text[start:end]
    if chunk.isascii():
        return  # lowercased between the edits
    if (folded := _folded_alone(chunk)) is not None:
        edits += [(start + k, start + k + 1, b, None) for k, (a, b) in enumerate(zip(chunk, folded, strict=True))
                  if a != b]
        return
    middle = text.find(" ", (start + end) // 2, end) if end - start > _SPAN_READ_ALONE else -1
    if middle <= start:
        _fold_base_by_base(text, start, end, edits)
        return
    _fold_span(text, start, middle, edits)
    _fold_span(text, middle, end, edits)


def _fold_base_by_base(text: str, start: int, end: int, edits: list) -> None:
    """Each base character of text[start:end] outside ASCII with its combining marks folded (a
    mark may follow an ASCII base: "e\u0301")."""
    for run in _NON_ASCII.finditer(text, start, end):
        i, stop = run.start(), run.end()
        if i > start and unicodedata.combining(text[i]):
            i -= 1
        while i < stop:
            j = i + 1
            while j < end and unicodedata.combining(text[j]):
                j += 1
            cluster = text[i:j]
            folded = _fold(cluster)
            if folded != cluster:
                edits.append((i, j, folded, None))
            i = j


# --- 3. letters spelt apart ------------------------------------------------------------------------

_LETTER = r"(?:[^\W_]|[@$])"
_SINGLE = rf"{_LETTER}(?![^\W_]|[@$])"
_SEPARATORS = " .\\-_*·•~"
_SPELT_APART = re.compile(rf"(?<![^\W_])(?<![@$]){_SINGLE}(?P<sep>[{_SEPARATORS}]{{1,3}}){_SINGLE}(?:(?P=sep){_SINGLE})+")
_SPELT_WITH_MARKS = re.compile(rf"{_SINGLE}[{_SEPARATORS[1:]}]{{1,3}}{_SINGLE}")
# Two single letters with a separator between them: where a run may start. Found by word
# boundaries, which the regex engine tests fast, where _SPELT_APART's look-behinds cost a step at
# every character (15 ms over 100 KB of prose that holds no run).
_SPELT_HINT = re.compile(rf"(?:\b\w\b|[@$])[{_SEPARATORS}]{{1,3}}(?:\b\w\b|[@$])")


def _spelt_apart(text: str, keep_apart: str = "") -> list[tuple[int, int, str, tuple[int, ...]]]:
    """An edit for each run of single letters spelt apart. A space binds less than a mark: in
    "i d i o t i.d.i.o.t" the second "i" starts "i.d.i.o.t", it does not end the first run.
    `keep_apart` ("first", "last", "both"): a run spelt with spaces leaves that end letter out,
    a one-letter word of its own, where three letters or more remain joined."""
    edits, pos = [], 0
    # "_" is a word character to \b, and a separator here: read as a space, the hint finds "k_i_l_l".
    hints = text.replace("_", " ") if "_" in text else text
    while (hint := _SPELT_HINT.search(hints, pos)) is not None:
        match = _SPELT_APART.match(text, hint.start())
        if match is None:
            pos = hint.start() + 1
            continue
        start, end, separator = match.start(), match.end(), match.group("sep")
        if separator.isspace() and _SPELT_WITH_MARKS.match(text, end - 1):
            end -= 1 + len(separator)  # its last letter starts the next run
        spelt = text[start:end]
        kept = [i for i, c in enumerate(spelt) if c.isalnum() or c in "@$"]
        if keep_apart and separator.isspace():
            first = 1 if keep_apart in ("first", "both") else 0
            last = len(kept) - (1 if keep_apart in ("last", "both") else 0)
            if last - first >= 3:
                start, end = start + kept[first], start + kept[last - 1] + 1
                spelt, kept = text[start:end], [i - kept[first] for i in kept[first:last]]
        # "1 2 3" counts, it spells nothing; and a run that gave its last letter away may be too short.
        if len(kept) >= 3 and any(spelt[i].isalpha() for i in kept):
            edits.append((start, end, "".join(spelt[i] for i in kept), tuple(start + i for i in kept)))
        pos = end
    return edits


# --- 4. leetspeak ----------------------------------------------------------------------------------

LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g",
                      "@": "a", "$": "s"})
_WORD_WITH_SYMBOLS = re.compile(rf"{_LETTER}+")
_LEET_CHARACTER = re.compile(r"[0-9@$]")
_NUMBER_THEN_LETTERS = re.compile(r"[0-9]+([^\W\d_]+)")
# What follows a number without making it a word: ordinals, units, decades, times of day.
NUMBER_SUFFIXES = frozenset({
    "st", "nd", "rd", "th", "s", "am", "pm", "h", "m", "min", "d", "k", "g", "b", "x", "p", "v", "w", "kg", "km",
    "cm", "mm", "ml", "gb", "mb", "kb", "tb", "hz", "px", "fps", "yo", "yr", "yrs", "hrs", "mins", "ms", "kw",
    # Indonesian: "ke-2" is spelt with a dash, but "2x", "3rb" (ribu), "5jt" (juta) are common.
    "rb", "jt",
})


def _is_leet(word: str) -> bool:
    """Whether the digits and symbols of `word` stand for letters (see the module, step 4)."""
    if not any(c.isalpha() for c in word):
        return False
    found = _NUMBER_THEN_LETTERS.fullmatch(word)
    return found is None or found.group(1) not in NUMBER_SUFFIXES


def _leetspeak(text: str) -> list[tuple[int, int, str, range]]:
    """An edit for each word whose digits and symbols stand for letters. Found from its digits
    and symbols (a regex engine scans for a set of characters fast) and read from the start of
    their word; each word once, so the reading back stays linear."""
    edits, end = [], 0
    for symbol in _LEET_CHARACTER.finditer(text):
        at = symbol.start()
        if at < end:
            continue  # in the word just read
        start = at
        while start > end and (text[start - 1].isalnum() or text[start - 1] in "@$"):
            start -= 1
        end = _WORD_WITH_SYMBOLS.match(text, at).end()
        if _is_leet(word := text[start:end]):
            edits.append((start, end, word.translate(LEET), range(start, end)))
    return edits


# --- 5. look-alike letters ---------------------------------------------------------------------


def _read_table() -> dict[str, str]:
    """moderation/data/confusables.txt: {letter: the lowercase letters it passes for}."""
    table = {}
    for line in CONFUSABLES_PATH.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            letter, passes_for = line.split("\t")
            table[chr(int(letter, 16))] = "".join(chr(int(code, 16)) for code in passes_for.split())
    return table


PASSES_FOR = _read_table()
# The letter of each alphabet that passes for a given Latin one ("p" -> Cyrillic "р"), the first
# in code point order: what a Latin letter in a word of that alphabet is read as.
_LOOKS_LIKE: dict[str, dict[str, str]] = {}
for _letter, _latin in sorted(PASSES_FOR.items(), reverse=True):
    _LOOKS_LIKE.setdefault(letter_script(_letter), {})[_latin] = _letter


def _read_in(letter: str, script: str, alphabet: str) -> str | None:
    """`letter` (of `script`) as a letter of `alphabet`, or None when it passes for none."""
    if script == alphabet:
        return letter
    latin = letter if script == "Latin" else PASSES_FOR.get(letter)
    if latin is None:
        return None
    if alphabet == "Latin":
        return latin if all(letter_script(c) == "Latin" for c in latin) else None
    return _LOOKS_LIKE.get(alphabet, {}).get(latin)


# A word that may mix alphabets: an ASCII letter and one of the other confusable alphabets
# (Greek, Cyrillic, Armenian, Cherokee), or Cyrillic and Greek. Found by the regex engine, so that
# a page of Russian or of French is not read letter by letter.
_OTHER_ALPHABETS = "\u0370-\u03ff\u1f00-\u1fff\u0400-\u052f\u1c80-\u1c8f\ua640-\ua69f\u0530-\u058f\u13a0-\u13ff\uab70-\uabbf"
_MAY_MIX = re.compile(rf"(?<!\S)(?:(?=\S*[a-z])(?=\S*[{_OTHER_ALPHABETS}])"
                      r"|(?=\S*[\u0400-\u052f])(?=\S*[\u0370-\u03ff\u1f00-\u1fff]))\S+")


_ANOTHER_ALPHABET = re.compile(f"[{_OTHER_ALPHABETS}]")


def _confusables(text: str) -> list[tuple[int, int, str, None]]:
    edits = []
    if not _ANOTHER_ALPHABET.search(text):
        return edits  # no letter any word could mix with Latin
    for token in _MAY_MIX.finditer(text):
        edits += _folded_word_letters(token.start(), token.group())
    return edits


def _folded_word_letters(at: int, token: str) -> list[tuple[int, int, str, None]]:
    """The look-alike letters of each word of `token` (which starts at `at`) folded."""
    edits = []
    for offset, word in words(token):
        offset += at
        letters = [(i, c, s) for i, c in enumerate(word) if (s := letter_script(c))]
        scripts = Counter(s for _, _, s in letters)
        if len(scripts) < 2:
            continue  # one alphabet: a word of that language, whatever it looks like
        alphabet = max(scripts, key=lambda a: (sum(_read_in(c, s, a) is not None for _, c, s in letters),
                                               a == "Latin", scripts[a]))
        for i, c, s in letters:
            if s != alphabet and (read := _read_in(c, s, alphabet)) is not None:
                edits.append((offset + i, offset + i + 1, read, None))
    return edits


# --- 6. repeats ------------------------------------------------------------------------------------

_REPEATS = re.compile(r"([^\W\d_])\1{2,}")
_FEW_LETTERS = 64


def _repeats(text: str) -> list[tuple[int, int, str, None]]:
    """An edit for each run of three or more of one letter. A regex with a backreference costs a
    step at every character (30 ms over 100 KB of prose); a text of few distinct letters (an
    alphabet's) is searched for each letter's triple instead, in C, and only those are read."""
    letters = [c for c in set(text) if c.isalpha()]
    if len(letters) > _FEW_LETTERS:  # CJK and the like: thousands of distinct characters
        found = _REPEATS.finditer(text)
    else:
        tripled = [c for c in letters if c * 3 in text]
        if not tripled:
            return []
        found = sorted((m for c in tripled for m in _run_of(c).finditer(text)), key=lambda m: m.start())
    return [(m.start(), m.end(), m.group()[0], None) for m in found]


@lru_cache(maxsize=1024)
def _run_of(letter: str) -> re.Pattern:
    """Three or more of `letter`: a literal the regex engine searches for fast."""
    return re.compile(re.escape(letter) * 3 + "+")
