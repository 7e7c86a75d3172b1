"""Long Indonesian comments measured by five folds of their pools (training/RESULTS.md, "Third round").

    python -m training.long_folds [--folds 5]

The written long comments (training/written.py, `long_comments`) are dealt into pools, and `make
model`'s split holds out only the few pools its hash picks. Here fold f trains `make model`'s way
(the same rows, split, calibration and thresholds) with the pools whose number modulo --folds is
f held out of training, and scores those pools' comments the way the policy judges a long text:
each category's score is its worst part's (moderation.text.parts) or the whole text's, whichever
is higher (`part_rule` max), with the fold's own thresholds. The held-out comments are the pool's
benign long comments, and as many abusive ones: one or two of the pool's abusive sentences put
among one to four of its benign sentences (never trained on in this form). Prints each fold's and
the pooled figures of "not approved". Writes its models under --work (a temporary folder by
default); never the shipped one.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import tempfile
from pathlib import Path

import numpy as np

from moderation.providers.local_model import load
from moderation.text import parts as text_parts
from moderation.text.normal import normalize
from training import train, written
from training.labels import Row


def pool_of(group: str) -> int | None:
    return int(group.rsplit("-", 1)[1]) if group.startswith("id-long-") else None


def abusive_comments(pool: int, count: int, rng: random.Random) -> list[Row]:
    """`count` comments of one pool: one or two of its abusive sentences among one to four of its
    benign ones (the categories of the abusive sentences)."""
    benign = written.ID_LONG_BENIGN[pool::written.LONG_POOLS]
    abusive = written.ID_LONG_ABUSIVE[pool::written.LONG_POOLS]
    rows = []
    for _ in range(count):
        chosen = rng.sample(benign, rng.randint(1, min(4, len(benign))))
        bad = rng.sample(abusive, 2 if len(abusive) > 1 and rng.random() < 0.25 else 1)
        for _positive, sentence in bad:
            chosen.insert(rng.randint(0, len(chosen)), sentence)
        positive = tuple(sorted({c for p, _s in bad for c in p}))
        rows.append(Row(" ".join(chosen), "id", "written-id", positive, (), group=f"id-long-{pool:02d}"))
    return rows


def judged(model, texts: list[str]) -> np.ndarray:
    """Per text and category: the higher of the whole text's score and its worst part's."""
    normal = [normalize(t).text for t in texts]
    scores = model.predict(normal)
    for k, text in enumerate(normal):
        found = text_parts.parts(text)
        if len(found) > 1:
            scores[k] = np.maximum(scores[k], model.predict([text[a:b] for a, b in found]).max(axis=0))
    return scores


def line(name: str, label: np.ndarray, decided: np.ndarray) -> str:
    got = train.figures(label, decided)
    return (f"{name:10} n={got['texts']:4} abusive {int(label.sum()):4} P {got['precision']:.3f} R {got['recall']:.3f} "
            f"F1 {got['f1']:.3f} to humans {got['to_humans']:.1%}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=None, help="where the folds' models go (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.folds < 2 or args.folds > written.LONG_POOLS:
        parser.error(f"--folds must be between 2 and {written.LONG_POOLS}")
    rows = written.long_comments()
    usual = train.split_of
    labels, outcomes = [], []
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        try:
            for fold in range(args.folds):
                def split_of(group: str, fold: int = fold) -> str:
                    pool = pool_of(group)
                    return usual(group) if pool is None else "heldout" if pool % args.folds == fold else "train"

                train.split_of = split_of
                path = work / f"fold-{fold}.npz"
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    train.main(["--output", str(path), "--heldout", str(work / f"heldout-{fold}")])
                model = load(path)
                levels = model.meta["thresholds"]
                review = np.array([levels[c]["review"] for c in model.categories])
                reject = np.array([levels[c]["reject"] for c in model.categories])
                rng = random.Random(f"{train.SEED}:{fold}")
                held = [r for r in rows if r.functionality == "long-benign" and pool_of(r.group) % args.folds == fold]
                for pool in sorted({pool_of(r.group) for r in held}):
                    held += abusive_comments(pool, sum(pool_of(r.group) == pool for r in held), rng)
                label = np.array([r.label for r in held])
                decided = train.outcome(judged(model, [r.text for r in held]), review, reject)
                print(line(f"fold {fold}", label, decided), flush=True)
                labels.append(label)
                outcomes.append(decided)
        finally:
            train.split_of = usual
    print(line("all folds", np.concatenate(labels), np.concatenate(outcomes)))


if __name__ == "__main__":
    main()
