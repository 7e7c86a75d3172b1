"""What a moderator must see of a text that a browser would hide: bidirectional controls,
zero-width and other invisible characters, and words that mix look-alike scripts.

`"\\u202eesrever"` reads "reverse" in a browser and `"id\\u200biot"` reads "idiot", while a
matcher and a model see other strings: the evasion is invisible exactly to the person who
judges it. `find(text)` cuts a text into segments, plain or marked, that cover it in order,
each with its offsets in the text (so a rule match's span, moderation.verdicts.match_record, still
lies where it did), and counts what it found. `marked_html` renders a slice of them escaped: a
hidden character is *replaced* by a visible marker (`⟨U+202E⟩`), so a control never takes effect on
the page, and a letter from another script than its word's is highlighted. `visible_text` does
the same for a terminal or a log line, where the controls a terminal acts on are marked too.

What is left alone, because it is how some text is written (docs/workplace.md, "Hidden
characters"):

- a zero-width joiner between two emoji (👩‍💻, 👨‍👩‍👧, 🏳️‍🌈), and a joiner or non-joiner between
  two letters of a script that shapes with them, or at the end of such a word (Persian
  "می‌خواهم", Devanagari "क्‍ष", Malayalam's old chillu "ക്‍");
- tag characters ending in CANCEL TAG right after an emoji (the flags of England, Scotland and
  Wales: 🏴 + tags);
- a variation selector after a symbol, a digit, # or * (emoji and keycap presentation, "❤️",
  "1️⃣") or a CJK ideograph (ideographic variation sequences);
- the script-specific prepended marks (Arabic number signs, Syriac abbreviation mark, Kaithi
  number signs, Egyptian hieroglyph format controls), which render or belong to their script.

Mixed scripts are looked for only among the alphabets whose letters are confused with each other
(Latin, Cyrillic, Greek, Armenian, Cherokee): Japanese mixing kanji and kana, or "iPhone用", is no
mixture. A letter's script is read from its Unicode name after compatibility decomposition, so
fullwidth and mathematical letters ("ｉ", "𝐢") count as the Latin they imitate.
"""

from __future__ import annotations

import re
import unicodedata
from html import escape  # what django.utils.html.escape calls, without its wrapping per piece
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache

from django.utils.safestring import SafeString, mark_safe


class Hidden(StrEnum):
    BIDI = "bidi"
    INVISIBLE = "invisible"
    TAG = "tag"
    VARIATION = "variation"
    MIXED_SCRIPT = "mixed_script"


# (one, many) as the notice counts them.
NOUNS = {
    Hidden.BIDI: ("bidirectional control", "bidirectional controls"),
    Hidden.INVISIBLE: ("zero-width or invisible character", "zero-width or invisible characters"),
    Hidden.TAG: ("run of hidden tag characters", "runs of hidden tag characters"),
    Hidden.VARIATION: ("stray variation selector", "stray variation selectors"),
    Hidden.MIXED_SCRIPT: ("word mixing scripts", "words mixing scripts"),
}

BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Invisible by design: zero-width space, joiners, word joiner and invisible operators, the BOM, the
# soft hyphen, the Mongolian vowel separator, the combining grapheme joiner, Hangul fillers, the
# deprecated format characters, interlinear annotation, shorthand and musical format controls.
INVISIBLE = ("\u00ad\u034f\u180e\u200b-\u200d\u2060-\u2065\u206a-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
             "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a")
TAGS = "\U000e0000-\U000e007f"
VARIATION = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
CANDIDATES = re.compile(f"(?P<tag>[{TAGS}]+)|(?P<bidi>[{BIDI}])|(?P<vs>[{VARIATION}])|(?P<invisible>[{INVISIBLE}])")
ZWJ, ZWNJ, CANCEL_TAG, VS16 = "\u200d", "\u200c", "\U000e007f", "\ufe0f"
SKIN_TONES = range(0x1F3FB, 0x1F400)

