"""The clusters' ORM broker (moderation/management/cluster.py, ClusterORM): one statement a
dequeue with django-q2's lease, and Django's connection checks at most once a second."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django import db
from django.db import connection
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ

from moderation.management.cluster import ClusterORM

pytestmark = pytest.mark.django_db(transaction=True)


def jobs(key: str, n: int, *, lock=None) -> list[int]:
    lock = lock or timezone.now() - timedelta(seconds=1)
    return [OrmQ.objects.create(key=key, payload=f"job-{i}", lock=lock).pk for i in range(n)]


def test_the_clusters_take_their_jobs_through_it():
    assert isinstance(get_broker("moderation"), ClusterORM)


def test_a_dequeue_takes_the_oldest_free_job_of_its_queue_and_leases_it(monkeypatch):
    monkeypatch.setattr(Conf, "BULK", 2)
    mine = jobs("q-a", 3)
    jobs("q-b", 2)  # another queue's
    leased = jobs("q-a", 1, lock=timezone.now() + timedelta(seconds=60))  # under another's lease
    broker = ClusterORM(list_key="q-a")
    before = timezone.now()

    first = broker.dequeue()

    assert first == [(mine[0], "job-0"), (mine[1], "job-1")]
    locks = dict(OrmQ.objects.filter(pk__in=mine).values_list("pk", "lock"))
    lease = timedelta(seconds=Conf.RETRY)
    assert all(before + lease <= locks[pk] <= timezone.now() + lease for pk in mine[:2])
    assert broker.dequeue() == [(mine[2], "job-2")]
    monkeypatch.setattr(Conf, "POLL", 0.01)
    assert broker.dequeue() is None  # the rest is leased or another queue's
    assert OrmQ.objects.get(pk=leased[0]).lock > timezone.now()


def test_a_dequeue_takes_no_more_than_its_batch_whatever_plan_postgresql_picks(monkeypatch):
    """With the locking subquery inside `id IN (...)`, the plan below (a nested-loop semi join that
    runs the subquery again for each row it scans) took all three jobs for a batch of two."""
    monkeypatch.setattr(Conf, "BULK", 2)
    mine = jobs("q-plan", 3)
    broker = ClusterORM(list_key="q-plan")
    plan = ("enable_hashjoin", "enable_mergejoin", "enable_hashagg", "enable_material", "enable_sort")
    with connection.cursor() as cursor:
        for setting in plan:
            cursor.execute(f"SET {setting} = off")
    try:
        taken = broker.dequeue()
    finally:
        with connection.cursor() as cursor:
            for setting in plan:
                cursor.execute(f"RESET {setting}")

    assert taken == [(mine[0], "job-0"), (mine[1], "job-1")]
    assert OrmQ.objects.get(pk=mine[2]).lock < timezone.now()  # still free


def test_a_job_whose_lease_ended_is_taken_again():
    (pk,) = jobs("q-c", 1)
    broker = ClusterORM(list_key="q-c")
    assert broker.dequeue() == [(pk, "job-0")]
    OrmQ.objects.filter(pk=pk).update(lock=timezone.now() - timedelta(seconds=1))  # as the lease's end
    assert broker.dequeue() == [(pk, "job-0")]


def test_pushers_dequeueing_at_once_never_take_one_job_twice():
    """Four brokers (four pushers of clusters sharing the queue) on their own connections take
    300 jobs together: each job once. Without FOR UPDATE SKIP LOCKED in dequeue's statement, two
    pick the same rows and both update them (the UPDATE rechecks only `id IN (...)`)."""
    mine = set(jobs("q-race", 300))
    taken: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def pusher():
        broker = ClusterORM(list_key="q-race")
        broker.CHECK_EVERY_S = 0.0
        try:
            start.wait()
            empty = 0
            while empty < 3:
                got = broker.dequeue() or []
                empty = 0 if got else empty + 1
                taken.extend(pk for pk, _ in got)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=pusher) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    assert sorted(taken) == sorted(mine), f"{len(taken) - len(set(taken))} jobs taken twice"


def test_connection_checks_run_at_most_once_a_second_and_at_once_after_an_error(monkeypatch):
    checks = []
    monkeypatch.setattr(db, "close_old_connections", lambda **kw: checks.append(1))
    broker = ClusterORM(list_key="q-d")
    for _ in range(5):
        broker.get_connection()
    assert len(checks) == 1
    db.connections[Conf.ORM].errors_occurred = True
    try:
        broker.get_connection()
    finally:
        db.connections[Conf.ORM].errors_occurred = False
    assert len(checks) == 2
    broker._checked_at -= broker.CHECK_EVERY_S
    broker.get_connection()
    assert len(checks) == 3
