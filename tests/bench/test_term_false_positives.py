"""The false-positive script of the default term lists (bench/term_false_positives.py) reads the
benign set it says it reads, and counts what it says it counts."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from bench import term_false_positives
from bench.term_false_positives import DATA, read_texts


def test_the_benign_set_holds_300_sentences_in_10_scripts_and_more():
    rows = read_texts(DATA)
    # A letter's script, as the first word of its Unicode name ("LATIN", "CJK", "HANGUL", "ETHIOPIC").
    scripts = {unicodedata.name(c, "?").split()[0] for _, text in rows for c in text if unicodedata.category(c)[0] == "L"}
    assert len(rows) >= 300 and len({language for language, _ in rows}) >= 20
    assert len(scripts) >= 10 and {"LATIN", "CYRILLIC", "GREEK", "ARABIC", "HEBREW", "DEVANAGARI", "THAI", "CJK",
                                   "HANGUL", "HIRAGANA", "ETHIOPIC"} <= scripts, scripts
    assert len({text for _, text in rows}) == len(rows)  # no sentence twice


def test_it_prints_each_false_positive_and_the_rate(tmp_path, monkeypatch, capsys):
    data = tmp_path / "benign.tsv"
    data.write_text("# a comment\nen\tThe classic Scunthorpe cocktail.\nid\tDasar anjing kamu.\nen\tGood morning\n",
                    encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["term_false_positives", "--data", str(data), "--languages", "en,id,ms"])
    term_false_positives.main()
    out = capsys.readouterr().out
    assert "false positive (unsure) [id] 'Dasar anjing kamu.': profanity:manual_review:id 'anjing'" in out
    assert "Scunthorpe" not in out
    assert out.splitlines()[-1].startswith("term_false_positives: 3 texts, false positives ")
    assert "1 (33.3%) with every language's rules" in out.splitlines()[-1]


def test_a_line_without_a_language_is_refused_with_its_number(tmp_path):
    data = tmp_path / "bad.tsv"
    data.write_text("en\tfine\njust text\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="bad.tsv:2: expected language<TAB>text"):
        read_texts(data)
