"""BankIndex.match (moderation/media/images.py) finds exactly the entries a bit-by-bit count finds: the
two-stage scan (the first 128 bits, then the rest of the few left) drops no entry and keeps none
too far, nearest first."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from moderation.media.images import MIN_QUALITY, BankFileInvalid, BankIndex, bank_file_parse, hamming, hash_normalize
from moderation.models import ENTRY_LABEL_MAX
from tests.helpers import examples

HEX = st.integers(min_value=0, max_value=2**256 - 1).map(lambda n: f"{n:064x}")


def near(value: str, bits: list[int]) -> str:
    n = int(value, 16)
    for bit in bits:
        n ^= 1 << bit
    return f"{n:064x}"


@hypothesis_settings(max_examples=examples(200), deadline=None)
@given(
    banks=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.lists(HEX, max_size=30, unique=True), max_size=3),
    query=HEX,
    flips=st.lists(st.integers(0, 255), max_size=40),
    distance=st.integers(0, 64),
    pick=st.randoms(use_true_random=False),
)
def test_match_finds_exactly_the_entries_within_the_distance_nearest_first(banks, query, flips, distance, pick):
    rows, first = {}, 1
    for name, hashes in banks.items():
        rows[name] = (list(range(first, first + len(hashes))), hashes)
        first += len(hashes)
    everything = [(name, i, h) for name, (ids, hashes) in rows.items() for i, h in zip(ids, hashes, strict=True)]
    if everything and flips:  # often a query near an entry, so matches are found, not only misses
        query = near(pick.choice(everything)[2], flips)

    found = BankIndex.build(rows).match(query, max_distance=distance, quality=MIN_QUALITY)

    expected = sorted((hamming(h, query), i, name) for name, i, h in everything if hamming(h, query) <= distance)
    assert sorted((m.distance, m.entry_id, m.bank) for m in found) == expected
    assert [m.distance for m in found] == sorted(m.distance for m in found)


def test_an_entry_differing_only_in_the_last_words_is_measured_there_too():
    rng = random.Random(3)
    entry = f"{rng.getrandbits(256):064x}"
    index = BankIndex.build({"a": ([1], [entry])})
    low_bits = near(entry, [0, 1, 2, 70])  # bits of the last two words only: the first stage sees none

    assert [(m.entry_id, m.distance) for m in index.match(low_bits, max_distance=4, quality=100)] == [(1, 4)]
    assert index.match(low_bits, max_distance=3, quality=100) == []
    assert index.match(entry, max_distance=31, quality=MIN_QUALITY - 1) == []


@hypothesis_settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=80),
    st.builds(lambda h, label: f"{h},{label}", st.from_regex(r"[0-9a-fA-F]{64}", fullmatch=True), st.text(max_size=40)),
    st.sampled_from(["signal_type,signal_str,collab,category,tags", "indicator_type,indicator", "# comment", ""]),
), max_size=12).map("\n".join))
def test_any_bank_file_is_parsed_or_refused_line_by_line_never_crashes(text):
    """Whatever a file holds (arbitrary Unicode, headers mid-file, stray commas), it is either
    read, every entry a normalised hash with a label of at most 255 characters, or refused with
    the bad lines named; nothing else is raised."""
    try:
        parsed = bank_file_parse(text)
    except BankFileInvalid as exc:
        assert exc.total >= 1 and all(error.startswith("line ") for error in exc.errors)
        return
    for pdq, label in parsed.entries:
        assert hash_normalize(pdq) == pdq and len(label) <= ENTRY_LABEL_MAX
