"""Hash-bank matching budget: one image's PDQ hash against 10,000 and 1,000,000 bank entries.

    python -m bench.media_match [--sizes 10000,1000000] [--queries 1000] [--distance 31]

No database: `moderation.media.images.BankIndex` is built from random 256-bit hashes (numpy), as
`moderation.services.media.bank_index` builds it from a version's entries. Then 1,000 queries are
matched, half near an entry (a few bits flipped: they match) and half random (they match
nothing: a random hash is ~128 bits from every entry). Prints, per size, the build time, the
index's memory, and the median, p95 and p99 milliseconds per `match`, and of `match` followed by
`nearest_per_bank` (what `bank_matches` adds before its one query for removed entries).

Two references, in the same run: numpy over the (N, 4) rows (the XOR of each row whole, its
bits counted and summed per row: what `match` did before), and the obvious code, a pure-Python
popcount (`int.bit_count` of the XOR) over every entry, on the 10,000-entry bank only. Figures
are CPU time of the calling thread (the machine is shared); the wall median is printed beside.
The budget is 20 ms p95 per match at 1,000,000 entries.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from moderation.media.images import BankIndex, hash_words, nearest_per_bank

BUDGET_MS = 20.0
SEED = 27


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,1000000", help="bank sizes, comma separated")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--distance", type=int, default=31, help="the policy's pdq_distance")
    parser.add_argument("--flip", type=int, default=8, help="bits flipped in a near query")
    args = parser.parse_args()

    rng = np.random.default_rng(SEED)
    for size in (int(s) for s in args.sizes.split(",")):
        hashes = [bytes(row) for row in rng.integers(0, 256, size=(size, 32), dtype=np.uint8)]
        banks = _banks(hashes)
        clock = time.perf_counter()
        index = BankIndex.build(banks)
        build_ms = (time.perf_counter() - clock) * 1000
        memory = index.words.nbytes + index.entry_ids.nbytes + index.bank_of.nbytes
        queries = _queries(rng, hashes, args.queries, args.flip)

        def match(q):
            return index.match(q, max_distance=args.distance, quality=100)

        matched, cpu, wall = _timed(match, queries)
        near = sum(1 for found in matched[: len(queries) // 2] if found)
        stray = sum(1 for found in matched[len(queries) // 2:] if found)
        print(f"{size:>9,} entries in {len(banks)} banks: built in {build_ms:.0f} ms, {memory / 2**20:.1f} MiB; "
              f"near queries matched {near}/{len(queries) // 2}, random ones {stray}/{len(queries) - len(queries) // 2}")
        _line("match", cpu, wall)
        _, cpu, wall = _timed(lambda q: nearest_per_bank(match(q)), queries)
        _line("match + nearest_per_bank", cpu, wall)
        p95 = statistics.quantiles(cpu, n=100)[94]
        rows = index.words.T.copy()  # (N, 4), C order: the layout matched before
        _, cpu_rows, wall_rows = _timed(lambda q: _rows_reference(rows, q, args.distance), queries[::5])
        _line("reference: numpy over (N, 4) rows (a fifth of the queries)", cpu_rows, wall_rows)
        if size <= 10_000:
            ints = [int.from_bytes(h, "big") for h in hashes]
            _, cpu_py, wall_py = _timed(lambda q: _reference(ints, int(q, 16), args.distance), queries[::10])
            _line("reference: pure-Python popcount (a tenth of the queries)", cpu_py, wall_py)
        if size >= 1_000_000:
            print(f"  budget {BUDGET_MS:g} ms p95 at {size:,} entries: {'met' if p95 <= BUDGET_MS else 'MISSED'}")


def _banks(hashes: list[bytes]) -> dict[str, tuple[list[int], list[bytes]]]:
    """Three banks of unequal size, as a deployment has (a large shared list, two of its own)."""
    cut1, cut2 = len(hashes) * 8 // 10, len(hashes) * 9 // 10
    parts = {"shared": hashes[:cut1], "local": hashes[cut1:cut2], "recent": hashes[cut2:]}
    banks, first = {}, 1
    for name, part in parts.items():
        banks[name] = (list(range(first, first + len(part))), part)
        first += len(part)
    return banks


def _queries(rng, hashes: list[bytes], n: int, flip: int) -> list[str]:
    """Half near an entry (`flip` bits flipped), half random, as hex."""
    near = []
    for i in rng.integers(0, len(hashes), size=n // 2):
        value = int.from_bytes(hashes[i], "big")
        for bit in rng.choice(256, size=flip, replace=False):
            value ^= 1 << int(bit)
        near.append(f"{value:064x}")
    stray = [bytes(row).hex() for row in rng.integers(0, 256, size=(n - n // 2, 32), dtype=np.uint8)]
    return near + stray


def _rows_reference(rows: np.ndarray, hex_hash: str, max_distance: int) -> np.ndarray:
    """The whole XOR of every row, its bits counted and summed per row (BankIndex.match before)."""
    distances = np.bitwise_count(rows ^ hash_words([hex_hash])[0]).sum(axis=1, dtype=np.int32)
    hits = np.flatnonzero(distances <= max_distance)
    return hits[np.argsort(distances[hits], kind="stable")]


def _reference(ints: list[int], query: int, max_distance: int) -> list[tuple[int, int]]:
    return sorted((d, i) for i, h in enumerate(ints) if (d := (h ^ query).bit_count()) <= max_distance)


def _timed(fn, queries):
    results, cpu, wall = [], [], []
    for q in queries:
        c, w = time.thread_time(), time.perf_counter()
        results.append(fn(q))
        cpu.append((time.thread_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
    return results, cpu, wall


def _line(what: str, cpu: list[float], wall: list[float]) -> None:
    q = statistics.quantiles(cpu, n=100)
    print(f"  {what:<58} p50 {statistics.median(cpu):8.3f}  p95 {q[94]:8.3f}  p99 {q[98]:8.3f} ms "
          f"(wall p50 {statistics.median(wall):.3f})")


if __name__ == "__main__":
    main()
