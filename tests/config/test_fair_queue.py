"""config/fair_queue.py: a web worker's one thread takes the callers in turn, so another
client's request waits for the one running, not for a flood's queue; one caller's requests keep
their order, and every job runs on the same thread."""

from __future__ import annotations

import threading

import pytest

from config.fair_queue import FairThread


def blocked(fair: FairThread) -> threading.Event:
    """Hold the thread with a first job until the event is set."""
    go, running = threading.Event(), threading.Event()

    def hold():
        running.set()
        go.wait(5)

    fair.submit("someone", hold)
    assert running.wait(5)
    return go


def test_another_callers_request_runs_before_a_floods_queue():
    fair, ran = FairThread(), []
    fair.submit("flood", lambda: None).result(5)  # the flood has been served lately
    go = blocked(fair)
    futures = [fair.submit("flood", ran.append, f"flood-{n}") for n in range(5)]
    futures.append(fair.submit("text", ran.append, "text"))
    go.set()
    for future in futures:
        future.result(5)

    assert ran == ["text", "flood-0", "flood-1", "flood-2", "flood-3", "flood-4"]


def test_callers_with_work_take_turns_and_each_keeps_its_order():
    fair, ran = FairThread(), []
    go = blocked(fair)
    futures = [fair.submit(caller, ran.append, f"{caller}{n}") for n in range(3) for caller in "ab"]
    go.set()
    for future in futures:
        future.result(5)

    assert ran == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_a_caller_just_served_waits_behind_one_not_seen_lately():
    fair, ran = FairThread(), []
    fair.submit("a", ran.append, "a0").result(5)
    go = blocked(fair)
    futures = [fair.submit("a", ran.append, "a1"), fair.submit("b", ran.append, "b0")]
    go.set()
    for future in futures:
        future.result(5)

    assert ran == ["a0", "b0", "a1"]


def test_every_job_runs_on_one_thread_and_an_error_reaches_its_caller():
    fair, threads = FairThread(), set()

    def where():
        threads.add(threading.get_ident())

    def fails():
        raise ValueError("no")

    for caller in range(20):
        fair.submit(caller, where).result(5)
    with pytest.raises(ValueError, match="no"):
        fair.submit("x", fails).result(5)

    assert len(threads) == 1 and threading.get_ident() not in threads
    assert fair.submit("y", lambda: 42).result(5) == 42  # the thread lives on


def test_only_so_many_idle_callers_are_remembered():
    fair = FairThread(remembered=3)
    for caller in range(10):
        fair.submit(caller, lambda: None).result(5)

    assert list(fair._last) == [7, 8, 9]