CONFUSABLE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE")
# Scripts in which a joiner or non-joiner changes how letters connect.
JOINING_SCRIPTS = frozenset({
    "ARABIC", "SYRIAC", "NKO", "MONGOLIAN", "MANDAIC", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA",
    "TAMIL", "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "MYANMAR", "KHMER", "TIBETAN",
})
MAX_NAMED_WORDS = 5
# "µm" is Latin text: the micro sign decomposes to a Greek mu, but Unicode gives it no script.
MICRO_SIGN = "\u00b5"


@dataclass(frozen=True)
class Segment:
    """text[start:end] of the text cut; `shown` is what the page shows for it: the text itself
    when plain (`kind` None) or a mixed-script letter, a marker in place of a hidden character."""

    start: int
    end: int
    text: str
    shown: str
    kind: Hidden | None = None
    title: str = ""


@dataclass(frozen=True)
class MixedWord:
    word: str
    script: str  # the word's own script ("Latin")
    foreign: tuple[tuple[str, str], ...]  # (letter, its script) for each letter of another script


@dataclass(frozen=True)
class Found:
    segments: tuple[Segment, ...]
    counts: Counter = field(default_factory=Counter)  # Hidden -> markers (mixed scripts: words)
    mixed_words: tuple[MixedWord, ...] = ()

    @cached_property
    def starts(self) -> list[int]:
        return [s.start for s in self.segments]

    @property
    def any(self) -> bool:
        return bool(self.counts)

    @property
    def notice(self) -> str:
        """What the page says of the text, in words ("" when it hides nothing)."""
        sentences = []
        markers = [(kind, self.counts[kind]) for kind in Hidden if self.counts[kind] and kind != Hidden.MIXED_SCRIPT]
        if markers:
            sentences.append(f"This text contains {counted(markers)}, shown as ⟨U+…⟩ in place of each.")
        if self.mixed_words:
            named = "; ".join(
                f"“{spelt_out(w.word)}” ({', '.join(f'{letter} {script}' for letter, script in w.foreign)} in a {w.script} word)"
                for w in self.mixed_words[:MAX_NAMED_WORDS])
            more = len(self.mixed_words) - MAX_NAMED_WORDS
            sentences.append(f"{'It' if markers else 'This text'} has {counted([(Hidden.MIXED_SCRIPT, len(self.mixed_words))])}, "
                             f"the letters of the other script highlighted: {named}{f' and {more} more' if more > 0 else ''}.")
        return " ".join(sentences)


def spelt_out(word: str) -> str:
    """A word quoted in the notice, each hidden character in it as its code point: the word may
    hold a control (its letters run across a bidi embedding), which must not take effect there."""
    return CANDIDATES.sub(lambda found: "".join(f"⟨{code(c)}⟩" for c in found.group()), word)


def counted(kinds: list[tuple[Hidden, int]]) -> str:
    parts = [f"{n} {NOUNS[kind][n != 1]}" for kind, n in kinds]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def find(text: str) -> Found:
    """`text` cut into segments that cover it in order, and what it hides. Pure; never raises."""
    if not text:
        return Found(())
    if text.isascii():  # every character this looks for lies outside ASCII
        return Found((Segment(0, len(text), text, text),))
    marks = hidden_characters(text)
    mixed = mixed_script_words(text)
    for word in mixed:
        marks.extend(word[1])
    marks.sort(key=lambda s: s.start)
    segments, pos = [], 0
    for mark in marks:
        if mark.start > pos:
            segments.append(Segment(pos, mark.start, text[pos:mark.start], text[pos:mark.start]))
        segments.append(mark)
        pos = mark.end
    if pos < len(text):
        segments.append(Segment(pos, len(text), text[pos:], text[pos:]))
    counts = Counter(m.kind for m in marks if m.kind != Hidden.MIXED_SCRIPT)
    if mixed:
        counts[Hidden.MIXED_SCRIPT] = len(mixed)
    return Found(tuple(segments), counts, tuple(word for word, _ in mixed))


def code(char: str) -> str:
    return f"U+{ord(char):04X}"


def described(char: str) -> str:
    return f"{code(char)} {unicodedata.name(char, 'unnamed character')}"


