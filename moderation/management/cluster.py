"""A django-q2 cluster that survives the death of any one of its processes (`manage.py qcluster`).

django-q2's sentinel forks a pusher, a monitor and the workers, which share two
`multiprocessing` queues and a few shared values. Each of those holds locks (the queue's reader
and writer locks, its size counter, each worker's timer) that live in shared memory and are
released by the process that took them. A process killed while it holds one (an idle worker
waits for a task *holding the reader lock*) leaves it taken for good: django-q2 starts a
replacement, and the replacement waits on that lock forever, and so does every other worker.
One `kill -9`, one OOM kill or one segfault in a native library stopped moderation
(docs/operations.md, "When a process dies").

So a death that nobody asked for is never repaired in place. The sentinel rebuilds the cluster
instead (`ResilientSentinel.rebuild`):

1. every process of the cluster is killed (a busy worker too: its lock state is unknown),
2. the jobs the dead generation had taken from the broker and not finished are handed back to
   the broker at once (the ORM broker's lease is released; a Redis job is pushed again), so
   nothing waits for the broker's lease to run out,
3. new queues, new shared values, a new pusher, monitor and workers are started,
4. one job reconciles the reviews that the killed workers had claimed (their operation is
   dispatched again with the same idempotency key: docs/design.md, invariants 3 and 8).

Every job is safe to run twice (invariant 11), so handing back a job that had in fact finished
costs a second, harmless run. A death django-q2 causes or expects (a worker recycled after its
task count, a worker terminated at its task's timeout, a pusher that stopped after a broker
error) is handled as django-q2 handles it.

Which jobs are in flight is known from a ledger: the pusher writes each job it takes from the
broker to a pipe, the monitor writes each job it has finished to another, and the sentinel reads
both every guard cycle. A pipe has one writer, so records never interleave; a record cut short by
its writer's death is the last one in its pipe, and is dropped when the pipe is read out after
the writers are dead.
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import struct
import time
from datetime import timedelta
from multiprocessing import Event

from django import db
from django.db import transaction
from django.conf import settings
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.models import OrmQ
from django_q.cluster import Cluster, Sentinel
from django_q.conf import Conf, setproctitle
from django_q.monitor import monitor
from django_q.pusher import pusher
from django_q.queues import Queue
from django_q.scheduler import scheduler
from django_q.signals import post_execute
from django_q.signing import BadSignature, SignedPackage
from django_q.status import Stat

from moderation.jobs import enqueue_on_commit, worker_id_of

logger = logging.getLogger(__name__)

# django-q2's own marks on a worker's timer: 0 at its task's timeout (the sentinel terminates it
# itself), -2 when it leaves after its task count or its memory (recycled).
_TIMED_OUT, _RECYCLED = 0, -2
# How long the sentinel waits for a worker's timer lock before it looks whether its holder died.
_TIMER_LOCK_WAIT_S = 1.0
# A record in a ledger pipe: its kind, then the lengths of its two fields.
LEDGER_HEADER = struct.Struct("!cII")
TAKEN, DONE = b"T", b"D"


class Ledger:
    """The jobs a cluster generation took from the broker and has not finished (read by the
    sentinel; written by the pusher and the monitor through `write`)."""

    def __init__(self):
        self.taken_r, self.taken_w = os.pipe()
        self.done_r, self.done_w = os.pipe()
        for fd in (self.taken_r, self.done_r):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        self.buffers = {self.taken_r: b"", self.done_r: b""}
        self.in_flight: dict[str, tuple] = {}  # task id -> (ack id, payload)
        self.done_early: set[str] = set()  # finished before its "taken" record was read

    @staticmethod
    def write(fd: int, kind: bytes, key: str, value: bytes = b"") -> None:
        record = key.encode()
        data = LEDGER_HEADER.pack(kind, len(record), len(value)) + record + value
        while data:  # (a blocking pipe: a write returns short only past its capacity)
            data = data[os.write(fd, data):]

    def read(self) -> None:
        """Take in every whole record written so far. Taken records are read first: a job is
        always taken before it is done, so its "done" record is never read before its "taken"
        record was written (it may still be read first, within one pass: `done_early`)."""
        for fd in (self.taken_r, self.done_r):
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                self.buffers[fd] += chunk
            self.buffers[fd] = self._parse(self.buffers[fd])

    def _parse(self, buffer: bytes) -> bytes:
        while len(buffer) >= LEDGER_HEADER.size:
            kind, key_len, value_len = LEDGER_HEADER.unpack_from(buffer)
            end = LEDGER_HEADER.size + key_len + value_len
            if len(buffer) < end:
                break  # the rest comes with the next read (or never, if its writer died)
            key = buffer[LEDGER_HEADER.size:LEDGER_HEADER.size + key_len].decode()
            value = buffer[LEDGER_HEADER.size + key_len:end]
            buffer = buffer[end:]
            if kind == TAKEN:
                if key in self.done_early:
                    self.done_early.discard(key)
                else:
                    ack_id, _, payload = value.partition(b"\n")
                    self.in_flight[key] = (ack_id.decode(), payload)
            elif self.in_flight.pop(key, None) is None:
                self.done_early.add(key)
        return buffer

    def close(self) -> None:
        for fd in (self.taken_r, self.taken_w, self.done_r, self.done_w):
            try:
                os.close(fd)
            except OSError:
                pass


class ClusterORM(ORM):
    """django-q2's ORM broker as a cluster's pusher and monitor use it (settings.Q_CLUSTER's
    `broker_class` with the ORM broker), in fewer round trips and the same lease:

    - `dequeue` takes its jobs in one statement: the rows whose lease is over (`lock` past), locked
      with SKIP LOCKED, get the new lease and come back (UPDATE ... RETURNING). django-q2's reads
      them, then updates each row on the condition that its `lock` is still the one read: the same
      outcome (a job is taken by one pusher, until its lease ends) in 1 + N statements. Oldest first.
      The locking SELECT is a materialized CTE, run once: as `id IN (SELECT ... LIMIT n FOR UPDATE
      SKIP LOCKED)` PostgreSQL may plan it as a nested-loop semi join that runs the subquery again
      for each outer row, each run skipping the rows the statement has already updated, so a batch
      of n took more than n jobs.
    - `get_connection` runs Django's close_old_connections (which drops a connection past
      CONN_MAX_AGE or one that failed) at most once a second, and at once after an error. django-q2
      runs it before every statement, and each run makes the next statement begin with a health
      check (CONN_HEALTH_CHECKS: a `SELECT 1` round trip): 6 round trips a job between the pusher
      and the monitor, 2 here (docs/benchmarks.md, "The platform as shipped")."""

    CHECK_EVERY_S = 1.0

    def __init__(self, list_key: str | None = None):
        self._checked_at = float("-inf")  # (django-q2's __init__ gets a connection already)
        super().__init__(list_key=list_key)

    def get_connection(self, list_key: str | None = None):
        connection = db.connections[Conf.ORM]
        now = time.monotonic()
        if transaction.get_autocommit(using=Conf.ORM) and (
            connection.errors_occurred or now - self._checked_at >= self.CHECK_EVERY_S
        ):
            db.close_old_connections()
            self._checked_at = now
        return OrmQ.objects.using(Conf.ORM)

    def dequeue(self):
        now = timezone.now()
        table = OrmQ._meta.db_table
        self.get_connection()  # (its connection checks)
        with db.connections[Conf.ORM].cursor() as cursor:
            cursor.execute(
                f"WITH free AS MATERIALIZED (SELECT id FROM {table} WHERE key = %s AND lock < %s "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
                f"UPDATE {table} SET lock = %s FROM free WHERE {table}.id = free.id RETURNING {table}.id, payload",
                [self.list_key, now, Conf.BULK, now + timedelta(seconds=Conf.RETRY)],
            )
            tasks = sorted(cursor.fetchall())
        if tasks:
            return tasks
        time.sleep(Conf.POLL)  # an empty queue: spare the CPU, as django-q2 does
        return None


class LedgerBroker:
    """The cluster's broker, seen by its pusher: each job it hands out is written to the ledger
    before the pusher puts it in the task queue."""

    def __init__(self, broker, fd: int):
        self._broker = broker
        self._fd = fd

    def dequeue(self):
        tasks = self._broker.dequeue()
        for ack_id, payload in tasks or ():
            try:
                task_id = SignedPackage.loads(payload)["id"]
            except (TypeError, KeyError, BadSignature):
                continue  # the pusher fails it at once: nothing is in flight
            raw = payload if isinstance(payload, bytes) else payload.encode()
            Ledger.write(self._fd, TAKEN, task_id, f"{'' if ack_id is None else ack_id}\n".encode() + raw)
        return tasks

    def __getattr__(self, name):
        return getattr(self._broker, name)


def ledger_pusher(task_queue, event, broker, fd: int) -> None:
    pusher(task_queue, event, LedgerBroker(broker, fd))


def ledger_monitor(result_queue, broker, fd: int) -> None:
    def finished(sender, task, **kwargs):
        Ledger.write(fd, DONE, task["id"])

    post_execute.connect(finished, weak=False)  # sent by the monitor once a result is saved
    monitor(result_queue, broker)


class ResilientSentinel(Sentinel):
    """django-q2's sentinel, but a process that died unasked rebuilds the cluster (above)."""

    def __init__(self, *args, **kwargs):
        self.ledger = Ledger()
        self.rebuilds = 0
        super().__init__(*args, **kwargs)

    def spawn_pusher(self):
        return self.spawn_process(ledger_pusher, self.task_queue, self.event_out, self.broker, self.ledger.taken_w)

    def spawn_monitor(self):
        return self.spawn_process(ledger_monitor, self.result_queue, self.broker, self.ledger.done_w)

    def status(self) -> str:
        # django-q2 reads the queues' sizes under their counters' locks, which a dead process
        # may hold: a status report must not hang the guard, so it reads them unlocked.
        if self.start_event.is_set() and not self.stop_event.is_set():
            busy = _unlocked(self.task_queue) or _unlocked(self.result_queue)
            return Conf.WORKING if busy else Conf.IDLE
        return super().status()

    def guard(self):
        logger.info("%s guarding the cluster (rebuilt whole if any of its processes dies)", self.name)
        if setproctitle:  # `ps` (and the chaos tests) tell the clusters apart by their queue
            setproctitle.setproctitle(f"qcluster sentinel [{self.queue_name()}]")
        self.start_event.set()
        Stat(self).save()
        counter, cycle = 0, Conf.GUARD_CYCLE
        while True:
            self.ledger.read()
            dead = self.died_unasked()
            if dead:
                self.rebuild(dead)
            else:
                self._guard_workers(cycle)
                for process in (self.monitor, self.pusher):
                    if not process.is_alive():  # stopped on its own, exit code 0 (died_unasked)
                        self.reincarnate(process)
            counter += cycle
            if counter >= 30 and Conf.SCHEDULER:  # (django-q2's guard: the schedules, about once a minute)
                counter = 0
                scheduler(broker=self.broker)
            Stat(self).save()
            if self.stop_event.wait(cycle):
                break
        self.stop()

    def processes(self) -> list:
        """The processes under this sentinel: its workers, monitor and pusher."""
        return [p for p in [*self.pool, self.monitor, self.pusher] if p is not None]

    def _kill_all(self) -> list:
        """SIGKILL every process of the cluster still alive; returns them all."""
        processes = self.processes()
        for process in processes:
            if process.is_alive():
                try:
                    os.kill(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return processes

    def died_unasked(self) -> list:
        """The cluster's processes that died without django-q2 asking or expecting it."""
        dead = []
        for process in self.processes():
            if process.is_alive():
                continue
            expected = process.exitcode == 0 and (process not in self.pool or _timer(process) == _RECYCLED)
            if not expected and not (process in self.pool and _timer(process) == _TIMED_OUT):
                dead.append(process)
        return dead

    def _guard_workers(self, cycle: float) -> None:
        """django-q2's worker check (timeouts, recycling), without waiting forever on a timer lock."""
        for process in list(self.pool):
            lock = process.timer.get_lock()
            if not lock.acquire(timeout=_TIMER_LOCK_WAIT_S):
                continue  # its holder died (the next cycle sees it) or is busy for a moment
            try:
                if not process.is_alive() or process.timer.value == _TIMED_OUT:
                    self.reincarnate(process)
                elif process.timer.value > 0:
                    process.timer.value -= cycle
            finally:
                lock.release()

    def rebuild(self, dead: list) -> None:
        """Replace every process and every shared object of the cluster (the module's docstring)."""
        self.rebuilds += 1
        logger.critical(
            "cluster process(es) %s died (%s): rebuilding the cluster, rebuild %d",
            ", ".join(str(p.pid) for p in dead), ", ".join(_exit(p) for p in dead), self.rebuilds,
        )
        victims = self._kill_all()
        for process in victims:
            process.join(timeout=10)
        self.ledger.read()  # every writer is dead: what is left in the pipes is all there is
        in_flight = self.ledger.in_flight
        self.ledger.close()
        self.ledger = Ledger()
        handed_back = self.hand_back(in_flight)
        worker_ids = [worker_id_of(p.pid) for p in victims if p in self.pool]
        self.task_queue = Queue(maxsize=Conf.QUEUE_LIMIT) if Conf.QUEUE_LIMIT else Queue()
        self.result_queue = Queue()
        self.event_out = Event()
        self.spawn_cluster()
        self.after_rebuild(worker_ids)
        logger.critical("cluster rebuilt: %d job(s) handed back to the broker", handed_back)

    def hand_back(self, in_flight: dict) -> int:
        """Give the broker back the jobs the dead generation held, to be taken at once."""
        if not in_flight:
            return 0
        try:
            if isinstance(self.broker, ORM):
                ack_ids = [int(ack_id) for ack_id, _ in in_flight.values() if ack_id]
                # The lease (the row's lock, a time in the future) ends now.
                return self.broker.get_connection().filter(pk__in=ack_ids).update(lock=timezone.now())
            for _, payload in in_flight.values():  # Redis: a taken job has left the list
                self.broker.enqueue(payload)
            return len(in_flight)
        except Exception:  # noqa: BLE001 - the broker's own lease (ORM) or the sweeper (Redis) still recovers them
            logger.exception("handing the in-flight jobs back failed: they wait for their lease or the sweeper")
            return 0
        finally:
            db.connections.close_all()  # no connection of the sentinel's is inherited by the new processes

    def after_rebuild(self, worker_ids: list[str]) -> None:
        """The reviews the killed workers had claimed are dispatched again (one job, any cluster
        may run it). Only the moderation cluster claims reviews."""
        if not worker_ids or self.broker.list_key != settings.Q_NAME:
            return
        try:
            enqueue_on_commit("moderation.tasks.reviews_worker_lost", worker_ids=worker_ids)  # (none open: at once)
        except Exception:  # noqa: BLE001 - the sweeper still finds them once they are stuck
            logger.exception("enqueueing the reconcile of the killed workers' reviews failed")
        finally:
            db.connections.close_all()

    def stop(self):
        if self.died_unasked():
            # A dead process may hold a queue's lock, on which django-q2's orderly stop would
            # wait forever: whatever runs is killed, and the broker's leases bring its jobs back.
            logger.critical("stopping a cluster with a dead process: its processes are killed")
            self._kill_all()
            return
        super().stop()


class ResilientCluster(Cluster):
    """django-q2's cluster, with the resilient sentinel."""

    def start(self) -> int:
        import django_q.cluster

        # Cluster.start names the sentinel's class through its module: the one place to swap it.
        original = django_q.cluster.Sentinel
        django_q.cluster.Sentinel = ResilientSentinel
        try:
            return super().start()
        finally:
            django_q.cluster.Sentinel = original


def _timer(process) -> float:
    return process.timer.get_obj().value  # unlocked: its holder may be dead


def _unlocked(queue) -> int:
    return queue.size.count.get_obj().value


def _exit(process) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"{signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"
