"""The normal form's cost (moderation.text.normal; docs/design.md, "The normal form").

    python -m bench.normal_form [--chars 100000] [--runs 5]

No database. Prints, for texts of --chars characters and of a tenth and a hundredth of it, the
median and max milliseconds of `normalize` (the normal form and its offsets) over --runs runs,
each on a fresh copy (past the cache), and the ratio to the text ten times shorter: linear work
keeps it near 10. Texts: English prose; prose in six scripts with accents and joiners; and a
hostile text of nothing but disguises (zero-width characters, look-alikes, letters spelt apart,
leetspeak, repeats, full-width letters), every word of it rewritten. CPU time of the calling
thread (the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

PROSE = ("The meeting moved to three in the afternoon, please bring the report and your notes. We will talk "
         "about the launch; rapat dipindah ke jam tiga sore, tolong bawa laporan. ")
SCRIPTS = ("Привет, как дела? Καλημέρα! مرحبا، كيف حالك؟ नमस्ते क्‍ष, सलाम می\u200cخواهم. 你好，今天天气很好。 "
           "naïve café résumé Straße 👩\u200d💻 ❤️ ")
HOSTILE = ("f.u.c.k y o u id\u200biot \u0456d\u0456\u043et b0d0h fuuuuuuck ｆｕｃｋ \u202eesrever k-1-l-l a$$ 5h1t ")


def texts(chars: int) -> dict[str, str]:
    return {name: (unit * (chars // len(unit) + 1))[:chars] for name, unit in
            (("English prose", PROSE), ("six scripts", SCRIPTS), ("hostile: only disguises", HOSTILE))}


def measure(normalize, text: str, runs: int) -> list[float]:
    spent = []
    for n in range(runs):
        fresh = f"{n}{text}"  # a new string each run: the cache keeps short texts only, but be sure
        began = time.thread_time()
        normalize(fresh)
        spent.append((time.thread_time() - began) * 1000)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from moderation.text.normal import normalize

    print(f"{'text':<26} {'chars':>8} {'median ms':>10} {'max ms':>8} {'x10 chars costs':>16}")
    for name in texts(1):
        shorter = None
        for chars in (args.chars // 100, args.chars // 10, args.chars):
            text = texts(chars)[name]
            spent = measure(normalize, text, args.runs)
            median = statistics.median(spent)
            ratio = f"{median / shorter:.1f}x" if shorter else ""
            print(f"{name:<26} {chars:>8} {median:>10.1f} {max(spent):>8.1f} {ratio:>16}")
            shorter = median


if __name__ == "__main__":
    main()
