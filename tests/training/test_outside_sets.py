"""`python -m training.outside` reads each outside test set from its fetched copy, at the commit
its SETS entry names, and maps the set's own columns and labels to evaluate_policy's (text,
label, language, category). Worked here on fetched copies made in a temporary directory, with
rows written for this test in each set's format (no set's text is in the repository)."""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

pytest.importorskip("sklearn")

from tests.helpers import git_repository  # noqa: E402
from training import outside  # noqa: E402 - after the skip: training needs scikit-learn


def fetched_copy(mirror: Path, repo: str, files: dict[str, bytes]) -> str:
    """A bare git directory where `fetch` leaves one (mirror/owner+name/repo) holding `files`
    (path: data); returns its commit."""
    work = mirror / "work" / repo.replace("/", "+")
    git = git_repository(work, files, "set")
    bare = mirror / repo.replace("/", "+") / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    def add(name: str, data: bytes, **more: bytes) -> Path:
        """The set's file holding `data`, and `more` files beside it (path with "/" as "__")."""
        repo, _, path = outside.SETS[name]
        commit = fetched_copy(tmp_path, repo, {path: data, **{k.replace("__", "/"): v for k, v in more.items()}})
        monkeypatch.setitem(outside.SETS, name, (repo, commit, path))
        return tmp_path
    return add


@pytest.mark.parametrize(("name", "data", "expected"), [
    pytest.param("instagram-id", ("\ufeffId,Sentiment,Instagram Comment Text\n"
                                  '1,negative,"kamu  jelek\nsekali"\n'
                                  "2,positive,cantik banget kak\n"
                                  "3,negative,dasar tidak tahu malu\n").encode(), [
        {"text": "kamu jelek sekali", "label": 1, "language": "id", "category": "instagram"},
        {"text": "cantik banget kak", "label": 0, "language": "id", "category": "instagram"},
        {"text": "dasar tidak tahu malu", "label": 1, "language": "id", "category": "instagram"},
    ], id="instagram: bullying when negative, whitespace folded"),
    pytest.param("seahatecheck-id", ("\ufeffc_testcase,t_gold,t_function\n"
                                     " orang itu harus diusir ,hateful,derog_neg_attrib_h\n"
                                     "orang itu ramah,non-hateful,ident_pos_nh\n").encode(), [
        {"text": "orang itu harus diusir", "label": 1, "language": "id", "category": "derog_neg_attrib_h"},
        {"text": "orang itu ramah", "label": 0, "language": "id", "category": "ident_pos_nh"},
    ], id="seahatecheck: each case's functionality kept, for the per-functionality figures"),
])
def test_a_csv_set_maps_its_own_columns_and_labels(mirror, name, data, expected):
    assert outside.examples(mirror(name, data), name) == expected


def xlsx(rows: list[list[str | None]]) -> bytes:
    """A workbook whose first sheet holds `rows` as shared strings; a None cell is left out of
    the sheet, as spreadsheet programs leave out empty cells."""
    strings, sheet = [], []
    for r, row in enumerate(rows, start=1):
        cells = []
        for c, value in enumerate(row):
            if value is not None:
                strings.append(value)
                cells.append(f'<c r="{chr(ord("A") + c)}{r}" t="s"><v>{len(strings) - 1}</v></c>')
        sheet.append(f'<row r="{r}">{"".join(cells)}</row>')
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        book.writestr("xl/sharedStrings.xml", f'<sst xmlns="{main}">'
                      + "".join(f"<si><t>{escape(t)}</t></si>" for t in strings) + "</sst>")
        book.writestr("xl/worksheets/sheet1.xml", f'<worksheet xmlns="{main}"><sheetData>{"".join(sheet)}'
                      "</sheetData></worksheet>")
    return out.getvalue()


def test_the_abusive_tweets_are_abusive_at_label_zero_each_text_once_and_none_labelled_both_ways(mirror,
                                                                                                monkeypatch):
    monkeypatch.setitem(outside.EXCLUDED, "abusive-tweets-id", {outside.text_hash("teks yang dicadangkan")})
    data = xlsx([
        [None, "tweet", "cleanText", "label"],
        ["0", "dasar  kamu\nbodoh", "dasar kamu bodoh", "0.0"],
        ["1", "terima kasih kak", None, "1.0"],  # an empty cell the sheet leaves out
        ["2", "dasar kamu bodoh", "dasar kamu bodoh", "0.0"],  # the same tweet again
        ["3", "hari ini hujan", "hari ini hujan", "0.0"],
        ["4", "hari ini hujan", "hari ini hujan", "1.0"],  # labelled both ways
        ["5", "teks yang dicadangkan", "", "1.0"],  # shares passages with a reserved set
    ])

    rows = outside.examples(mirror("abusive-tweets-id", data), "abusive-tweets-id")

    assert rows == [
        {"text": "dasar kamu bodoh", "label": 1, "language": "id", "category": "tweets"},
        {"text": "terima kasih kak", "label": 0, "language": "id", "category": "tweets"},
    ]


