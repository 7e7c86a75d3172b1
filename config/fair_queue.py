"""One thread that runs a web worker's requests, the callers in turn (config/asgi.py, `WsgiThread`).

A web worker runs Django in one thread, so its requests wait for one another. In the order they
came, a client with many requests in flight (a flood of images, refused or not) puts them all
before another client's one request, which then waits for every one of them. Here the request
run next is the oldest of the caller served least recently: another client's request waits for
the one running, not for the flood's queue (docs/benchmarks.md, "Image bombs"). One caller's
own requests keep their order.
"""

from __future__ import annotations

import collections
import concurrent.futures
import heapq
import itertools
import threading
from collections.abc import Callable, Hashable


class FairThread:
    """A thread of its own (started at the first `submit`) running what is submitted, by caller
    in turn: the next job is the oldest of the caller with work whose last job started longest
    ago (a caller not seen lately first). `remembered` callers' turns are kept after they go idle."""

    def __init__(self, *, name: str = "fair", remembered: int = 4096):
        self.name, self.remembered = name, remembered
        self._cond = threading.Condition()
        self._jobs: dict[Hashable, collections.deque] = {}  # callers with work waiting, oldest first
        self._turns: list[tuple[int, int, Hashable]] = []  # (last started, arrival, caller) of those callers
        self._last: collections.OrderedDict[Hashable, int] = collections.OrderedDict()  # caller -> last started
        self._started = itertools.count(1)
        self._arrivals = itertools.count()
        self._thread: threading.Thread | None = None

    def submit(self, caller: Hashable, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if caller in self._jobs:
                self._jobs[caller].append((future, fn, args))
            else:
                self._jobs[caller] = collections.deque([(future, fn, args)])
                heapq.heappush(self._turns, (self._last.get(caller, 0), next(self._arrivals), caller))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return future

    def _next(self) -> tuple[concurrent.futures.Future, Callable, tuple]:
        with self._cond:
            while not self._turns:
                self._cond.wait()
            _, _, caller = heapq.heappop(self._turns)
            jobs = self._jobs[caller]
            job = jobs.popleft()
            started = next(self._started)
            self._last[caller] = started
            self._last.move_to_end(caller)
            if len(self._last) > self.remembered:
                self._last.popitem(last=False)
            if jobs:  # its next job waits for its next turn
                heapq.heappush(self._turns, (started, next(self._arrivals), caller))
            else:
                del self._jobs[caller]
            return job

    def _serve(self) -> None:
        while True:
            future, fn, args = self._next()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                future.set_exception(exc)
