"""Watched terms survive evasion and respect word boundaries (moderation.text.matching)."""

from __future__ import annotations

import pytest

from moderation.text.matching import TermMatcher, canonical

TERMS = ["bodoh", "ass", "shit", "kill", "dasar bodoh", "cock", "1488", "hell", "tit", "cum", "cunt", "sex"]


def matched(text: str, terms=TERMS) -> list[tuple[str, str]]:
    return [(terms[hit.term], text[hit.start:hit.end]) for hit in TermMatcher(terms).find(text)]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("BODOH", "BODOH"),                 # case
        ("bódóh", "bódóh"),                 # diacritics
        ("b0d0h", "b0d0h"),                 # leetspeak digits
        ("bodohhh", "bodohhh"),             # repeated letters
        ("boooodoh", "boooodoh"),
        ("b.o.d.o.h", "b.o.d.o.h"),         # separators inside the word
        ("b-o-d-o-h", "b-o-d-o-h"),
        ("b_o_d_o_h", "b_o_d_o_h"),
        ("b o d o h", "b o d o h"),         # spaced out letter by letter
        ("bo.doh", "bo.doh"),
        ("B.0.D.0.H!!!", "B.0.D.0.H"),      # all at once
        ("bоdoh", "bоdoh"),                 # a Cyrillic о that looks Latin
        ("ｂｏｄｏｈ", "ｂｏｄｏｈ"),       # full-width letters
    ],
)
def test_evasions_of_a_term_are_caught(text, written):
    assert ("bodoh", written) in matched(f"dasar {text} kamu") or ("bodoh", written) in matched(text)


@pytest.mark.parametrize(
    ("text", "term", "written"),
    [("a$$", "ass", "a$$"), ("@ss", "ass", "@ss"), ("sh!t", "shit", "sh!t"), ("5h1t", "shit", "5h1t"),
     ("k1ll", "kill", "k1ll"), ("killl", "kill", "killl")],
)
def test_leetspeak_symbols_read_as_letters(text, term, written):
    assert (term, written) in matched(f"you {text} now")


# Real words that contain a watched term (each example holds one of TERMS as a substring).
SCUNTHORPE = [
    "Scunthorpe United won at home",    # the classic: "cunt" inside a town's name
    "a classic assessment of the class",  # "ass" inside words
    "Sussex and Essex",                 # "sex"
    "shitake mushrooms",                # "shit" as a prefix
    "a skilled killer whale",          # "kill" inside words ("killer" is another word)
    "cocktail at the peacock",          # "cock"
    "hello shell, said Michelle",       # "hell"
    "the title of the constitution",    # "tit"
    "cucumber with cumin",              # "cum"
]


@pytest.mark.parametrize(
    "text",
    [
        *SCUNTHORPE,
        "as if", "hel", "kil",              # shorter than the term: one letter less is another word
        "call 455 or 808",                  # numbers are not leetspeak for "ass" or "bob"
    ],
)
def test_words_that_merely_contain_a_term_do_not_match(text):
    assert matched(text) == []


@pytest.mark.parametrize("text", SCUNTHORPE)
def test_each_scunthorpe_example_really_contains_a_watched_term(text):
    # Otherwise its test above would pass whatever the word boundaries do.
    assert any(term in text.lower() for term in TERMS), text


def test_a_repeated_letter_must_appear_at_least_as_often_as_in_the_term():
    assert matched("as") == [] and matched("asss") == [("ass", "asss")]


def test_a_phrase_matches_across_any_spacing_and_punctuation_between_its_words():
    assert ("dasar bodoh", "dasar   bodoh") in matched("dasar   bodoh")
    assert ("dasar bodoh", "Dasar, bodoh") in matched("Dasar, bodoh!")
    assert ("dasar bodoh", "dasar b0d0h") in matched("dasar b0d0h")


def test_a_number_term_matches_the_number_only():
    assert matched("the 1488 code") == [("1488", "1488")]
    assert matched("year 2024") == []


def test_each_occurrence_is_reported_with_its_span_in_the_original_text():
    text = "BODOH, kamu b.o.d.o.h"
    assert [(text[h.start:h.end]) for h in TermMatcher(["bodoh"]).find(text)] == ["BODOH", "b.o.d.o.h"]


def test_terms_and_texts_share_one_normalisation():
    assert canonical("  Dásar   B0D0H ") == "dasar bodoh"
    assert canonical("🤬🤬") == ""


def test_an_empty_matcher_matches_nothing():
    assert TermMatcher([]).find("anything") == []
    assert TermMatcher(["🤬"]).find("🤬") == []  # no letters: such terms are RE2 patterns (see rules)


def test_a_phrase_spelt_apart_word_by_word_still_matches_but_not_across_other_words():
    assert ("dasar bodoh", "d.a.s.a.r b.o.d.o.h") in matched("kamu d.a.s.a.r b.o.d.o.h")
    assert ("dasar bodoh", "d.a.s.a.r sangat b.o.d.o.h") not in matched("d.a.s.a.r sangat b.o.d.o.h")


# Texts with no word at all: emoji, punctuation, bidi and zero-width characters, combining marks.
WORDLESS = ["🤬🤬🤬🖕🖕", "!!! ???", "\u202e\u200b\u200d", "... --- ...", "🤬", "\u0301\u0302\u0303", " ", ""]


@pytest.mark.parametrize("text", WORDLESS)
def test_a_text_with_no_word_matches_nothing_and_does_not_fail(text):
    assert TermMatcher(TERMS).find(text) == []


def test_words_around_a_wordless_stretch_still_match():
    assert matched("🤬🤬 bodoh 🖕 ... k.i.l.l") == [("bodoh", "bodoh"), ("kill", "k.i.l.l")]
