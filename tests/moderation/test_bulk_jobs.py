"""Bulk actions by query, as a job (moderation/services/bulk.py): frozen targets, progress,
slices, cancel, resume after a crash, an idempotent rerun, the 10,000 limit, and the reason
each skipped review was skipped."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.utils import timezone

from audit.models import Actor
from moderation import services
from moderation.errors import BulkTooLarge, NotApplicable
from moderation.models import (
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
    Content,
    ContentReview,
    Decision,
    DecisionSource,
)
from moderation.services import bulk
from tests.helpers import decided, queued_tasks, staff_browser, submit

pytestmark = pytest.mark.django_db
TASK = "moderation.tasks.bulk_job_run"


@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "supervisor").user


@pytest.fixture
def sam(django_user_model):
    return staff_browser(django_user_model, "sam", "moderator").user


def waiting_reviews(api_client, n: int) -> list[ContentReview]:
    return [decided(api_client, "manual_review") for _ in range(n)]


def draft(reviews, moderator, *, action="override", label="approved", category="", reason="a spam wave, all fine"):
    return services.bulk_job_draft(reviews=ContentReview.objects.filter(pk__in=[r.pk for r in reviews]),
                                   moderator=moderator, action=action, label=label, category=category, reason=reason,
                                   query="status__exact=manual_review")


def started(reviews, moderator, **kwargs) -> BulkJob:
    job = draft(reviews, moderator, **kwargs)
    services.bulk_job_start(job_id=job.pk, moderator=moderator)
    return job


def run(job, seconds: float = 60.0) -> str:
    return services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + seconds)


def outcomes(job) -> list[tuple[str, str]]:
    return list(job.items.order_by("position").values_list("outcome", "reason"))


def moderator_decisions(review) -> int:
    return Decision.objects.filter(review=review, source=DecisionSource.MODERATOR).count()


def a_clock_of(monkeypatch, ticks_per_item: int = 1):
    """time.monotonic() in the service, one second later at each call: a deadline of N seconds
    then lets a slice take a known number of reviews (the loop reads the clock once per review)."""
    clock = itertools.count(start=1000)
    monkeypatch.setattr(bulk, "time", SimpleNamespace(monotonic=lambda: float(next(clock))))
    return 1000.0


def test_the_draft_freezes_each_review_with_its_version_and_the_start_enqueues_one_task(
    api_client, mia, django_capture_on_commit_callbacks
):
    reviews = waiting_reviews(api_client, 3)
    job = draft(reviews, mia, label="rejected", category="spam")

    assert job.status == BulkJobStatus.DRAFT and job.total == 3 and (job.label, job.category) == ("rejected", "spam")
    assert sorted(job.items.values_list("review_id", "version", "status_seen")) == sorted(
        (r.pk, r.version, "manual_review") for r in reviews)
    assert queued_tasks(TASK) == []  # nothing runs before the moderator confirms

    with django_capture_on_commit_callbacks(execute=True):
        services.bulk_job_start(job_id=job.pk, moderator=mia)

    job.refresh_from_db()
    assert job.status == BulkJobStatus.QUEUED
    assert [t["kwargs"]["bulk_job_id"] for t in queued_tasks(TASK)] == [job.pk]


def test_a_job_decides_every_review_once_and_counts_its_progress(api_client, mia):
    reviews = waiting_reviews(api_client, 4)
    job = started(reviews, mia, label="rejected", category="spam")

    summary = run(job)

    job.refresh_from_db()
    assert summary == "done: 4 done, 0 skipped, 0 not done"
    assert job.status == BulkJobStatus.DONE and job.started_at and job.finished_at
    assert services.bulk_job_progress(job) == services.BulkProgress(total=4, done=4, skipped=0)
    for review in reviews:
        review.refresh_from_db()
        assert review.status == "rejected" and moderator_decisions(review) == 1
        assert review.decision.moderator == mia and review.decision.category == "spam"


def test_a_slice_that_runs_out_of_time_enqueues_the_rest_behind_the_pipeline(
    api_client, mia, monkeypatch, django_capture_on_commit_callbacks
):
    reviews = waiting_reviews(api_client, 5)
    job = started(reviews, mia)
    start = a_clock_of(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        summary = services.bulk_job_run(job_id=job.pk, deadline=start + 2)

    assert summary == "2 reviews handled; the rest in the next slice"
    assert services.bulk_job_progress(job) == services.BulkProgress(total=5, done=2, skipped=0)
    assert len(queued_tasks(TASK)) == 1  # the next slice, a new task at the back of the job queue
    job.refresh_from_db()
    assert job.status == BulkJobStatus.RUNNING


def test_a_cancelled_job_stops_between_two_reviews_and_keeps_what_it_did(api_client, mia, monkeypatch):
    reviews = waiting_reviews(api_client, 5)
    job = started(reviews, mia)
    start = a_clock_of(monkeypatch)
    services.bulk_job_run(job_id=job.pk, deadline=start + 2)  # two done

    services.bulk_job_cancel(job_id=job.pk, moderator=mia)
    summary = services.bulk_job_run(job_id=job.pk, deadline=start + 10_000)

    job.refresh_from_db()
    assert summary == "cancelled: 2 done, 0 skipped, 3 not done"
    assert job.status == BulkJobStatus.CANCELLED and job.finished_at
    assert [outcome for outcome, _ in outcomes(job)] == ["done", "done", "pending", "pending", "pending"]
    assert [ContentReview.objects.get(pk=r.pk).status for r in reviews] == ["approved"] * 2 + ["manual_review"] * 3
    assert run(job) == "nothing to do: cancelled"


def test_a_draft_cancelled_is_discarded_and_never_runs(api_client, mia):
    job = draft(waiting_reviews(api_client, 1), mia)

    services.bulk_job_cancel(job_id=job.pk, moderator=mia)

    job.refresh_from_db()
    assert job.status == BulkJobStatus.DISCARDED
    assert run(job) == "nothing to do: discarded (never started)"
    with pytest.raises(NotApplicable):
        services.bulk_job_start(job_id=job.pk, moderator=mia)


class WorkerKilled(BaseException):
    """What a SIGKILL looks like from inside: not an error any handler catches."""


def test_a_job_whose_worker_died_mid_way_is_resumed_by_the_sweep_and_decides_each_review_once(
    api_client, mia, monkeypatch, django_capture_on_commit_callbacks
):
    reviews = waiting_reviews(api_client, 5)
    job = started(reviews, mia)
    real, calls = bulk.review_override, itertools.count(1)

    def dies_on_the_third(**kwargs):
        decision = real(**kwargs)
        if next(calls) == 3:  # after the third decision, before its transaction commits
            raise WorkerKilled
        return decision

    monkeypatch.setattr(bulk, "review_override", dies_on_the_third)
    with pytest.raises(WorkerKilled):
        run(job)
    monkeypatch.setattr(bulk, "review_override", real)

    # The third decision went with its item: both pending, nothing half done.
    assert [outcome for outcome, _ in outcomes(job)] == ["done", "done", "pending", "pending", "pending"]
    assert [moderator_decisions(r) for r in reviews] == [1, 1, 0, 0, 0]
    job.refresh_from_db()
    assert job.status == BulkJobStatus.RUNNING

    # Not before the task's lease has passed: the worker may still be alive.
    assert services.bulk_jobs_resume(now=job.beat_at + timedelta(seconds=5)) == []
    later = job.beat_at + timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.bulk_jobs_resume(now=later) == [job.pk]
    [task] = queued_tasks(TASK)
    assert task["kwargs"]["bulk_job_id"] == job.pk

    assert run(job) == "done: 5 done, 0 skipped, 0 not done"
    assert [moderator_decisions(r) for r in reviews] == [1] * 5


def test_the_sweep_resumes_a_job_whose_task_was_lost(api_client, mia, django_capture_on_commit_callbacks):
    job = started(waiting_reviews(api_client, 1), mia)
    BulkJob.objects.filter(pk=job.pk).update(beat_at=timezone.now() - timedelta(hours=1))

    from moderation import tasks

    with django_capture_on_commit_callbacks(execute=True):
        summary = tasks.sweep()

    assert ", 1 bulk jobs resumed, 0 backtests resumed" in summary
    assert [t["kwargs"]["bulk_job_id"] for t in queued_tasks(TASK)] == [job.pk]


def test_running_a_finished_job_again_decides_nothing_twice(api_client, mia):
    reviews = waiting_reviews(api_client, 3)
    job = started(reviews, mia)
    run(job)
    # A redelivered task of a worker that died after its last item, before it closed the job.
    BulkJob.objects.filter(pk=job.pk).update(status=BulkJobStatus.RUNNING, finished_at=None)

    assert run(job) == "done: 3 done, 0 skipped, 0 not done"
    assert run(job) == "nothing to do: done"
    assert [moderator_decisions(r) for r in reviews] == [1] * 3


def test_more_than_ten_thousand_reviews_are_refused_before_anything_is_written(api_client, mia):
    contents = Content.objects.bulk_create(
        [Content(client=api_client, external_id=f"wave-{i}", kind="text", text="buy now") for i in range(10_001)])
    ContentReview.objects.bulk_create([ContentReview(content=c, client=api_client) for c in contents])

    with pytest.raises(BulkTooLarge) as refused:
        services.bulk_job_draft(reviews=ContentReview.objects.all(), moderator=mia, action="escalate",
                                reason="spam wave")

    assert refused.value.reason == ("the search matches more than 10,000 reviews (10,001 or more): narrow it with a "
                                    "filter or a search term; one bulk action takes at most 10,000")
    assert not BulkJob.objects.exists() and not BulkJobItem.objects.exists()

    job = services.bulk_job_draft(reviews=ContentReview.objects.exclude(content__external_id="wave-0"),
                                  moderator=mia, action="escalate", reason="spam wave")
    assert job.total == 10_000 == job.items.count()


def test_each_review_that_changed_since_the_confirm_page_is_skipped_with_its_reason(api_client, mia, sam):
    moderated, reprocessed, leased, erased, same, pending, fine = [
        *waiting_reviews(api_client, 3), decided(api_client, "manual_review"), decided(api_client, "approved"),
        submit(api_client), decided(api_client, "manual_review")]
    job = started([moderated, reprocessed, leased, erased, same, pending, fine], mia)
    services.review_override(review_id=moderated.pk, label="rejected", category="spam", reason="spam",
                             moderator=sam, expected_version=moderated.version)
    services.review_reprocess(review_id=reprocessed.pk, actor=Actor.ADMIN, actor_id="admin:sam", user=sam)
    ContentReview.objects.filter(pk=leased.pk).update(leased_to=sam,
                                                      lease_expires_at=timezone.now() + timedelta(minutes=10))
    Content.objects.filter(pk=erased.content_id).update(erased_at=timezone.now())

    run(job)

    by_review = dict(job.items.values_list("review_id", "reason"))
    assert by_review[moderated.pk].startswith("it changed since you opened it: rejected by moderator sam at ")
    assert by_review[reprocessed.pk].startswith("it changed since you opened it: sent to the model again by ")
    assert by_review[leased.pk].startswith("sam is reviewing this until ") and by_review[leased.pk].endswith(" UTC")
    assert by_review[erased.pk] == "its content was erased: nothing is left to judge"
    assert by_review[same.pk] == "already approved"
    assert by_review[pending.pk] == "not decided yet"
    assert by_review[fine.pk] == ""
    assert services.bulk_job_progress(job) == services.BulkProgress(total=7, done=1, skipped=6)
    assert moderator_decisions(moderated) == 1  # sam's, not overwritten


def test_a_job_whose_moderator_lost_the_permission_stops_without_deciding(api_client, mia):
    job = started(waiting_reviews(api_client, 2), mia, action="reprocess", label="")
    mia.groups.clear()  # the run reads its moderator afresh: no permission cached from the draft

    assert run(job) == "mia may no longer reprocess reviews: 0 done, 0 skipped, 2 not done"
    job.refresh_from_db()
    assert job.status == BulkJobStatus.CANCELLED


def test_escalate_and_reprocess_take_their_own_reviews_and_skip_the_others(api_client, mia):
    pending, rejected = submit(api_client), decided(api_client, "rejected")
    escalation = started([pending, rejected], mia, action="escalate", label="")
    run(escalation)
    assert [(o, r) for o, r in outcomes(escalation)] in (
        [("done", ""), ("skipped", "already rejected")], [("skipped", "already rejected"), ("done", "")])
    pending.refresh_from_db()
    assert pending.status == "manual_review"

    again = started([rejected], mia, action="reprocess", label="")
    run(again)
    rejected.refresh_from_db()
    assert rejected.status == "pending" and outcomes(again) == [("done", "")]


@pytest.mark.parametrize("action", ["override", "escalate"])
def test_a_policy_published_while_a_job_waits_skips_the_rest_never_deciding_under_the_new_version(
        api_client, mia, action, monkeypatch):
    reviews = waiting_reviews(api_client, 4) if action == "override" else [submit(api_client) for _ in range(4)]
    job = started(reviews, mia, action=action, label="rejected", category="spam", reason="a spam wave")
    assert job.policy == services.policy_active()
    real_act = bulk._act

    def publishing_after_the_second(job, item):
        real_act(job, item)
        if item.position == 1:  # a supervisor publishes a new version mid-way
            services.policy_publish_change(lambda active: {}, notes="a new version")

    monkeypatch.setattr(bulk, "_act", publishing_after_the_second)

    run(job)

    assert [outcome for outcome, _ in outcomes(job)] == ["done", "done", "skipped", "skipped"]
    assert {reason for outcome, reason in outcomes(job) if outcome == "skipped"} == {
        f"the policy changed since the job was confirmed: version {services.policy_active().version} is in force"
        if action == "override" else "the policy changed since the job was confirmed"}
    for review in reviews[2:]:
        review.refresh_from_db()
        assert moderator_decisions(review) == 0 and review.status == ("manual_review" if action == "override"
                                                                       else "pending")
