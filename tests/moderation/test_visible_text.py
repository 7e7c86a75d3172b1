"""What a browser would hide of a text is shown: bidi controls and invisible characters become
markers, letters of another script than their word's are highlighted, and what is how a text is
written (emoji sequences, joining scripts, plain text in any script) is left as it is."""

from __future__ import annotations

import html
import re
import sys
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from moderation.templatetags.moderation_rules import highlight_terms
from moderation.text.visible import Hidden, find, marked_html, visible_html
from tests.helpers import examples

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
        "\u061c"]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u2061", "\u2062", "\u2063", "\u2064", "\ufeff", "\u00ad", "\u180e",
             "\u034f", "\u3164"]
RAW_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # always replaced, whatever surrounds them
RAW_HIDDEN = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u00ad\U000e0000-\U000e007f]")
# Format characters that belong to their script or render: left alone (moderation/text/visible.py).
PREPENDED = {*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD, *range(0x13430, 0x13439)}


def kinds(text: str) -> list[tuple[Hidden, str]]:
    return [(s.kind, s.text) for s in find(text).segments if s.kind]


def shown(text: str) -> str:
    return "".join(s.shown for s in find(text).segments)


@pytest.mark.parametrize("char", BIDI)
def test_each_bidi_control_is_replaced_by_its_code_point(char):
    found = find(f"abc{char}def")
    assert kinds(f"abc{char}def") == [(Hidden.BIDI, char)]
    assert shown(f"abc{char}def") == f"abc⟨U+{ord(char):04X}⟩def"
    assert found.counts == {Hidden.BIDI: 1}


def test_a_reversed_word_shows_its_override_and_never_the_reversed_reading():
    assert shown("\u202eesrever") == "⟨U+202E⟩esrever"
    rendered = visible_html("\u202eesrever")
    assert "\u202e" not in rendered and "⟨U+202E⟩</span>esrever" in rendered
    assert 'title="U+202E RIGHT-TO-LEFT OVERRIDE"' in rendered


@pytest.mark.parametrize("char", INVISIBLE)
def test_each_zero_width_or_invisible_character_between_latin_letters_is_marked(char):
    assert kinds(f"id{char}iot") == [(Hidden.INVISIBLE, char)]
    assert shown(f"id{char}iot") == f"id⟨U+{ord(char):04X}⟩iot"


def test_a_zero_width_space_inside_a_word_is_shown_where_it_is():
    assert shown("id\u200biot") == "id⟨U+200B⟩iot"
    assert find("you id\u200biot").notice == (
        "This text contains 1 zero-width or invisible character, shown as ⟨U+…⟩ in place of each.")


def test_every_format_character_is_marked_but_the_prepended_marks_of_their_scripts():
    unmarked = {cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"
                and not find(f"a{chr(cp)}b").any}
    assert unmarked == PREPENDED


@pytest.mark.parametrize("sequence", [
    "👩\u200d💻", "👨\u200d👩\u200d👧\u200d👦", "🏳\ufe0f\u200d🌈", "❤\ufe0f\u200d🔥", "👩🏽\u200d💻", "🏃\u200d♀\ufe0f",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England's flag
    "❤\ufe0f", "1\ufe0f\u20e3", "#\ufe0f\u20e3", "☺\ufe0e", "葛\U000e0100",
])
def test_emoji_keycap_flag_and_ideographic_sequences_are_left_alone(sequence):
    text = f"nice {sequence} work"
    assert not find(text).any and shown(text) == text


@pytest.mark.parametrize("word", ["می\u200cخواهم", "क्\u200dष", "ക്\u200d", "ക്\u200d ok", "ن\u200dه"])
def test_a_joiner_between_letters_of_a_script_that_shapes_with_it_is_left_alone(word):
    assert not find(word).any


