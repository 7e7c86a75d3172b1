"""Time-ordered keys (moderation/db/ids.py): RFC 9562 version 7, in order within a millisecond."""

from __future__ import annotations

import threading
import time
import uuid
from unittest import mock

import pytest

from moderation.db import ids
from moderation.models import Content, ContentReview, ModerationRequest


@pytest.fixture(autouse=True)
def _restore_the_generator_state():
    """Tests that move the clock ahead must not leave later keys of this process in the future."""
    with mock.patch.object(ids, "_last_ms", ids._last_ms), mock.patch.object(ids, "_counter", ids._counter):
        yield


def _an_instant_ahead() -> int:
    """A fixed time (ns) later than any key made so far, so the generator takes it as new."""
    return (time.time_ns() // 1_000_000 + 3_600_000 + ids._last_ms % 1000) * 1_000_000


def test_keys_carry_version_7_and_the_rfc_variant():
    for _ in range(1000):
        key = ids.uuid7()
        assert key.version == 7
        assert key.variant == uuid.RFC_4122
        assert (key.int >> 76) & 0xF == 7 and (key.int >> 62) & 0b11 == 0b10


def test_keys_carry_the_current_unix_time_in_milliseconds():
    before = time.time_ns() // 1_000_000
    key = ids.uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= ids.uuid7_time_ms(key) <= after


def test_keys_made_within_one_millisecond_are_in_order():
    frozen = _an_instant_ahead()
    with mock.patch.object(ids.time, "time_ns", return_value=frozen):
        keys = [ids.uuid7() for _ in range(5000)]
    assert len(set(keys)) == 5000
    assert keys == sorted(keys)
    assert {ids.uuid7_time_ms(k) for k in keys} == {frozen // 1_000_000}


def test_a_clock_stepping_back_keeps_the_keys_in_order():
    now = time.time_ns()
    first = ids.uuid7()
    with mock.patch.object(ids.time, "time_ns", return_value=now - 5_000_000_000):
        later = [ids.uuid7() for _ in range(100)]
    assert [first, *later] == sorted([first, *later])


def test_a_counter_that_runs_out_moves_to_the_next_millisecond():
    frozen = _an_instant_ahead()
    with mock.patch.object(ids.time, "time_ns", return_value=frozen):
        first = ids.uuid7()
        with mock.patch.object(ids, "_counter", ids._COUNTER_MAX):
            rolled = ids.uuid7()
    assert rolled > first
    assert ids.uuid7_time_ms(rolled) == frozen // 1_000_000 + 1


def test_threads_never_make_the_same_key_and_each_sees_its_keys_in_order():
    barrier, results = threading.Barrier(8), {}

    def make(n):
        barrier.wait()
        results[n] = [ids.uuid7() for _ in range(2000)]

    threads = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [k for keys in results.values() for k in keys]
    assert len(set(every)) == len(every) == 16000
    assert all(keys == sorted(keys) for keys in results.values())


def test_a_non_v7_key_has_no_time():
    with pytest.raises(ValueError, match="version 4"):
        ids.uuid7_time_ms(uuid.uuid4())


@pytest.mark.parametrize(("model", "field"), [(Content, "id"), (ContentReview, "id"),
                                              (ModerationRequest, "idempotency_key")])
def test_the_hot_tables_keys_default_to_version_7(model, field):
    assert model._meta.get_field(field).get_default().version == 7