def hidden_characters(text: str) -> list[Segment]:
    marks = []
    for match in CANDIDATES.finditer(text):
        start, end, chars = match.start(), match.end(), match.group()
        if match.lastgroup == "tag":
            if not is_emoji_tag_sequence(text, start, end):
                decoded = "".join(chr(ord(c) - 0xE0000) for c in chars if 0xE0020 <= ord(c) <= 0xE007E)
                shown = f"⟨tags {code(chars[0])}…: “{decoded}”⟩" if decoded else "".join(f"⟨{code(c)}⟩" for c in chars)
                marks.append(Segment(start, end, chars, shown, Hidden.TAG,
                                     f"{len(chars)} tag character{'s' if len(chars) != 1 else ''}, invisible in a browser"))
            continue
        if match.lastgroup == "vs":
            if start and legitimately_varied(text[start - 1]):
                continue
            kind = Hidden.VARIATION
        elif match.lastgroup == "invisible":
            if chars in (ZWJ, ZWNJ) and joins_legitimately(text, start):
                continue
            kind = Hidden.INVISIBLE
        else:
            kind = Hidden.BIDI
        marks.append(Segment(start, end, chars, f"⟨{code(chars)}⟩", kind, described(chars)))
    return marks


def is_pictographic(char: str) -> bool:
    """An emoji or other pictograph, near enough: a symbol outside ASCII ("So": ❤, 👩, 🌈, ©)."""
    return unicodedata.category(char) == "So"


def is_emoji_tag_sequence(text: str, start: int, end: int) -> bool:
    """🏴 followed by tag letters and CANCEL TAG: a subdivision flag."""
    run = text[start:end]
    return (start > 0 and is_pictographic(text[start - 1]) and len(run) > 1 and run[-1] == CANCEL_TAG
            and all(0xE0020 <= ord(c) <= 0xE007E for c in run[:-1]))


def legitimately_varied(before: str) -> bool:
    category = unicodedata.category(before)
    return (category in ("So", "Sm") or before in "0123456789#*"
            or unicodedata.name(before, "").startswith("CJK "))


def joins_legitimately(text: str, at: int) -> bool:
    """A joiner inside an emoji sequence, or a joiner or non-joiner between two letters (or marks)
    of one script that shapes with them."""
    before, after = text[at - 1] if at else "", text[at + 1] if at + 1 < len(text) else ""
    if not before:
        return False
    if text[at] == ZWJ and after and is_pictographic(after):
        i = at - 1
        while i > 0 and (text[i] == VS16 or ord(text[i]) in SKIN_TONES):
            i -= 1
        if is_pictographic(text[i]):
            return True
    if unicodedata.category(before)[0] not in "LM":
        return False  # after a space, a digit or a format character (U+180E is "Mongolian") it joins nothing
    # At a word's end too: Malayalam wrote its chillu letters as consonant, virama, joiner.
    if not after or unicodedata.category(after)[0] not in "LM":
        return name_script(before) in JOINING_SCRIPTS
    return name_script(before) == name_script(after) and name_script(before) in JOINING_SCRIPTS


@lru_cache(maxsize=4096)
def name_script(char: str) -> str:
    """The first word of a character's Unicode name ("ARABIC", "DEVANAGARI"): its script, for the
    scripts that name their characters so."""
    return unicodedata.name(char, "").split(" ", 1)[0]


@lru_cache(maxsize=4096)
def letter_script(char: str) -> str | None:
    """The confusable script of a letter ("Latin", "Cyrillic"…), None for any other character."""
    if not unicodedata.category(char).startswith("L") or char == MICRO_SIGN:
        return None
    base = unicodedata.normalize("NFKD", char)[:1] or char
    name = unicodedata.name(base, "")
    script = next((s for s in CONFUSABLE_SCRIPTS if name.startswith(s + " ")), None)
    return script.title() if script else None


TOKEN = re.compile(r"\S+")


