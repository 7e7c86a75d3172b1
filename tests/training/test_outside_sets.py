"""`python -m training.outside` reads each outside test set from its fetched copy, at the commit
its SETS entry names, and maps the set's own columns and labels to evaluate_policy's (text,
label, language, category). Worked here on fetched copies made in a temporary directory, with
rows written for this test in each set's format (no set's text is in the repository)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

from tests.helpers import git_repository  # noqa: E402
from training import outside  # noqa: E402 - after the skip: training needs scikit-learn


def fetched_copy(mirror: Path, repo: str, path: str, data: bytes) -> str:
    """A bare git directory where `fetch` leaves one (mirror/owner+name/repo) holding `data` at
    `path`; returns its commit."""
    work = mirror / "work" / repo.replace("/", "+")
    git = git_repository(work, {path: data}, "set")
    bare = mirror / repo.replace("/", "+") / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    def add(name: str, data: bytes) -> Path:
        repo, _, path = outside.SETS[name]
        commit = fetched_copy(tmp_path, repo, path, data)
        monkeypatch.setitem(outside.SETS, name, (repo, commit, path))
        return tmp_path
    return add


def test_the_instagram_comments_are_bullying_when_negative_with_their_whitespace_folded(mirror):
    data = ("\ufeffId,Sentiment,Instagram Comment Text\n"
            '1,negative,"kamu  jelek\nsekali"\n'
            "2,positive,cantik banget kak\n"
            "3,negative,dasar tidak tahu malu\n").encode()

    rows = outside.examples(mirror("instagram-id", data), "instagram-id")

    assert rows == [
        {"text": "kamu jelek sekali", "label": 1, "language": "id", "category": "instagram"},
        {"text": "cantik banget kak", "label": 0, "language": "id", "category": "instagram"},
        {"text": "dasar tidak tahu malu", "label": 1, "language": "id", "category": "instagram"},
    ]


def test_seahatecheck_keeps_each_case_functionality_for_the_per_functionality_figures(mirror):
    data = ("\ufeffc_testcase,t_gold,t_function\n"
            " orang itu harus diusir ,hateful,derog_neg_attrib_h\n"
            "orang itu ramah,non-hateful,ident_pos_nh\n").encode()

    rows = outside.examples(mirror("seahatecheck-id", data), "seahatecheck-id")

    assert rows == [
        {"text": "orang itu harus diusir", "label": 1, "language": "id", "category": "derog_neg_attrib_h"},
        {"text": "orang itu ramah", "label": 0, "language": "id", "category": "ident_pos_nh"},
    ]


def test_a_set_missing_from_the_mirror_is_named_with_its_commit(tmp_path):
    with pytest.raises(SystemExit, match="cannot read Social-AI-Studio/SEAHateCheck@ad83e4cc8d6b"):
        outside.examples(tmp_path, "seahatecheck-id")


def test_the_csvs_are_never_written_inside_the_repository(capsys):
    with pytest.raises(SystemExit):
        outside.main(["--output", str(Path(outside.__file__).resolve().parents[1] / "var" / "outside")])

    assert "--output must lie outside the repository" in capsys.readouterr().err
