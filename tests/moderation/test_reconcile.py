"""The sweeper: due retries, lost jobs and silent operations, safe when sweeps overlap."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from moderation import services
from moderation.models import Cause, ModerationRequest, RequestStatus, ReviewStatus
from moderation.providers import Accepted
from moderation.providers.base import ProviderServerError
from tests.helpers import claimed, collide, queued_tasks, result, silent_for, submit

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

DISPATCH = "moderation.tasks.dispatch_request"
MODERATE = "moderation.tasks.moderate_review"


def stuck_time(settings, extra: float = 1) -> timezone.datetime:
    return timezone.now() + timedelta(seconds=settings.MODERATION_STUCK_AFTER_S + extra)


def accepted_request(client, scripted):
    scripted.script = [Accepted("prov-1")]
    review, request = claimed(client)
    services.request_dispatch(request_id=request.pk, worker_id="w1")
    return review, request


@pytest.mark.django_db(transaction=True)
def test_a_due_retry_is_enqueued_once_even_when_sweeps_overlap(api_client, scripted):
    scripted.script = [ProviderServerError("502")]
    _, request = claimed(api_client)
    services.request_dispatch(request_id=request.pk, worker_id="w1")
    request.refresh_from_db()
    due = request.next_attempt_at + timedelta(seconds=1)

    reports = collide(4, lambda i: services.reviews_sweep(now=due))

    assert sum(len(r.retries_enqueued) for r in reports) == 1
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [request.pk]
    # Until its lease runs out, a job already enqueued is not enqueued again.
    assert services.reviews_sweep(now=due + timedelta(seconds=5)).retries_enqueued == []


def test_a_retry_not_yet_due_is_left_alone(api_client, scripted):
    scripted.script = [ProviderServerError("502")]
    _, request = claimed(api_client)
    services.request_dispatch(request_id=request.pk, worker_id="w1")

    assert services.reviews_sweep().retries_enqueued == []


def test_a_pending_review_whose_job_was_lost_is_enqueued_again(api_client, settings):
    review = submit(api_client)
    fresh = submit(api_client)

    lost = timezone.now() + timedelta(seconds=settings.MODERATION_LOST_JOB_AFTER_S + 1)
    report = services.reviews_sweep(now=lost)

    assert review.pk in report.pending_requeued and fresh.pk in report.pending_requeued
    assert services.reviews_sweep(now=lost).pending_requeued == []  # marked
    assert services.reviews_sweep().pending_requeued == []


def test_the_next_retry_is_enqueued_as_soon_as_it_is_due(api_client, scripted):
    scripted.script = [ProviderServerError("502"), ProviderServerError("502")]
    _, request = claimed(api_client)
    services.request_dispatch(request_id=request.pk, worker_id="w1")
    request.refresh_from_db()
    first_due = request.next_attempt_at + timedelta(seconds=1)
    assert services.reviews_sweep(now=first_due).retries_enqueued == [request.pk]
    services.request_dispatch(request_id=request.pk, worker_id="w1", now=first_due)  # the enqueued job runs, fails
    request.refresh_from_db()

    second_due = request.next_attempt_at + timedelta(seconds=1)
    assert services.reviews_sweep(now=second_due).retries_enqueued == [request.pk]


def test_an_attempt_whose_worker_died_mid_call_is_retried_with_the_same_key(api_client, settings):
    from moderation.services.dispatch import attempt_begin

    review, request = claimed(api_client)
    attempt_begin(request_id=request.pk, worker_id="killed", job_id="", now=None)  # then SIGKILL

    report = services.reviews_sweep(now=stuck_time(settings))

    assert report.redispatched == [review.pk] and report.superseded == []
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [request.pk]


def test_a_result_received_but_not_recorded_is_fetched_again_with_the_same_key(api_client, scripted, settings):
    from moderation.services import dispatch

    scripted.default = result(0.1)
    review, request = claimed(api_client)
    real_finalize = dispatch.review_finalize
    dispatch.review_finalize = lambda **kw: (_ for _ in ()).throw(SystemExit("killed"))  # dies after the answer
    try:
        with pytest.raises(SystemExit):
            services.request_dispatch(request_id=request.pk, worker_id="w1")
    finally:
        dispatch.review_finalize = real_finalize

    assert services.reviews_sweep(now=stuck_time(settings)).redispatched == [review.pk]
    report = services.request_dispatch(request_id=request.pk, worker_id="w2", now=stuck_time(settings))
    assert (report.action, report.detail) == ("finalized", "applied")
    assert {c.idempotency_key for c in scripted.calls} == {str(request.idempotency_key)}


def test_a_claimed_but_never_sent_request_is_dispatched_again_with_its_key(api_client, settings):
    review, request = claimed(api_client)  # the worker died right after its claim

    report = services.reviews_sweep(now=stuck_time(settings))

    assert report.redispatched == [review.pk]
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [request.pk]
    review.refresh_from_db()
    assert review.active_idempotency_key == request.idempotency_key


def test_a_silent_operation_is_superseded_by_a_new_key(api_client, scripted, settings):
    review, old = accepted_request(api_client, scripted)

    report = services.reviews_sweep(now=stuck_time(settings))

    assert report.superseded == [review.pk]
    review.refresh_from_db()
    old.refresh_from_db()
    new = ModerationRequest.objects.get(supersedes=old)
    assert old.status == RequestStatus.SUPERSEDED
    assert (new.cause, new.generation) == (Cause.RETRY_RECONCILE, 1)
    assert review.active_idempotency_key == new.idempotency_key
    assert review.status == ReviewStatus.PROCESSING
    last = review.transitions.last()
    assert (last.from_status, last.to_status, last.cause, last.actor) == (
        "processing", "processing", Cause.RETRY_RECONCILE, "system"
    )
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [new.pk]


def test_after_max_supersedes_a_silent_review_goes_to_a_human(api_client, scripted, settings):
    settings.MODERATION_MAX_SUPERSEDES = 1
    review, _ = accepted_request(api_client, scripted)
    services.reviews_sweep(now=stuck_time(settings))
    new = ModerationRequest.objects.get(review=review, generation=1)
    scripted.script = [Accepted("prov-2")]
    services.request_dispatch(request_id=new.pk, worker_id="w1")

    report = services.reviews_sweep(now=stuck_time(settings, extra=60))

    assert report.escalated == [review.pk]
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert review.transitions.last().cause == Cause.PROVIDER_FAILED


def test_an_operation_with_recent_progress_is_not_touched(api_client, scripted):
    review, _ = accepted_request(api_client, scripted)

    report = services.reviews_sweep()

    assert report.superseded == report.redispatched == report.escalated == []
    review.refresh_from_db()
    assert review.transitions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_overlapping_reconciles_of_one_review_supersede_it_once(api_client, scripted, settings):
    # The operation really went silent (last touched longer ago than the stuck threshold), and
    # each reconcile reads the real clock, as the sweeper does: a reconcile that starts after
    # another has committed the supersede finds a replacement operation seconds old, not silent.
    # (A fixed future `now` would have judged that fresh replacement silent too.)
    review, request = accepted_request(api_client, scripted)
    silent_for(request, settings.MODERATION_STUCK_AFTER_S + 1)

    actions = collide(4, lambda i: services.review_reconcile(review_id=review.pk))

    assert sorted(actions, key=str) == [None, None, None, "superseded"], actions
    assert ModerationRequest.objects.filter(review=review).count() == 2
    assert len(queued_tasks(DISPATCH)) == 1


def test_a_reconcile_right_after_a_supersede_leaves_the_fresh_operation_alone(api_client, scripted, settings):
    review, request = accepted_request(api_client, scripted)
    silent_for(request, settings.MODERATION_STUCK_AFTER_S + 1)

    first = services.review_reconcile(review_id=review.pk)
    again = services.review_reconcile(review_id=review.pk)

    assert (first, again) == ("superseded", None)
    replacement = ModerationRequest.objects.get(supersedes=request)
    assert [t["kwargs"]["request_id"] for t in queued_tasks(DISPATCH)] == [replacement.pk]