def test_a_joiner_after_a_lone_emoji_before_a_letter_or_between_scripts_is_marked():
    assert kinds("👍\u200dok") == [(Hidden.INVISIBLE, "\u200d")]
    assert kinds("ک\u200cb") == [(Hidden.INVISIBLE, "\u200c")] and kinds("b\u200c") == [(Hidden.INVISIBLE, "\u200c")]
    assert kinds("\u200d👍") == [(Hidden.INVISIBLE, "\u200d")]


def test_a_joiner_after_an_invisible_character_of_a_joining_script_is_marked_too():
    # U+180E is named "MONGOLIAN" and Mongolian shapes with joiners: the joiner after it joins nothing.
    assert kinds("i\u180e\u200c d") == [(Hidden.INVISIBLE, "\u180e"), (Hidden.INVISIBLE, "\u200c")]
    assert kinds("ک \u200cb") == [(Hidden.INVISIBLE, "\u200c")]


def test_tag_characters_outside_a_flag_show_the_text_they_spell():
    text = "hello\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065"
    (segment,) = [s for s in find(text).segments if s.kind]
    assert (segment.kind, segment.start, segment.end) == (Hidden.TAG, 5, 11)
    assert segment.shown == "⟨tags U+E0069…: “ignore”⟩"
    assert kinds("x\U000e0001y") == [(Hidden.TAG, "\U000e0001")] and shown("x\U000e0001y") == "x⟨U+E0001⟩y"


def test_a_variation_selector_after_a_letter_is_marked():
    assert kinds("i\ufe00diot") == [(Hidden.VARIATION, "\ufe00")]
    assert kinds("\ufe0fstart") == [(Hidden.VARIATION, "\ufe0f")]


def test_a_latin_word_with_a_cyrillic_letter_has_that_letter_highlighted():
    found = find("you idіot")
    (mark,) = [s for s in found.segments if s.kind]
    assert (mark.kind, mark.start, mark.end, mark.text, mark.shown) == (Hidden.MIXED_SCRIPT, 6, 7, "і", "і")
    assert mark.title.startswith("Cyrillic letter in a Latin word: U+0456")
    assert found.counts == {Hidden.MIXED_SCRIPT: 1}
    assert found.notice == ("This text has 1 word mixing scripts, the letters of the other script highlighted: "
                            "“idіot” (і Cyrillic in a Latin word).")


@pytest.mark.parametrize(("text", "letters", "script"), [
    ("pаypаl", ["а", "а"], "Latin"),        # two Cyrillic а
    ("Gοοgle", ["ο", "ο"], "Latin"),        # Greek omicrons
    ("прivет", ["i", "v"], "Cyrillic"),     # a Latin i and v in a Cyrillic word
    ("ｂоdoh", ["о"], "Latin"),             # a fullwidth ｂ counts as the Latin it imitates
    ("bоdoh!", ["о"], "Latin"),            # punctuation is not part of the word
])
def test_letters_from_another_script_than_their_words_are_found(text, letters, script):
    (word,) = find(text).mixed_words
    assert [letter for letter, _ in word.foreign] == letters and word.script == script


@pytest.mark.parametrize("text", [
    "", "plain ascii, with <b>tags</b> & punctuation!", "naïve café über", "Привет, мир", "Γειά σου κόσμε",
    "日本語のテキストとカタカナ", "iPhone用のケース", "hello—привет «мир»", "5 µm", "Ⅻ ½ ① ﬁne", "👍🏻 🇮🇩 ✌️",
    "apa kabar, bodoh sekali", "e\u0301", "مرحبا بالعالم", "שלום עולם",
])
def test_plain_text_in_any_script_is_left_as_it_is(text):
    found = find(text)
    assert not found.any and found.notice == "" and shown(text) == text
    assert visible_html(text) == html.escape(text, quote=True)


def test_the_notice_counts_each_kind_in_words():
    found = find("id\u200biot a\u200bb \u202eesrever idіot")  # in a fixed order, whatever the text's
    assert found.notice.startswith(
        "This text contains 1 bidirectional control and 2 zero-width or invisible characters, "
        "shown as ⟨U+…⟩ in place of each. It has 1 word mixing scripts")


