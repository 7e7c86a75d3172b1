"""A new submission's job in its own statement (moderation/jobs.py): with the ORM broker its
django-q2 row commits or rolls back with the review; with any other broker it is pushed after
commit, as every other job."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from audit.models import EventKind, PipelineEvent
from moderation import jobs, services
from moderation.models import ContentReview
from tests.helpers import collide, queued_tasks

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

MODERATE = "moderation.tasks.moderate_review"


def submitted(client, external_id: str = "job-1"):
    return services.review_submit(client=client, external_id=external_id, kind="text", text="hello")


def test_the_job_is_written_by_the_submissions_statement_and_names_its_review(api_client):
    review, created = submitted(api_client)

    assert created
    (task,) = queued_tasks(MODERATE)
    event = PipelineEvent.objects.get(review=review, kind=EventKind.JOB_ENQUEUED)
    assert task["kwargs"]["review_id"] == review.pk and task["kwargs"]["job_id"] == event.job_id
    assert task["name"] == f"moderate_review:{event.job_id}" and task["cluster"] == "moderation"


def test_a_submission_rolled_back_leaves_no_job(api_client):
    with pytest.raises(RuntimeError), transaction.atomic():
        submitted(api_client)
        assert len(queued_tasks(MODERATE)) == 1  # written, in the transaction
        raise RuntimeError("the caller's transaction fails after the submission")

    assert queued_tasks(MODERATE) == [] and not ContentReview.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_submissions_racing_for_one_external_id_queue_one_job(api_client):
    outcomes = collide(4, lambda i: submitted(api_client)[1])

    assert sorted(outcomes) == [False, False, False, True]
    (task,) = queued_tasks(MODERATE)
    assert task["kwargs"]["review_id"] == ContentReview.objects.get().pk


class RecordingBroker:
    """A broker that is not the ORM broker (as Redis): records what each enqueue finds committed."""

    list_key = "moderation"

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []

    def enqueue(self, task) -> str:
        from django_q.signing import SignedPackage

        review_id = SignedPackage.loads(task)["kwargs"]["review_id"]
        with connection.cursor() as cursor:  # another connection would not see it before commit
            cursor.execute("SELECT EXISTS (SELECT 1 FROM moderation_contentreview WHERE id = %s)", [review_id])
            self.seen.append((review_id, cursor.fetchone()[0]))
        return "recorded"


def test_with_another_broker_the_job_is_pushed_once_the_transaction_commits(api_client, monkeypatch):
    broker = RecordingBroker()
    monkeypatch.setattr(jobs, "job_broker", lambda cluster: broker)

    with transaction.atomic():
        review, _ = submitted(api_client)
        assert broker.seen == []  # not before the commit
    assert broker.seen == [(review.pk, True)] and queued_tasks(MODERATE) == []
