"""Watched-term matching that survives evasion, with word boundaries.

Terms and texts go through one normalisation: case, diacritics, Cyrillic/Greek look-alikes and
leetspeak are folded away, and a letter repeated in the text ("bodohhh") matches the same letter
in the term. Words are matched whole, so "class" does not contain "ass" and "Scunthorpe" no
watched word. A second pass reads words spelt across separators ("b.o.d.o.h", "b o d o h",
"sh!t"). All terms sit in one Aho-Corasick automaton: a text is scanned once per pass, however
many terms there are (bench/terms.py measures it).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, count, repeat
from operator import add
from typing import NamedTuple

import ahocorasick

# Characters that stand for letters inside a word ("b0d0h", "a$$", "@ss"). A word of digits
# only stays a number: "455" is not "ass", while a "1488" term still matches "1488".
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g",
                       "@": "a", "$": "s"})
# Cyrillic and Greek letters that look Latin ("bоdoh" with a Cyrillic о).
_HOMOGLYPHS = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i", "ј": "j", "ѕ": "s",
    "к": "k", "м": "m", "т": "t", "в": "b", "н": "h", "ο": "o", "α": "a", "ε": "e", "ι": "i", "κ": "k",
    "ν": "v", "ρ": "p", "τ": "t",
})
_LETTER = r"(?:[^\W_]|[@$])"
_JOINERS = r".\-_*'’·•|~+/\\!:"
_WORD = re.compile(rf"({_LETTER}+)")  # one group: split() keeps the words
# Is any word of the text spelt across separators? Most texts are not: they skip the second pass.
_SPELT_APART = re.compile(rf"[^\W_][{_JOINERS}]{{1,3}}[^\W_]|(?<![^\W_])[^\W_] [^\W_](?![^\W_])")
_SPELT_WORD = re.compile(
    rf"((?<![^\W_])[^\W_](?: [^\W_](?![^\W_])){{2,}}"                # single letters: "b o d o h"
    rf"|{_LETTER}+(?:[{_JOINERS}]{{1,3}}{_LETTER}+)*)"                # "b.o.d.o.h", "bo-doh", "sh!t"
)
_UNSPACE = str.maketrans({c: None for c in " .-_*'’·•~+/\\:"} | {"!": "i", "|": "l"})
_REPEATS = re.compile(r"(.)\1+")
_RUNS = re.compile(r"(.)\1*")


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """One word with case, diacritics, look-alikes and leetspeak folded away."""
    if word.isascii():
        word = word.lower()
    else:
        decomposed = unicodedata.normalize("NFKD", word)
        word = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold().translate(_HOMOGLYPHS)
    return word if word.isdigit() else word.translate(_LEET)


@lru_cache(maxsize=65536)
def _squeeze(word: str) -> str:
    return _REPEATS.sub(r"\1", word)


def _runs(word: str) -> tuple[tuple[str, int], ...]:
    return tuple((m.group(1), len(m.group())) for m in _RUNS.finditer(word))


def canonical(term: str) -> str:
    """A term's words, folded, joined by one space ("" when it has no letter or digit)."""
    return " ".join(fold(w) for w in _WORD.findall(term))


class Hit(NamedTuple):
    term: int   # index into the terms the matcher was built from
    start: int  # span in the original text
    end: int


class _Entry(NamedTuple):
    index: int
    canonical: str
    runs: tuple


class TermMatcher:
    """Every term of a policy in one automaton, keyed by its squeezed canonical form."""

    def __init__(self, terms: list[str]):
        by_key: dict[str, list[_Entry]] = {}
        for index, term in enumerate(terms):
            words = canonical(term)
            if words:
                by_key.setdefault(_squeeze(words), []).append(_Entry(index, words, _runs(words)))
        self._automaton = ahocorasick.Automaton()
        for key, entries in by_key.items():
            self._automaton.add_word(key, (len(key), tuple(entries)))
        self._empty = not by_key
        if not self._empty:
            self._automaton.make_automaton()

    def find(self, text: str) -> list[Hit]:
        """Whole-word matches of the terms in `text`, in text order."""
        if self._empty or not text:
            return []
        hits: set[Hit] = set()
        self._scan(text, _WORD, hits, spelt=False)
        if _SPELT_APART.search(text):
            self._scan(text, _SPELT_WORD, hits, spelt=True)
        return sorted(hits, key=lambda h: (h.start, h.end, h.term))

    def _scan(self, text: str, pattern: re.Pattern, hits: set[Hit], *, spelt: bool) -> None:
        # Per-word work runs in C (map, accumulate, bisect): a 10,000-character text has some
        # 1,600 words, and a Python loop over them would cost more than the automaton itself.
        parts = pattern.split(text)  # separator, word, separator, ..., word, separator
        raw = parts[1::2]
        words = list(map(fold, map(str.translate, raw, repeat(_UNSPACE)) if spelt else raw))
        squeezed = list(map(_squeeze, words))
        haystack = " ".join(squeezed)
        found = list(self._automaton.iter(haystack))
        if not found:
            return
        # Word boundaries: a match must begin where a word begins and end where one ends.
        word_ends = list(map(add, accumulate(map(len, squeezed)), count()))  # exclusive, in haystack
        verified: list[tuple[int, int, int]] = []
        for end, (length, entries) in found:
            start = end - length + 1
            if (start and haystack[start - 1] != " ") or (end + 1 < len(haystack) and haystack[end + 1] != " "):
                continue  # inside a word: "class" does not contain "ass"
            first, last = bisect_right(word_ends, start), bisect_right(word_ends, end)
            spelled = " ".join(words[first:last + 1])
            verified += [
                (entry.index, first, last) for entry in entries
                if spelled == entry.canonical or _repeats_at_least(_runs(spelled), entry.runs)
            ]
        if verified:
            offsets = list(accumulate(map(len, parts), initial=0))  # word i spans offsets[2i+1:2i+2]
            hits.update(Hit(index, offsets[2 * first + 1], offsets[2 * last + 2]) for index, first, last in verified)


def _repeats_at_least(spelled, wanted) -> bool:
    """Each letter repeated at least as often as in the term: "bodohhh" spells "bodoh", but "as"
    does not spell "ass"."""
    return len(spelled) == len(wanted) and all(
        c == w and n >= m for (c, n), (w, m) in zip(spelled, wanted, strict=True)
    )