def test_a_stored_match_keeps_its_place_around_and_across_markers():
    text = "\u202eesrever id\u200biot bodoh"
    matches = [{"start": 9, "end": 15, "rule": "r1", "term": "idiot", "action": "reject"},
               {"start": 16, "end": 21, "rule": "r2", "term": "bodoh", "action": "manual_review"}]
    rendered = highlight_terms(text, matches)
    assert rendered.startswith('<span class="hidden-char hidden-bidi" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>'
                               "esrever ")
    assert ('<mark class="rule-match rule-reject" title="r1: idiot">id<span class="hidden-char hidden-invisible" '
            'title="U+200B ZERO WIDTH SPACE">⟨U+200B⟩</span>iot</mark>') in rendered
    assert '<mark class="rule-match rule-manual_review" title="r2: bodoh">bodoh</mark>' in rendered
    assert RAW_HIDDEN.search(rendered) is None


# Property tests: any text.
ANY_CHAR = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")  # no stored text holds either
SPECIAL = BIDI + INVISIBLE + ["\U000e0067", "\U000e007f", "🏴", "\ufe0f", "\ufe00", "👩", "💻", "і", "а", "ο", "a", "i",
                              "ک", "क", "\u094d", "<", "&", '"', " ", "\n", "\u0301"]
TEXTS = st.lists(st.sampled_from(SPECIAL) | st.text(ANY_CHAR, max_size=3), max_size=30).map("".join) | st.text(ANY_CHAR)


def unrendered(rendered: str, found) -> str:
    """The text back from the HTML: each marker put back as the characters it stands for."""
    pieces = iter(s.text for s in found.segments if s.kind)
    out = re.sub(r'<span class="[^"]*" title="[^"]*">.*?</span>', lambda _: "\x00", rendered, flags=re.S)
    return "".join(next(pieces) if part == "\x00" else html.unescape(part) for part in re.split("(\x00)", out))


@settings(max_examples=examples(400), deadline=None)
@given(text=TEXTS)
@example(text="\u202eesrever")
@example(text="a\U000e0067\U000e007f")
def test_any_text_is_cut_into_segments_that_give_it_back(text):
    found = find(text)
    assert "".join(s.text for s in found.segments) == text
    pos = 0
    for segment in found.segments:
        assert segment.start == pos and text[segment.start:segment.end] == segment.text and segment.end > segment.start
        pos = segment.end
    rendered = marked_html(found)
    assert RAW_BIDI.search(rendered) is None
    assert unrendered(rendered, found) == text
    assert found.any == bool(found.notice) == any(s.kind for s in found.segments)


@settings(max_examples=examples(300), deadline=None)
@given(text=TEXTS, cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6))
def test_slices_that_tile_the_text_show_each_marker_once(text, cuts):
    found = find(text)
    bounds = [0, *sorted(min(c, len(text)) for c in cuts), len(text)]
    assert "".join(marked_html(found, a, b) for a, b in zip(bounds, bounds[1:], strict=False)) == marked_html(found)


@settings(max_examples=examples(200), deadline=None)
@given(text=TEXTS, spans=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12)), max_size=4))
def test_highlighted_terms_over_any_text_carry_no_raw_control(text, spans):
    matches = [{"start": s, "end": s + n, "rule": "r", "term": "t", "action": "reject"} for s, n in spans if s + n <= len(text)]
    rendered = highlight_terms(text, matches)
    assert RAW_BIDI.search(rendered) is None
    assert unrendered(re.sub(r"</?mark[^>]*>", "", rendered), find(text)) == text


def test_the_notice_quotes_a_mixed_word_with_its_controls_as_markers():
    # A Latin letter, an embedding, a Cyrillic letter: one "word mixing scripts", quoted by the notice.
    assert "“a⟨U+202A⟩і” (і Cyrillic in a Latin word)" in find("a\u202aі").notice


@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_no_notice_carries_a_raw_control(text):
    assert RAW_BIDI.search(find(text).notice) is None
