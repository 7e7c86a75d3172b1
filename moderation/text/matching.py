"""Watched-term matching that survives evasion, with word boundaries.

Terms and texts are read in one normal form (moderation.text.normal; docs/design.md, "The normal
form"): case, full-width letters, hidden characters, look-alike letters of another alphabet,
letters spelt apart ("f.u.c.k", "b o d o h"), leetspeak and runs of one letter are undone there,
and the span of each match is the span of the original text it came from. On top of it the
matcher folds diacritics away ("bódóh" is "bodoh"), and a letter repeated in the text
("bodohhh") matches the same letter in the term: a letter the normal form wrote once for a run
of three or more is read as one or two ("goooood" is "good", "fuuuck" is "fuck"). Words are
matched whole, so "class" does not contain "ass" and "Scunthorpe" no watched word. A second pass
reads words spelt across other separators ("bo.doh", "bo-doh", "sh!t"). All terms sit in one
Aho-Corasick automaton: a text is scanned once per pass, however many terms there are
(bench/terms.py measures it). A text with no word (emoji, punctuation, invisible characters)
matches no term; patterns (moderation.text.rules) are what match it. With a budget, a pass
examines a bounded number of matches in full (TermMatcher.find).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, chain, count, pairwise
from operator import add
from typing import NamedTuple

import ahocorasick

from moderation.text.normal import LEET, NormalText, normal_text, normalize

_LETTER = r"(?:[^\W_]|[@$])"
_JOINERS = r".\-_*'’·•|~+/\\!:"
_WORD = re.compile(rf"({_LETTER}+)")  # one group: split() keeps the words
# A word spelt across separators (most texts have none or few); single letters spelt apart are
# already one word in the normal form.
_SPELT_WORD = re.compile(rf"(?<![^\W_@$]){_LETTER}+(?:[{_JOINERS}]{{1,3}}{_LETTER}+)+")
_UNSPACE = str.maketrans({c: None for c in " .-_*'’·•~+/\\:"} | {"!": "i", "|": "l"})
_REPEATS = re.compile(r"(.)\1+")
_RUNS = re.compile(r"(.)\1*")


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """A word of the normal form without its diacritics: the matcher's one step beyond it."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _spelt(word: str) -> str:
    """A word spelt across separators, read as one: "sh!t" -> "shit", "5h!t" -> "shit"."""
    word = fold(word.translate(_UNSPACE))
    return word if word.isdigit() else word.translate(LEET)


@lru_cache(maxsize=65536)
def _squeeze(word: str) -> str:
    return _REPEATS.sub(r"\1", word)


def _runs(word: str) -> tuple[tuple[str, int], ...]:
    return tuple((m.group(1), len(m.group())) for m in _RUNS.finditer(word))


def canonical(term: str) -> str:
    """A term's words in the normal form, diacritics folded, joined by one space ("" when it has
    no letter or digit)."""
    return " ".join(fold(w) for w in _WORD.findall(normal_text(term)))


def _read(normal: NormalText) -> tuple[str, list[int] | None]:
    """The normal form as the matcher reads it, each letter that stood for a run of three or more
    written twice (so that it matches one or two in a term), and where each of its characters
    lies in the normal form (None: at the same place)."""
    if not normal.repeated:
        return normal.text, None
    text, pieces, back, pos = normal.text, [], [], 0
    for i in sorted(normal.repeated):
        pieces += [text[pos:i + 1], text[i]]
        back += [*range(pos, i + 1), i]
        pos = i + 1
    pieces.append(text[pos:])
    back += range(pos, len(text))
    return "".join(pieces), back


