"""The only way the pipeline enqueues jobs: after the current transaction commits, or with it.

A job enqueued inside a transaction that later rolls back would act on rows that never existed;
one enqueued after commit can still be lost (crash between commit and enqueue), which the
sweeper covers. django-q2 is an at-least-once trigger: every task is safe to run twice.

A job for rows a services OneStatement writes (a new submission's) is written by that statement
when the queue is django-q2's ORM broker in the same database: its row then commits or rolls
back with them, one round trip fewer and never lost between commit and enqueue. With Redis it
is pushed after commit as every other job.
"""

from __future__ import annotations

import os
import socket
import uuid
from functools import cache

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from moderation.db.insert_sql import insert_row


@cache
def _hostname() -> str:
    return socket.gethostname()


def worker_id() -> str:
    """Identifies this process in the audit trail: host and pid (read live: workers are forked)."""
    return worker_id_of(os.getpid())


def worker_id_of(pid: int) -> str:
    """The `worker_id` a process of this host with `pid` writes (a review's claim records it)."""
    return f"{_hostname()}:{pid}"


def new_job_id() -> str:
    return uuid.uuid4().hex


# Tasks that run on the notification cluster (settings.NOTIFY_CLUSTER), never on the moderation
# workers: a client's slow webhook receiver must not delay any review's decision.
NOTIFICATION_TASKS = frozenset({"moderation.tasks.deliver_notification", "moderation.tasks.statements_submit"})


def cluster_for(func: str) -> str:
    """The django-q2 job queue (cluster) a task is enqueued on."""
    from django.conf import settings

    return settings.NOTIFY_CLUSTER if func in NOTIFICATION_TASKS else settings.Q_CLUSTER["name"]


@cache
def job_broker(cluster: str):
    """One django-q2 broker per job queue and process. Without one, async_task builds a broker per
    job: with Redis, a new connection and handshake for every enqueue (py-spy: over a quarter of
    a web worker's time under the pipeline benchmark). redis-py's pool reconnects after a fork."""
    from django_q.brokers import get_broker
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf
    from django_q.models import OrmQ

    class EnqueueingORM(ORM):
        """django-q2's ORM broker, for enqueueing only. Its get_connection runs Django's
        close_old_connections (meant for the cluster's long-lived broker thread) on every
        enqueue after commit: that makes the next statement a health-check round trip, or a
        new connection when connections are not kept. Here the web request and django-q2's
        worker already do that, once, at their start."""

        @staticmethod
        def get_connection(list_key: str | None = None):
            return OrmQ.objects.using(Conf.ORM)

        database = Conf.ORM  # the database its rows are in

        def enqueue(self, task) -> int:
            # The broker's own create() (no signal is connected to OrmQ), through the INSERT
            # compiled once (moderation/db/insert_sql.py).
            package = self.package(task)
            insert_row(package, Conf.ORM)
            return package.pk

        def package(self, task) -> OrmQ:
            return OrmQ(key=self.list_key or Conf.CLUSTER_NAME, payload=task, lock=timezone.now())

    if Conf.ORM:  # (without building the clusters' broker, Q_CLUSTER's broker_class: the web needs none)
        return EnqueueingORM(list_key=cluster)
    return get_broker(cluster)


def enqueue_on_commit(func: str, *, for_review=None, writes=None, **kwargs) -> str:
    """Enqueue `func(**kwargs, job_id=...)` once the surrounding transaction commits.

    `for_review`: the review the job works for; the enqueue is then recorded on its timeline, in
    the same transaction as whatever caused it. `writes` (a services OneStatement, not run
    yet): that record goes in it, and so does the job's row where the broker allows
    (`_writes_jobs_in`); otherwise the job is enqueued once that statement has run, after the
    commit of its transaction (with none open, at once: the statement was its own). Returns the
    job id the task will log under (also its django-q2 task name).
    """
    job_id = new_job_id()
    from audit import context, tracing

    request_id = context.current().get("request_id")
    if request_id:  # the web request that caused the job: its id follows the work into the job
        kwargs["web_request_id"] = request_id
    trace_parent = tracing.carrier()
    if trace_parent:  # and so does the trace (audit/tracing.py), when tracing is on
        kwargs["trace_parent"] = trace_parent
    if for_review is not None:
        from audit.models import EventKind, PipelineEvent

        event = PipelineEvent(
            kind=EventKind.JOB_ENQUEUED, review_id=for_review, job_id=job_id, detail={"task": func.rsplit(".", 1)[-1]}
        )
        if writes is None:
            event.save()
        else:
            writes.insert(event)

    cluster = cluster_for(func)

    def push(broker=None) -> None:
        from django_q.tasks import async_task

        async_task(func, job_id=job_id, task_name=f"{func.rsplit('.', 1)[-1]}:{job_id}", cluster=cluster,
                   broker=broker or job_broker(cluster), **kwargs)

    if writes is None:
        transaction.on_commit(push)
    elif _writes_jobs_in(writes, cluster):
        push(_InStatement(job_broker(cluster), writes))
    else:
        writes.on_executed(lambda: transaction.on_commit(push))
    return job_id


def _writes_jobs_in(writes, cluster: str) -> bool:
    """Whether the job's row can be written by `writes`: the queue is the ORM broker's, in the
    statement's database, and django-q2 does not run tasks at once (sync)."""
    from django_q.conf import Conf

    broker = job_broker(cluster)
    return getattr(broker, "database", None) == writes.using and not Conf.SYNC


class _InStatement:
    """The ORM broker for one job whose row `writes` (a services OneStatement) inserts, for
    django-q2's async_task (which reads `list_key` and calls `enqueue`)."""

    def __init__(self, broker, writes) -> None:
        self.list_key, self._broker, self._writes = broker.list_key, broker, writes

    def enqueue(self, task) -> str:
        self._writes.insert(self._broker.package(task))
        return "with its statement"  # (its id, for django-q2's log line, is not known yet)


def enqueue_batch(rows, *, order_by: str, enqueued_before: datetime | None, now: datetime, limit: int, task: str,
                  id_kwarg: str, review_field: str) -> list:
    """Take up to `limit` of `rows` not enqueued since `enqueued_before` (None: never enqueued),
    mark them enqueued at `now`, and enqueue `task` for each after commit. SKIP LOCKED hands an
    overlapping caller (another sweep, a delivery handing its slot on) the other rows."""
    if limit <= 0:
        return []
    not_enqueued = Q(last_enqueued_at__isnull=True)
    if enqueued_before is not None:
        not_enqueued |= Q(last_enqueued_at__lt=enqueued_before)
    with transaction.atomic():
        taken = list(
            rows.select_for_update(skip_locked=True, of=("self",))  # not the rows review_field joins
            .filter(not_enqueued)
            .order_by(order_by)
            .values_list("pk", review_field)[:limit]
        )
        ids = [pk for pk, _ in taken]
        rows.model.objects.filter(pk__in=ids).update(last_enqueued_at=now)
        for pk, review_id in taken:
            enqueue_on_commit(task, for_review=review_id, **{id_kwarg: pk})
    return ids
