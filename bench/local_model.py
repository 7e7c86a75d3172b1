"""The default model's speed and memory (docs/model-card.md), each measured in a fresh process.

    python -m bench.local_model [--texts 20000] [--batch 64] [--rounds 3] [--before REF_OR_DIR]

- texts/s on one core: short texts (12 to 80 characters, English and Indonesian, benign and
  abusive) scored in batches of `--batch` through the provider's `predictor()`, in their normal
  form (the normal form's own cost is bench/normal_form.py's), the process pinned to one CPU;
  the median of `--rounds`;
- memory per worker: the RSS a process gains by loading the model and scoring one batch, over
  the same process with Django's settings and NumPy imported (what a worker has anyway), the
  heap trimmed; and the model file's size on disk.

Each measurement runs a checkout's own code (`bench.checkout.Checkout.python`: its `predictor()`,
its normal form, its virtualenv), so `--before` measures another checkout (a directory, or a git
ref exported to one: the code before a change, e.g. `--before 77866f6^` for alt-profanity-check,
on a virtualenv built from its requirements.txt) in the same run. `measure()` is what
bench.shipped prints beside its end-to-end figures (reviews/s and the RSS and PSS of the live
moderation workers, before and after). Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench import checkout

SHORT = [
    "thanks for the help yesterday", "you are a complete idiot", "see you at the meeting tomorrow",
    "I will kill you if you come back", "Terima kasih atas bantuannya kemarin", "dasar tolol, pergi sana",
    "Selamat pagi semua", "kamu bodoh banget sih", "great video, keep it up", "shut up you fucking moron",
    "besok kita rapat jam sembilan ya", "gue tusuk lu nanti malam", "what a lovely day in the park",
    "send me nudes", "harga cabai naik lagi minggu ini", "🖕🖕🖕",
]
# One thread for NumPy's libraries: a figure per core.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Django is set up in the measuring process, never connected.
UNUSED_DATABASE = "postgres://postgres@127.0.0.1:5432/bench_local_model_unused"

# Run by the checkout's own Python (Checkout.python: Django set up, `data` read): only what every
# version of the provider has, predictor() and normal_text(), and no package beyond its runtime.
SPEED = """
import os, time
os.sched_setaffinity(0, {data['cpu']})
from moderation.providers.local import predictor
from moderation.text.normal import normal_text
short, count, batch = data['short'], data['count'], data['batch']
texts = [normal_text(short[i % len(short)] + ('' if i < len(short) else f' {i % 97}')) for i in range(count)]
predict = predictor()
predict(texts[:batch])
started = time.perf_counter()
for start in range(0, count, batch):
    predict(texts[start:start + batch])
print(json.dumps({'texts_per_s': count / (time.perf_counter() - started)}))
"""
MEMORY = """
import ctypes
import numpy  # noqa: a worker has it (images, the detector) before the model

def rss_mib():
    with open('/proc/self/status') as status:
        return next(int(line.split()[1]) for line in status if line.startswith('VmRSS:')) / 1024

ctypes.CDLL('libc.so.6').malloc_trim(0)
before = rss_mib()
from moderation.providers.local import LocalProvider, predictor
predictor()(data['short'] * 4)
ctypes.CDLL('libc.so.6').malloc_trim(0)
print(json.dumps({'rss_before': before, 'rss_after': rss_mib(), 'model': LocalProvider.model_name}))
"""


def measure(code: checkout.Checkout, *, texts: int = 20000, batch: int = 64, rounds: int = 3) -> dict:
    """The model of `code`: texts/s on one core (each round), the RSS a process gains by loading
    it and scoring one batch (median of `rounds`), its name; each in a fresh process."""
    speeds = [code.python(UNUSED_DATABASE, SPEED, {"cpu": 0, "short": SHORT, "count": texts, "batch": batch},
                          env=ONE_THREAD)["texts_per_s"] for _ in range(rounds)]
    memory = [code.python(UNUSED_DATABASE, MEMORY, {"short": SHORT}, env=ONE_THREAD) for _ in range(rounds)]
    return {"commit": code.commit, "model": memory[0]["model"], "speeds": speeds, "texts_per_s": statistics.median(speeds),
            "grown_mib": statistics.median(m["rss_after"] - m["rss_before"] for m in memory),
            "texts": texts, "batch": batch, "rounds": rounds}


def describe(result: dict) -> str:
    return (f"{result['model']} ({result['commit']}): {result['texts_per_s']:,.0f} short texts/s on one core "
            f"(batches of {result['batch']}, {result['texts']} texts, median of {result['rounds']}: "
            f"{', '.join(f'{s:,.0f}' for s in result['speeds'])}); +{result['grown_mib']:.1f} MiB RSS a process "
            f"gains by loading it and scoring one batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="REF_OR_DIR",
                        help="also measure another checkout first (a directory, or a git ref exported to one)")
    args = parser.parse_args()
    codes = [checkout.this()]
    if args.before:
        other, why = (checkout.now(directory=args.before) if Path(args.before).is_dir()
                      else checkout.now(ref=args.before))
        if other is None:
            parser.error(f"--before: {why}")
        codes.insert(0, other)
    from moderation.providers.local_model import MODEL_PATH

    print(f"local model ({codes[-1].commit}): {MODEL_PATH.stat().st_size / 2**20:.2f} MiB on disk")
    for code in codes:
        print(("before: " if code is not codes[-1] else "this checkout: ") + describe(
            measure(code, texts=args.texts, batch=args.batch, rounds=args.rounds)), flush=True)


if __name__ == "__main__":
    main()
