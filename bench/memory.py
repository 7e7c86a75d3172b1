"""Memory: what each piece a worker loads adds to a process, each step measured in a fresh process.

    python -m bench.memory [--steps django,sklearn,...] [--repeat 3]

Each line starts a new interpreter, runs the steps named before it and then its own, and prints
RSS, USS and PSS (MiB, from /proc through psutil) after each step, so a step's cost is its delta
over the step before it in the same process. `--repeat` runs each chain that many times and
prints the median. The steps:

- django: `django.setup()` with the production settings and every app's models imported, as a
  worker has them;
- sklearn: `import sklearn, scipy.sparse` (what unpickling the bundled model drags in);
- profanity_check: alt-profanity-check's own `predict_prob` (joblib pickles of the fitted
  TfidfVectorizer and CalibratedClassifierCV), called once;
- local: the provider's `_model()` (moderation/providers/local.py), called once;
- lingua-high-<langs>, lingua-low-<langs>: a detector for those languages (`en+id+ms`), with one
  short text of each language detected, so every language's models are loaded.

No database is touched: Django is set up, never connected.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from bench import common

TEXTS = {
    "en": "you are a complete idiot and everyone knows it",
    "id": "kamu benar-benar bodoh dan semua orang tahu itu",
    "ms": "awak memang bodoh dan semua orang tahu tentang itu",
    "de": "du bist ein kompletter Idiot und alle wissen es",
}
CHAINS = (
    ("django",),
    ("django", "sklearn"),
    ("django", "sklearn", "profanity_check"),
    ("django", "local"),
    ("django", "lingua-high-en+id+ms"),
    ("django", "lingua-low-en+id+ms"),
    ("django", "lingua-high-en+id"),
    ("django", "lingua-high-en"),
    ("django", "local", "lingua-high-en+id+ms"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chain", action="append", help="steps joined by ',' (repeatable; default: a fixed set)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # internal: run one chain in this process
    args = parser.parse_args()
    if args.run:
        return _run(args.run.split(","))
    chains = [tuple(c.split(",")) for c in args.chain] if args.chain else CHAINS
    rows = []
    for chain in chains:
        runs = [json.loads(_child(",".join(chain))) for _ in range(args.repeat)]
        previous = {"rss": runs[0][0]["start"]["rss"], "uss": 0.0, "pss": 0.0}
        for index in range(len(chain)):
            figures = {k: statistics.median(run[index][k] for run in runs) for k in ("rss", "uss", "pss")}
            start = statistics.median(run[0]["start"]["rss"] for run in runs)
            before = start if index == 0 else previous["rss"]
            rows.append([" > ".join(chain[:index + 1]), figures["rss"], figures["rss"] - before,
                         figures["uss"], figures["pss"]])
            previous = figures
    print(f"Memory per step (MiB; median of {args.repeat} fresh processes; the interpreter alone: "
          f"{start:.1f} RSS)")
    print(common.table(["steps", "RSS", "RSS +", "USS", "PSS"], rows))


def _child(chain: str) -> str:
    env = {**os.environ, **common.PRODUCTION_ENV, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.setdefault("DATABASE_URL", "postgres://127.0.0.1:1/unused")  # set up, never connected
    run = subprocess.run([sys.executable, "-m", "bench.memory", "--run", chain], cwd=common.ROOT,
                         capture_output=True, text=True, env=env, timeout=600)
    if run.returncode:
        raise SystemExit(f"bench.memory --run {chain} failed:\n{run.stderr}")
    return run.stdout.strip().splitlines()[-1]


def _sample() -> dict[str, float]:
    import psutil

    info = psutil.Process().memory_full_info()
    return {"rss": info.rss / 2**20, "uss": info.uss / 2**20, "pss": info.pss / 2**20}


def _run(chain: list[str]) -> None:
    out = []
    start = _sample()
    for step in chain:
        STEPS[step.split("-", 1)[0]](step)
        out.append({"step": step, **_sample(), "start": start})
    print(json.dumps(out))


def _django(_step: str) -> None:
    sys.path.insert(0, str(common.ROOT))
    import django

    django.setup()
    import moderation.services  # noqa: F401  (what a worker imports before its first task)
    import moderation.tasks  # noqa: F401


def _sklearn(_step: str) -> None:
    import scipy.sparse  # noqa: F401
    import sklearn  # noqa: F401


def _profanity_check(_step: str) -> None:
    from profanity_check import predict_prob

    predict_prob([TEXTS["en"]])


def _local(_step: str) -> None:
    from moderation.providers.local import _model

    _model()([TEXTS["en"]])


def _lingua(step: str) -> None:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    _, mode, codes = step.split("-", 2)
    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, c.upper())) for c in codes.split("+")]
    if len(languages) == 1:  # lingua needs two to tell apart; the other is never loaded unless seen
        languages.append(Language.GERMAN)
    builder = LanguageDetectorBuilder.from_languages(*languages)
    if mode == "low":
        builder = builder.with_low_accuracy_mode()
    detector = builder.build()
    for text in TEXTS.values():
        detector.compute_language_confidence_values(text)


STEPS = {"django": _django, "sklearn": _sklearn, "profanity_check": _profanity_check, "local": _local,
         "lingua": _lingua}


if __name__ == "__main__":
    main()
