"""A long text cut into sentences or windows of words (moderation.text.parts): pure, never raises."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from moderation.text.parts import MAX_PARTS, MAX_WORD_CHARS, WINDOW_WORDS, parts, sentences
from tests.helpers import examples


def cut(text: str, **options) -> list[str]:
    return [text[start:end] for start, end in parts(text, **options)]


def test_english_sentences_are_cut_at_their_stops():
    text = "I loved the film. Did you? It was great!\u00a0The end… Really."
    assert cut(text) == ["I loved the film.", "Did you?", "It was great!", "The end…", "Really."]


def test_abbreviations_initials_and_numbers_end_no_sentence():
    text = "Mr. J. R. Smith met Dr. Lee at 3.45 p.m. on Jan. 5, e.g. at No. 10 Main St. and left. Then he slept."
    assert cut(text) == ["Mr. J. R. Smith met Dr. Lee at 3.45 p.m. on Jan. 5, e.g. at No. 10 Main St. and left.",
                         "Then he slept."]


def test_indonesian_sentences_and_abbreviations():
    text = ("Rapat diadakan di Jl. Sudirman no. 12 bersama Bpk. Hadi, Ibu Sari, dll. pada hari Senin. "
            "Harga naik jadi Rp 15.000. Kamu bodoh sekali! Apa kabar? baik-baik saja.")
    assert cut(text) == ["Rapat diadakan di Jl. Sudirman no. 12 bersama Bpk. Hadi, Ibu Sari, dll. pada hari Senin.",
                         "Harga naik jadi Rp 15.000.", "Kamu bodoh sekali!", "Apa kabar?", "baik-baik saja."]


def test_quotes_after_the_stop_stay_with_their_sentence_and_line_breaks_end_one():
    text = 'He said "stop it." (Then he left.)\nno punctuation on this line\n\n  and this one'
    assert cut(text) == ['He said "stop it."', "(Then he left.)", "no punctuation on this line", "and this one"]


def test_cjk_stops_end_a_sentence_without_a_space():
    assert cut("今日は晴れ。明日は雨！本当？") == ["今日は晴れ。", "明日は雨！", "本当？"]


def test_a_text_without_punctuation_is_cut_into_windows_that_overlap_by_half():
    words = [f"w{i}" for i in range(100)]
    windows = [part.split() for part in cut(" ".join(words))]
    assert all(len(w) <= WINDOW_WORDS for w in windows)
    assert [w[0] for w in windows] == [f"w{i}" for i in range(0, 100 - WINDOW_WORDS // 2, WINDOW_WORDS // 2)]
    assert windows[-1][-1] == "w99"
    # Any run of half a window lies whole inside one window: a bad phrase is never diluted by a cut.
    for first in range(100 - WINDOW_WORDS // 2):
        phrase = words[first:first + WINDOW_WORDS // 2]
        assert any(" ".join(phrase) in " ".join(w) for w in windows), first


def test_one_giant_line_without_spaces_is_cut_every_few_dozen_characters_and_bounded():
    text = "x" * 10 * MAX_WORD_CHARS * WINDOW_WORDS
    found = parts(text)
    assert 2 <= len(found) <= MAX_PARTS
    assert all(end - start <= MAX_WORD_CHARS * WINDOW_WORDS for start, end in found)


def test_a_huge_text_is_cut_into_at_most_max_parts_that_still_cover_it():
    text = "This is one short sentence. " * 5000
    found = parts(text)
    assert len(found) == MAX_PARTS
    covered = set()
    for start, end in found:
        covered.update(range(start, end))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())


def test_hostile_texts_are_cut_in_linear_time():
    for text in ("." * 1_000_000, "a." * 500_000, ".!" * 500_000, "\n" * 1_000_000, "Mr. " * 250_000):
        began = time.perf_counter()
        found = parts(text)
        assert time.perf_counter() - began < 3, text[:10]
        assert len(found) <= MAX_PARTS


def test_empty_and_blank_texts_have_no_parts():
    assert parts("") == [] and parts("   \n\t ") == [] and sentences("\u3000") == []


def assert_valid(text: str, found: list[tuple[int, int]], max_parts: int) -> None:
    assert len(found) <= max(max_parts, 1) or max_parts < 1
    for start, end in found:
        assert isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
    assert [s for s, _ in found] == sorted(s for s, _ in found)
    covered = bytearray(len(text))
    for start, end in found:
        covered[start:end] = b"\x01" * (end - start)
    missing = [i for i, c in enumerate(text) if not c.isspace() and not covered[i]]
    assert missing == [], (text, found)


@settings(max_examples=examples(400), deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_unicode_is_cut_into_valid_parts_that_cover_it(text):
    assert_valid(text, parts(text), MAX_PARTS)


TOKENS = st.sampled_from([" ", "\n", ".", ". ", "!", "? ", "…", "。", "Mr.", "e.g.", "dll.", "\u200b", "\u202e",
                          "👩\u200d💻", "é", "\u0301", "bodoh", "idiot", "\u3000", '" ', "'", ")", "\r\n", "\x00"])


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(TOKENS, st.text(max_size=8)), max_size=200), st.integers(1, 40), st.integers(1, 20))
def test_sentence_like_unicode_with_any_window_and_bound_is_cut_into_valid_parts(pieces, window, max_parts):
    text = "".join(pieces)
    assert_valid(text, parts(text, window=window, max_parts=max_parts), max_parts)
