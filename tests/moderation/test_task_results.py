"""django-q2 keeps no successful task results (each stored one cost every later task of its
function a locked read of up to `save_limit` rows: docs/design.md, "Known pitfalls"); failures
are still stored, for the admin. Tasks run here through django-q2's own worker and monitor."""

from __future__ import annotations

import uuid

import pytest
from django_q.models import Failure, Success, Task
from django_q.tasks import async_task

from moderation.models import ContentReview, ReviewStatus
from tests.helpers import result, submit

pytestmark = pytest.mark.django_db(transaction=True)


def through_the_cluster(*jobs: tuple) -> None:
    """Enqueue `jobs` ((func, *args) each) on the ORM broker, then run everything queued as a
    cluster does: a worker executes each task and the monitor saves (or not) its result and
    acknowledges it."""
    from multiprocessing import Queue, Value

    from django_q.brokers import get_broker
    from django_q.monitor import monitor
    from django_q.signing import SignedPackage
    from django_q.worker import worker

    broker = get_broker()
    for func, *args in jobs:
        async_task(func, *args, broker=broker)
    tasks, results = Queue(), Queue()
    while dequeued := broker.dequeue():
        for ack_id, package in dequeued:
            task = SignedPackage.loads(package)
            task["ack_id"] = ack_id
            tasks.put(task)
    tasks.put("STOP")
    worker(tasks, results, Value("f", -1))
    results.put("STOP")
    monitor(results, broker)
    assert broker.queue_size() == 0  # acknowledged, success or failure alike


def test_a_successful_moderate_review_leaves_no_stored_result(api_client, scripted):
    scripted.default = result(0.1)
    review = submit(api_client)  # its job is enqueued on commit

    through_the_cluster()

    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.APPROVED  # it really ran
    assert not Task.objects.exists()


def test_a_failing_task_is_still_stored_as_a_failure(api_client, scripted):
    missing = uuid.uuid4()  # no such review: the claim raises

    through_the_cluster(("moderation.tasks.moderate_review", missing))

    failure = Failure.objects.get()
    assert failure.func == "moderation.tasks.moderate_review" and "DoesNotExist" in str(failure.result)
    assert not Success.objects.exists()


def test_the_sweeper_leaves_a_heartbeat_not_a_result(db):
    from moderation.models import Heartbeat

    through_the_cluster(("moderation.tasks.sweep",))

    assert not Task.objects.exists()
    beat = Heartbeat.objects.get(name="sweeper")
    assert "callbacks processed" in beat.detail