def words(text: str):
    """(offset, word) for each word outside ASCII: a run of letters, marks and invisible format
    characters (which do not split what the eye reads as one word)."""
    for token in TOKEN.finditer(text):
        chunk = token.group()
        if chunk.isascii():
            continue
        start = None
        for i, char in enumerate(chunk + " "):
            inside = unicodedata.category(char)[0] in "LM" or unicodedata.category(char) == "Cf"
            if inside and start is None:
                start = i
            elif not inside and start is not None:
                yield token.start() + start, chunk[start:i]
                start = None


def mixed_script_words(text: str) -> list[tuple[MixedWord, list[Segment]]]:
    """Each word whose letters come from two or more confusable scripts, with a segment for each
    letter outside the word's main script (its most common; on a tie, its first letter's)."""
    found = []
    for offset, word in words(text):
        letters = [(i, c, s) for i, c in enumerate(word) if (s := letter_script(c))]
        scripts = Counter(s for _, _, s in letters)
        if len(scripts) < 2:
            continue
        main = max(scripts, key=lambda s: (scripts[s], s == letters[0][2]))
        foreign = [(i, c, s) for i, c, s in letters if s != main]
        segments = [Segment(offset + i, offset + i + 1, c, c, Hidden.MIXED_SCRIPT,
                            f"{s} letter in a {main} word: {described(c)}") for i, c, s in foreign]
        found.append((MixedWord(word, main, tuple((c, s) for _, c, s in foreign)), segments))
    return found


def marked_html(found: Found, start: int = 0, end: int | None = None) -> SafeString:
    """The text's characters start..end, escaped, each hidden character replaced by its marker
    and each mixed-script letter highlighted. A marker is shown in the slice where it starts, so
    slices that tile the text show each once."""
    segments = found.segments
    end = segments_end(found) if end is None else end
    out = []
    # The first segment that reaches past `start`: a page cuts a text into a slice per rule match.
    for seg in segments[max(bisect_right(found.starts, start) - 1, 0):]:
        if seg.start >= end:
            break
        if seg.end <= start:
            continue
        if seg.kind is None:
            out.append(escape(seg.text[max(start, seg.start) - seg.start:min(end, seg.end) - seg.start]))
        elif seg.start >= start:
            css = "script-mix" if seg.kind == Hidden.MIXED_SCRIPT else "hidden-char"
            out.append(f'<span class="{css} hidden-{seg.kind.value}" title="{escape(seg.title)}">{escape(seg.shown)}</span>')
    return mark_safe("".join(out))  # every piece above is escaped


def segments_end(found: Found) -> int:
    return found.segments[-1].end if found.segments else 0


def visible_html(text: str) -> SafeString:
    """`text` escaped with its hidden characters shown (a short string: an excerpt, a value)."""
    text = text or ""
    if text.isascii():  # find's own shortcut, without building its segment (a diff shows 45,000 terms)
        return mark_safe(escape(text))
    return marked_html(find(text))


# What a terminal acts on instead of showing: the C0 and C1 controls (a line break, a carriage
# return, the escape that starts a colour or cursor sequence) and the line and paragraph separators.
TERMINAL_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
ELLIPSIS = "…"


def visible_text(text: str, *, limit: int | None = None) -> str:
    """`text` as plain text for a terminal or a log line: each hidden character replaced by its
    marker as the page shows it (`find`: `⟨U+202E⟩`, never the control itself) and each control a
    terminal would act on (TERMINAL_CONTROLS) by its code point too, so no text can reorder,
    hide or overwrite what is printed around it. With `limit`, at most that many characters of the
    text are shown, then "…"; a marker is never cut."""
    text = text or ""
    shown, used = [], 0
    for seg in find(text).segments:
        if limit is not None and used >= limit:
            break
        if seg.kind is None:
            piece = seg.text if limit is None else seg.text[:limit - used]
            used += len(piece)
            shown.append(TERMINAL_CONTROLS.sub(lambda found: f"⟨{code(found.group())}⟩", piece))
        else:
            used += seg.end - seg.start
            shown.append(seg.shown)
    return "".join(shown) + (ELLIPSIS if used < len(text) else "")