class Hit(NamedTuple):
    term: int   # index into the terms the matcher was built from
    start: int  # span in the original text
    end: int
    past_budget: bool = False  # found once the pass's budget was spent (see TermMatcher.find)


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

    def find(self, text: str, *, budget: int | None = None) -> list[Hit]:
        """Whole-word matches of the terms in `text`, in text order.

        With a `budget`, each of the two passes reports its first `budget` matches in full and,
        once they are spent, only the first further match of each term, marked `past_budget`:
        the work per text stays bounded (a Python step per match is the matcher's cost), and no
        term that matches the text goes unreported.
        """
        if self._empty or not text:
            return []
        budget = len(text) if budget is None else budget  # a text has fewer matches than characters
        normal = normalize(text)
        hits = self._find_in(normal, budget)
        # Its other readings (moderation.text.normal, step 3: "I k i l l you" is also "i kill you"):
        # a term found in any of them is found, at the span of the original it covers.
        for reading in normal.readings:
            for key, late in self._find_in(reading, budget).items():
                hits.setdefault(key, late)
        return [Hit(index, start, end, late) for (start, end, index), late in sorted(hits.items())]

    def _find_in(self, normal: NormalText, budget: int) -> dict[tuple[int, int, int], bool]:
        """The matches in one reading of a text: (start, end in the original, term): past the budget."""
        read, back = _read(normal)

        def original(start: int, end: int) -> tuple[int, int]:
            if back is not None:
                start, end = back[start], back[end - 1] + 1
            return normal.original_span(start, end)

        # Pass 1, every word. Per-word work runs in C (split, map, accumulate, bisect): a
        # 10,000-character text has some 1,600 words, and a Python loop over them would cost
        # more than the automaton itself.
        parts = _WORD.split(read)  # separator, word, separator, ..., word, separator
        words = list(map(fold, parts[1::2]))
        found = self._match(words, [" "] * (len(words) - 1), budget)
        hits: dict[tuple[int, int, int], bool] = {}  # (start, end, term): past the budget
        if found:
            offsets = list(accumulate(map(len, parts), initial=0))  # word i is offsets[2i+1]:offsets[2i+2]
            for index, first, last, late in found:
                hits[(*original(offsets[2 * first + 1], offsets[2 * last + 2]), index)] = late
        # Pass 2, only the words spelt across separators (few, in most texts), each on its own.
        spelt = [(m.span(), _spelt(m.group())) for m in _SPELT_WORD.finditer(read)]
        if spelt:
            # Neighbours (nothing but separators between them) may form a phrase; others not.
            gaps = [" " if not _WORD.search(read, a[1], b[0]) else "\n" for (a, _), (b, _) in pairwise(spelt)]
            for index, first, last, late in self._match([word for _, word in spelt], gaps, budget):
                key = (*original(spelt[first][0][0], spelt[last][0][1]), index)
                hits[key] = hits.get(key, False) or late  # past the budget in either pass: counted as such
        return hits

    def _match(self, words: list[str], gaps: list[str], budget: int) -> list[tuple[int, int, int, bool]]:
        """(term index, first word, last word, past budget) of each whole-word match in `words`:
        the first `budget` in full, then the first of each term. Word i and i+1 are joined by
        gaps[i]: a space, or a newline that no phrase may span."""
        if not words:
            return []  # a text of emoji, punctuation, marks or invisible characters only: no word to match
        squeezed = list(map(_squeeze, words))
        haystack = "".join(chain.from_iterable(zip(squeezed, [*gaps, ""], strict=True)))
        word_ends = list(map(add, accumulate(map(len, squeezed)), count()))  # exclusive, in haystack
        size, matches, late = len(haystack), [], set()
        for end, (length, entries) in self._automaton.iter(haystack):
            if budget <= 0:
                entries = [entry for entry in entries if entry.index not in late]
                if not entries:
                    continue  # this pass already reported each of these terms past its budget
            start = end - length + 1
            if (start and haystack[start - 1] not in " \n") or (end + 1 < size and haystack[end + 1] not in " \n"):
                continue  # inside a word: "class" does not contain "ass"
            first, last = bisect_right(word_ends, start), bisect_right(word_ends, end)
            spelled = " ".join(words[first:last + 1])
            for entry in entries:
                if spelled == entry.canonical or _repeats_at_least(_runs(spelled), entry.runs):
                    matches.append((entry.index, first, last, budget <= 0))
                    if budget <= 0:
                        late.add(entry.index)
                    budget -= 1
        return matches


def _repeats_at_least(spelled, wanted) -> bool:
    """Each letter repeated at least as often as in the term: "bodohhh" spells "bodoh", but "as"
    does not spell "ass"."""
    return len(spelled) == len(wanted) and all(
        c == w and n >= m for (c, n), (w, m) in zip(spelled, wanted, strict=True)
    )
