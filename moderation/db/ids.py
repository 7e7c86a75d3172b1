"""Time-ordered UUIDs (version 7, RFC 9562) for the keys the hot paths insert and look up.

A random (version 4) key lands anywhere in its B-tree index, so every insert dirties a random
leaf page and the whole index has to stay in memory as the table grows; a version 7 key starts
with the time, so inserts go to the right-hand edge and recent rows (the ones the hot paths read)
share a few pages. Python 3.11 has no `uuid.uuid7`.

Layout (RFC 9562, section 5.7): 48 bits of Unix time in milliseconds, the version (7), 12 bits
`rand_a`, the variant (0b10), 62 bits `rand_b`. Monotonic within a millisecond by RFC 9562
section 6.2 method 1: a 42-bit counter in `rand_a` and the top 30 bits of `rand_b`, started at a
random value with its top bit clear at each new millisecond and incremented for each further
key in it; the low 32 bits stay random, so two processes that share a counter state (a fork)
still make different keys. A clock that steps back keeps the last millisecond (keys stay in
order); a counter that runs out moves on to the next millisecond.

The keys are not secrets: they reveal when they were made (docs/design.md, "Data model").
"""

from __future__ import annotations

import os
import secrets
import threading
import time
import uuid

_COUNTER_BITS = 42
_COUNTER_MAX = (1 << _COUNTER_BITS) - 1
_lock = threading.Lock()
_last_ms = -1
_counter = 0


def _reset_lock_in_child() -> None:
    # A fork taken while another thread held the lock would leave the child's copy locked.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_lock_in_child)


def uuid7() -> uuid.UUID:
    """A new version 7 UUID, greater than every one this process made before."""
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms, _counter = now_ms, secrets.randbits(_COUNTER_BITS - 1)
        elif _counter < _COUNTER_MAX:
            _counter += 1
        else:
            _last_ms, _counter = _last_ms + 1, secrets.randbits(_COUNTER_BITS - 1)
        ms, counter = _last_ms, _counter
    value = (
        (ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76                             # version
        | (counter >> 30) << 64                 # rand_a: the counter's top 12 bits
        | 0b10 << 62                            # variant
        | (counter & 0x3FFF_FFFF) << 32         # rand_b: the counter's low 30 bits...
        | secrets.randbits(32)                  # ...then 32 random bits
    )
    return uuid.UUID(int=value)


def uuid7_time_ms(value: uuid.UUID) -> int:
    """The Unix time in milliseconds a version 7 UUID carries."""
    if value.version != 7:
        raise ValueError(f"{value} is a version {value.version} UUID, not version 7")
    return value.int >> 80
