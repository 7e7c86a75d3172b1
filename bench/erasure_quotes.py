"""What erasure's quote finder costs for the largest content the API accepts (100,000 characters).

    python -m bench.erasure_quotes [--chars 100000] [--payload 12000]

No database: `moderation.text.quotes.content_quotes` (every QUOTE_MIN-character run of the text, as written
and JSON-escaped) and `scrub` over one payload that quotes 2,000 characters from the middle of
the content. Prints, for an ASCII and a non-ASCII text (whose escaped form is six times longer),
the number of runs, the seconds and peak memory to build them, and the milliseconds to scrub.
"""

from __future__ import annotations

import argparse
import os
import random
import time
import tracemalloc
from types import SimpleNamespace

ALPHABETS = {"ascii": "abcdefghij klmnop", "non-ascii": "абвгдежзий клмно\U0001f419"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--payload", type=int, default=12_000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from moderation.text import quotes as erasure_quotes

    rng = random.Random(1)
    for label, alphabet in ALPHABETS.items():
        text = "".join(rng.choice(alphabet) for _ in range(args.chars))
        tracemalloc.start()
        started = time.perf_counter()
        quotes = erasure_quotes.content_quotes(SimpleNamespace(text=text, media_url="", metadata={}))
        built = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        middle = args.chars // 2
        pad = "x" * ((args.payload - 2000) // 2)
        payload = pad + text[middle:middle + 2000] + pad
        started = time.perf_counter()
        scrubbed = erasure_quotes.scrub(payload, quotes)
        took = time.perf_counter() - started
        assert text[middle:middle + 2000] not in scrubbed
        print(f"{label:10} runs {len(quotes.runs):>8}  build {built:5.2f} s  peak {peak / 1e6:5.0f} MB  "
              f"scrub {len(payload)} chars {took * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
