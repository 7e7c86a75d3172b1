"""reviews_worker_lost: the reviews (and decisions' notifications) of workers known to be dead are
taken over at once, not after the dead attempt's lease and the silence deadline
(moderation/management/cluster.py rebuilds the cluster and enqueues it)."""

from __future__ import annotations

import pytest

from moderation import services
from moderation.models import AttemptOutcome, ProviderAttempt, ReviewStatus
from moderation.providers import Accepted
from tests.helpers import claimed, queued_tasks, result

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

DISPATCH = "moderation.tasks.dispatch_request"
DELIVER = "moderation.tasks.deliver_notification"


def begun(client, worker: str):
    """A review claimed by `worker`, whose attempt is in flight when the worker is killed."""
    from moderation.services.dispatch import attempt_begin

    review, request = claimed(client, worker=worker)
    attempt_begin(request_id=request.pk, worker_id=worker, job_id="", now=None)
    return review, request


def test_a_dead_workers_attempt_in_flight_is_abandoned_and_its_operation_sent_again_with_its_key(api_client):
    review, request = begun(api_client, "host:101")

    assert services.reviews_worker_lost(worker_ids=["host:101"]) == [review.pk]

    attempt = ProviderAttempt.objects.get(request=request)
    assert attempt.outcome == AttemptOutcome.ABANDONED and attempt.finished_at is not None
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [request.pk]
    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING and review.active_idempotency_key == request.idempotency_key


def test_the_operation_sent_again_is_dispatched_at_once_not_after_the_attempts_lease(api_client, scripted):
    scripted.default = result(0.1)
    review, request = begun(api_client, "host:102")
    services.reviews_worker_lost(worker_ids=["host:102"])

    # Without the dead attempt abandoned, dispatch skips it until the task timeout has passed.
    report = services.request_dispatch(request_id=request.pk, worker_id="host:200")

    assert (report.action, report.detail) == ("finalized", "applied")
    review.refresh_from_db()
    assert review.status == ReviewStatus.APPROVED
    assert {c.idempotency_key for c in scripted.calls} == {str(request.idempotency_key)}


def test_a_live_workers_review_is_left_alone(api_client):
    begun(api_client, "host:103")

    assert services.reviews_worker_lost(worker_ids=["host:999"]) == []
    assert ProviderAttempt.objects.get().outcome == AttemptOutcome.IN_FLIGHT
    assert queued_tasks(DISPATCH) == []


def test_an_operation_the_provider_accepted_waits_for_its_callback_whoever_sent_it(api_client, scripted):
    scripted.script = [Accepted("prov-1")]
    review, request = claimed(api_client, worker="host:104")
    services.request_dispatch(request_id=request.pk, worker_id="host:104")

    assert services.reviews_worker_lost(worker_ids=["host:104"]) == []
    assert queued_tasks(DISPATCH) == []
    assert ProviderAttempt.objects.get(request=request).outcome == AttemptOutcome.ACCEPTED


def test_the_notification_of_a_decision_a_dead_worker_made_is_enqueued_again():
    from django_q.models import OrmQ

    from audit import context
    from moderation.models import DecisionNotification

    client, _ = services.api_client_create(name="hooked", webhook_url="http://127.0.0.1:9/hook")
    review, request = claimed(client, worker="host:105")
    with context.bind(worker_id="host:105"):  # the decision is the worker's (its transition's actor)
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    OrmQ.objects.all().delete()  # the worker was killed after the commit, before it pushed the job
    notification = DecisionNotification.objects.get(review=review)

    services.reviews_worker_lost(worker_ids=["host:999"])  # another worker's death: not this one
    assert queued_tasks(DELIVER) == []

    services.reviews_worker_lost(worker_ids=["host:105"])
    assert [t["kwargs"]["notification_id"] for t in queued_tasks(DELIVER)] == [notification.pk]


@pytest.mark.django_db(transaction=True)
def test_the_ledger_keeps_what_was_taken_and_not_done_whatever_order_it_reads_them_in():
    from moderation.management.cluster import DONE, TAKEN, Ledger

    ledger = Ledger()
    try:
        Ledger.write(ledger.taken_w, TAKEN, "a", b"1\npayload-a")
        Ledger.write(ledger.taken_w, TAKEN, "b", b"2\npayload-b")
        Ledger.write(ledger.done_w, DONE, "a")
        Ledger.write(ledger.done_w, DONE, "c")  # done before its "taken" record is read
        ledger.read()
        Ledger.write(ledger.taken_w, TAKEN, "c", b"3\npayload-c")
        big = b"4\n" + b"x" * 200_000  # more than a pipe holds: read as it is written
        import threading

        writer = threading.Thread(target=Ledger.write, args=(ledger.taken_w, TAKEN, "d", big))
        writer.start()
        while writer.is_alive():
            ledger.read()
        ledger.read()
        os_write_torn(ledger.taken_w)  # a writer killed mid-record: its record is dropped
        ledger.read()

        assert ledger.in_flight == {"b": ("2", b"payload-b"), "d": ("4", b"x" * 200_000)}
        assert ledger.done_early == set()
    finally:
        ledger.close()


def os_write_torn(fd: int) -> None:
    import os

    from moderation.management.cluster import LEDGER_HEADER, TAKEN

    os.write(fd, LEDGER_HEADER.pack(TAKEN, 1, 50) + b"e" + b"only part of it")
