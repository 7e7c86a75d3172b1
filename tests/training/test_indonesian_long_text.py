"""The third round's Indonesian long text (training/RESULTS.md, "Third round"): the benign
reviews read from IndoNLU's SmSA, the project's long comments and their held-out pools, and the
review thresholds chosen with at most a fifth of each language's texts sent to people."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from training import public, written  # noqa: E402 - after the skip: training needs scikit-learn
from training.labels import Row, read_rows  # noqa: E402
from training.train import MAX_TO_HUMANS, choose_thresholds, outcome, split_of  # noqa: E402


class FakeMirror:
    """Mirror.text for the two SmSA files, from strings."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def text(self, repo: str, path: str) -> str:
        assert repo == "IndoNLP/indonlu"
        return self.files[path]


SMSA = "dataset/smsa_doc-sentiment-prosa/"


def test_smsa_keeps_positive_and_neutral_rows_without_a_listed_term_and_adds_their_sentences():
    mirror = FakeMirror({
        SMSA + "train_preprocess.tsv": "\n".join([
            "makanan nya enak . tempat nya nyaman .\tpositive",
            "pelayanan nya lambat sekali .\tnegative",  # negative: may insult someone, left out
            "pelayan nya goblok .\tpositive",  # a listed insult: left out whatever the label
            "sudah di revisi om\tneutral",
        ]),
        SMSA + "valid_preprocess.tsv": "DASAR BODOH semua\tneutral\nparkir nya luas\tpositive",
    })

    rows = public.indonlu_smsa(mirror)

    texts = [r.text for r in rows]
    assert texts == ["makanan nya enak . tempat nya nyaman .", "makanan nya enak .", "tempat nya nyaman .",
                     "sudah di revisi om", "parkir nya luas"]
    assert all(r.label == 0 and r.language == "id" and r.source == "indonlu-smsa" for r in rows)
    # A review's sentences are in its group, so a split never puts a sentence apart from its review.
    assert len({r.group for r in rows[:3]}) == 1 and rows[3].group != rows[0].group


def test_the_committed_benign_rows_hold_no_listed_term():
    listed = public._listed_words()
    rows = read_rows(public.BENIGN_ID_OUTPUT)

    assert len(rows) > 30_000
    assert not [r.text for r in rows if listed.search(r.text.casefold())]
    assert {r.label for r in rows} == {0}


def test_long_comments_take_every_sentence_from_their_own_pool(monkeypatch):
    # Chat spelling rewrites words ("tidak" -> "gak"): without it each sentence is found verbatim.
    monkeypatch.setattr(written, "informal", lambda text, rng: text)
    rows = written.long_comments()
    pools: dict[str, set[str]] = {}
    for row in rows:
        pools.setdefault(row.group, set())
    benign_of = {s.lower(): k % written.LONG_POOLS for k, s in enumerate(written.ID_LONG_BENIGN)}

    assert len(pools) == written.LONG_POOLS
    for row in (r for r in rows if r.functionality == "long-benign"):
        assert row.label == 0
        pool = int(row.group.rsplit("-", 1)[1])
        # every written benign sentence found in the comment belongs to the comment's pool
        found = [p for s, p in benign_of.items() if s.rstrip(".?") in row.text.lower()]
        assert found and set(found) == {pool}
    abusive = [r for r in rows if r.label]
    assert len(abusive) == len(written.ID_LONG_ABUSIVE)
    assert all(r.functionality == "long-sentence" for r in abusive)


def test_a_held_out_long_comment_pool_exists_and_no_sentence_of_it_trains():
    rows = written.long_comments()
    held = {r.group for r in rows if split_of(r.group) == "heldout"}
    assert held
    trained = {r.text.lower() for r in rows if split_of(r.group) == "train"}
    assert not {r.text.lower() for r in rows if r.group in held and r.functionality == "long-sentence"} & trained


def test_review_thresholds_send_at_most_a_fifth_of_each_language_to_people():
    # English: 100 texts, 30 abusive scored 0.6, 70 benign spread over 0.0-0.69; Indonesian: 900
    # easy benign texts scored 0.01, 100 abusive scored 0.45. Counted over all 1,100 texts, a
    # review threshold of 0.45 sends 14% to people, but half of the English texts.
    rng = np.random.default_rng(47)
    en = np.concatenate([np.full(30, 0.6), rng.uniform(0.0, 0.69, 70)])
    scores = np.concatenate([en, np.full(900, 0.01), np.full(100, 0.45)])
    p = np.zeros((len(scores), 5))
    p[:, 0] = scores
    rows = ([Row("x", "en", "t", ("insult",) if k < 30 else ()) for k in range(100)]
            + [Row("x", "id", "t") for _ in range(900)] + [Row("x", "id", "t", ("insult",)) for _ in range(100)])

    review, reject = choose_thresholds(p, rows)

    decided = outcome(p, review, reject)
    for language in ("en", "id"):
        mask = np.array([r.language == language for r in rows])
        assert (decided[mask] == 1).mean() <= MAX_TO_HUMANS


def test_the_benign_rows_file_reads_back_to_the_same_lines(tmp_path: Path):
    # Deterministic and lossless: the rows read from the committed file, written again, give the
    # same JSON lines (the gzip header names its own file).
    import gzip

    from training.labels import write_rows

    out = tmp_path / "again.jsonl.gz"
    write_rows(out, read_rows(public.BENIGN_ID_OUTPUT))
    assert gzip.decompress(out.read_bytes()) == gzip.decompress(public.BENIGN_ID_OUTPUT.read_bytes())
