"""The default model's speed and memory (docs/model-card.md), each measured in a fresh process.

    python -m bench.local_model [--texts 20000] [--batch 64] [--rounds 3]

- texts/s on one core: short texts (12 to 80 characters, English and Indonesian, benign and
  abusive) scored in batches of `--batch` through the provider's `predictor()`, in their normal
  form (the normal form's own cost is bench/normal_form.py's), the process pinned to one CPU;
  the median of `--rounds`;
- memory per worker: the RSS a process gains by loading the model and scoring one batch, over
  the same process with Django's settings and NumPy imported (what a worker has anyway), the
  heap trimmed; and the model file's size on disk.

End-to-end reviews/s before and after (the old model against this one) is bench/e2e.py's, run
on each checkout in the same session: `python -m bench.e2e --code DIR` for the one before
(docs/benchmarks.md). Figures are printed; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

SHORT = [
    "thanks for the help yesterday", "you are a complete idiot", "see you at the meeting tomorrow",
    "I will kill you if you come back", "Terima kasih atas bantuannya kemarin", "dasar tolol, pergi sana",
    "Selamat pagi semua", "kamu bodoh banget sih", "great video, keep it up", "shut up you fucking moron",
    "besok kita rapat jam sembilan ya", "gue tusuk lu nanti malam", "what a lovely day in the park",
    "send me nudes", "harga cabai naik lagi minggu ini", "🖕🖕🖕",
]


def _speed(count: int, batch: int) -> None:
    import time

    from moderation.providers.local import predictor
    from moderation.text.normal import normal_text

    texts = [normal_text(SHORT[i % len(SHORT)] + ("" if i < len(SHORT) else f" {i % 97}")) for i in range(count)]
    predict = predictor()
    predict(texts[:batch])
    started = time.perf_counter()
    for start in range(0, count, batch):
        predict(texts[start:start + batch])
    print(json.dumps({"texts_per_s": count / (time.perf_counter() - started)}))


def _memory() -> None:
    import ctypes

    import django
    import numpy  # noqa: F401 - a worker has it (images, the detector) before the model

    import psutil

    def rss_mib() -> float:
        return psutil.Process().memory_info().rss / 2**20

    django.setup()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    before = rss_mib()
    from moderation.providers.local import predictor

    predictor()(SHORT * 4)
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    print(json.dumps({"rss_before": before, "rss_after": rss_mib()}))


def _child(*args: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    run = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "bench.local_model", *args],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=("speed", "memory"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "speed":
        _speed(args.texts, args.batch)
        return
    if args.child == "memory":
        _memory()
        return
    from moderation.providers.local_model import MODEL_PATH

    speeds = [_child("--child", "speed", "--texts", str(args.texts), "--batch", str(args.batch))["texts_per_s"]
              for _ in range(args.rounds)]
    memory = [_child("--child", "memory") for _ in range(args.rounds)]
    grown = statistics.median(m["rss_after"] - m["rss_before"] for m in memory)
    print(f"local model: {MODEL_PATH.stat().st_size / 2**20:.2f} MiB on disk")
    print(f"local model: {statistics.median(speeds):,.0f} short texts/s on one core "
          f"(batches of {args.batch}, {args.texts} texts, median of {args.rounds}: "
          f"{', '.join(f'{s:,.0f}' for s in speeds)})")
    print(f"local model: +{grown:.1f} MiB RSS per worker (loaded and one batch scored, median of {args.rounds})")


if __name__ == "__main__":
    main()
