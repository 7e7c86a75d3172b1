"""The notification cluster in threads, for tests and benchmarks.

`workers` threads take jobs from django-q2's own broker queue for the notification cluster
(settings.NOTIFY_CLUSTER), oldest first and one at a time (the cluster's `bulk` of 1), and run
the task each job names, as the cluster's worker processes do; the job is acknowledged once it
ran. With `sweep_every_s`, a further thread runs the real sweep at that period, as the sweep
schedule does (twice a minute in production): the safety net for whatever no job carries.

Running in the test's process lets a test change settings (a short NOTIFY_DEADLINE_S) for the
workers too, and keeps a test free of process start-up.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string


class NotificationWorkers:
    def __init__(self, workers: int, *, sweep_every_s: float | None = None) -> None:
        self.workers, self.sweep_every_s = workers, sweep_every_s
        self.errors: list[BaseException] = []
        self.outcomes: list[str] = []
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> NotificationWorkers:
        targets = [self._work] * self.workers + ([self._sweep] if self.sweep_every_s else [])
        for i, target in enumerate(targets):
            thread = threading.Thread(target=self._run, args=(target,), name=f"notify-worker-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=settings.NOTIFY_DEADLINE_S + 30)

    def _run(self, target) -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test, which fails on it
            self.errors.append(exc)
        finally:
            connection.close()

    def _work(self) -> None:
        from django_q.brokers import get_broker
        from django_q.signing import SignedPackage

        broker = get_broker(settings.NOTIFY_CLUSTER)
        while not self._stopping.is_set():
            for job_pk, payload in broker.dequeue() or ():
                task = SignedPackage.loads(payload)
                outcome = import_string(task["func"])(*task["args"], **task["kwargs"])
                self.outcomes.append(outcome)
                broker.acknowledge(job_pk)

    def _sweep(self) -> None:
        from moderation.services import reviews_sweep

        while not self._stopping.wait(self.sweep_every_s):
            reviews_sweep()


def wait_until(condition, *, timeout_s: float, every_s: float = 0.05) -> bool:
    """Poll `condition()` until it is true or `timeout_s` passed; returns its last answer."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True
