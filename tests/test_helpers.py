"""The collision helper itself: a thread's unexpected exception fails the test, never hides in a
result slot (a race test whose loser crashed must not pass as if it had lost cleanly)."""

from __future__ import annotations

import pytest

from moderation.errors import StaleVersion
from tests.helpers import collide


def test_an_exception_no_test_expected_is_raised_with_the_thread_it_came_from():
    def target(i):
        if i == 2:
            raise LookupError("duplicate key")
        return i

    with pytest.raises(LookupError, match="duplicate key") as raised:
        collide(3, target)

    assert "raised in thread 2 of 3" in "\n".join(raised.value.__notes__)


def test_an_expected_exception_is_returned_in_its_threads_slot():
    stale = StaleVersion(review_id="r-1", expected=1, actual=2, changes=["approved by someone else"])

    def target(i):
        if i == 1:
            raise stale
        return i

    assert collide(2, target, expect=StaleVersion) == [0, stale]