def test_rtp_lx_is_toxic_where_the_median_rater_says_3_or_more_and_leaves_out_the_slightly_toxic(mirror):
    def prompt(text, ratings):
        return json.dumps({"Prompt": text, "Completion": "", "Locale": "ID",
                           "AnnotationsRaw": {"Toxicity": ratings, "Insult": [1, 1, 1]}})
    data = "\n".join([prompt("kalimat pertama ", [4, 3, 1]), prompt("kalimat kedua", [2, 2, 3]),
                      prompt("kalimat ketiga", [1, 1, 2]), ""]).encode()

    rows = outside.examples(mirror("rtp-lx-id", data), "rtp-lx-id")

    assert rows == [
        {"text": "kalimat pertama", "label": 1, "language": "id", "category": "rtp-lx"},
        {"text": "kalimat ketiga", "label": 0, "language": "id", "category": "rtp-lx"},
    ]


def test_ethos_is_hate_speech_where_half_of_its_annotators_or_more_said_so(mirror):
    data = (b"comment;isHate\n"
            b"first comment;0.5\n"
            b"second  comment;0.4666666\n"
            b"third comment;1.0\n")

    rows = outside.examples(mirror("ethos-en", data), "ethos-en")

    assert [(r["text"], r["label"]) for r in rows] == [("first comment", 1), ("second comment", 0),
                                                       ("third comment", 1)]


def test_stormfront_reads_each_sentence_from_its_file_and_leaves_out_relation_and_idk(mirror):
    data = (b"file_id,user_id,subforum_id,num_contexts,label\n"
            b"1_1,7,1,0,noHate\n1_2,7,1,0,hate\n1_3,7,1,1,relation\n2_1,8,1,0,idk/skip\n")
    files = {f"all_files__{name}.txt": text.encode() for name, text in
             (("1_1", "a first sentence\n"), ("1_2", "a second  sentence"), ("1_3", "a third"), ("2_1", "a fourth"))}

    rows = outside.examples(mirror("stormfront-en", data, **files), "stormfront-en")

    assert rows == [
        {"text": "a first sentence", "label": 0, "language": "en", "category": "stormfront"},
        {"text": "a second sentence", "label": 1, "language": "en", "category": "stormfront"},
    ]


def test_cadd_reads_the_comment_of_each_record_abusive_by_its_second_label(mirror):
    data = json.dumps({
        "a1": {"title": "a title", "body": "the post", "comment": "a  first comment", "L1": "3", "L2": "1"},
        "a2": {"title": "a title", "body": "the post", "comment": "a second comment", "L1": "0", "L2": "0"},
    }).encode()

    rows = outside.examples(mirror("cadd-en", data), "cadd-en")

    assert [(r["text"], r["label"]) for r in rows] == [("a first comment", 1), ("a second comment", 0)]


def test_youtoxic_and_cat_small_read_their_toxic_columns(mirror):
    youtoxic = "\ufeffText,IsToxic\nfirst one,TRUE\nsecond one,FALSE\n".encode()
    cat = b"text,parent_text,tox_codes_oc,label_oc,tox_codes_ic,label_ic\nthird one,a parent,x,0,y,1\n"

    assert [(r["text"], r["label"]) for r in outside.examples(mirror("youtoxic-en", youtoxic), "youtoxic-en")] == [
        ("first one", 1), ("second one", 0)]
    # Judged as the platform judges a comment: without its parent, as the raters of label_oc did.
    assert [(r["text"], r["label"]) for r in outside.examples(mirror("cat-small-en", cat), "cat-small-en")] == [
        ("third one", 0)]


@pytest.mark.parametrize(("reference", "column"), [("A1", 0), ("D7", 3), ("Z3", 25), ("AA10", 26), ("AB12", 27)])
def test_a_cell_reference_names_its_column(reference, column):
    assert outside._column(reference) == column


def test_a_set_missing_from_the_mirror_is_named_with_its_commit(tmp_path):
    with pytest.raises(SystemExit, match="cannot read Social-AI-Studio/SEAHateCheck@ad83e4cc8d6b"):
        outside.examples(tmp_path, "seahatecheck-id")


def test_the_csvs_are_never_written_inside_the_repository(capsys):
    with pytest.raises(SystemExit):
        outside.main(["--output", str(Path(outside.__file__).resolve().parents[1] / "var" / "outside")])

    assert "--output must lie outside the repository" in capsys.readouterr().err
