"""Batches (docs/design.md, "Batches"): one job claims up to MODERATION_BATCH_SIZE pending reviews
with SKIP LOCKED and a conditional update, runs the model once over them, and finalizes each under
the same conditions as one review alone. Real PostgreSQL, real threads colliding."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.db.models import F

from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation import services, tasks
from moderation.invariants import violations
from moderation.models import FINAL_STATUSES, Cause, ContentReview, ModerationRequest, ProviderAttempt, ReviewStatus
from moderation.observability.timeline import review_timeline
from moderation.services import batch, pipeline, results, transitions
from tests.helpers import collide, count_model_calls, queued_tasks, silent_for, submit, transition_unconditional

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]

# Two the local model approves, one it rejects (it sends a short "a perfectly friendly sentence"
# to a human: docs/model-card.md, failure modes).
TEXTS = ["thanks, see you on sunday", "shut up, you idiot", "thanks for the lovely dinner, see you at the party"]



def claim_ids(claim: services.Claim) -> list:
    return [request.review_id for request in claim.requests]


def two_claimers_selected_before_either_updates(monkeypatch, size: int, reviews: list) -> list:
    """Two batch claimers whose own reviews are the two newest: each waits, after choosing its
    other reviews and before moving them, until the other has chosen too (a barrier), so the
    choices really overlap in time. Returns each claimer's claim."""
    chosen = threading.Barrier(2)
    real = pipeline.transition_reviews

    def after_choosing(*args, **kwargs):
        chosen.wait(timeout=5)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "transition_reviews", after_choosing)
    own = reviews[-2:]
    return collide(2, lambda i: services.reviews_claim(
        review_id=own[i].pk, worker_id=f"w{i}", job_id=f"job-{i}", size=size))


@pytest.mark.django_db(transaction=True)
def test_two_batch_claimers_at_once_never_share_a_review_and_together_claim_all(api_client, monkeypatch):
    reviews = [submit(api_client) for _ in range(10)]

    claims = two_claimers_selected_before_either_updates(monkeypatch, 5, reviews)

    first, second = (set(claim_ids(c)) for c in claims)
    assert len(first) == len(second) == 5 and not first & second, (first, second)
    assert first | second == {r.pk for r in reviews}
    assert claim_ids(claims[0])[0] == reviews[-2].pk and claim_ids(claims[1])[0] == reviews[-1].pk  # own first
    for review in reviews:
        assert ReviewTransition.objects.filter(review=review, cause=Cause.JOB_STARTED).count() == 1
        assert ModerationRequest.objects.filter(review=review).count() == 1
    assert violations([r.pk for r in reviews]) == []


@pytest.mark.django_db(transaction=True)
def test_without_skip_locked_and_the_conditional_update_two_batches_share_reviews(api_client, monkeypatch):
    # The guards taken out: the others chosen without a lock, moved without the status check.
    monkeypatch.setattr(ContentReview.objects, "select_for_update",
                        lambda *a, **k: ContentReview.objects.all())
    monkeypatch.setattr(transitions, "_unmoved", transition_unconditional)
    reviews = [submit(api_client) for _ in range(10)]

    claims = two_claimers_selected_before_either_updates(monkeypatch, 5, reviews)

    first, second = (set(claim_ids(c)) for c in claims)
    assert first & second  # the same reviews claimed twice...
    found = violations([r.pk for r in reviews])
    assert any("not a chain" in v for v in found), found  # ...and the checker says so


@pytest.mark.django_db(transaction=True)
def test_without_the_lock_the_conditional_update_alone_still_keeps_two_batches_apart(api_client, monkeypatch):
    # The second line of defence: with the others chosen unlocked, both claimers choose the same
    # reviews; the UPDATE's `WHERE status = 'pending'` lets only the first move them: the second's
    # claim matches fewer rows than it read, raises ConcurrentTransition and rolls back whole.
    real_lock = ContentReview.objects.select_for_update

    def lock_only_the_own_review(*args, skip_locked=False, **kwargs):
        return ContentReview.objects.all() if skip_locked else real_lock(*args, **kwargs)

    monkeypatch.setattr(ContentReview.objects, "select_for_update", lock_only_the_own_review)
    reviews = [submit(api_client) for _ in range(10)]

    claims = two_claimers_selected_before_either_updates(monkeypatch, 5, reviews)

    first, second = (set(claim_ids(c)) for c in claims)
    assert not first & second, (first, second)
    assert sorted([len(first), len(second)]) == [0, 5] and "claim lost" in {c.lost for c in claims}
    assert violations([r.pk for r in reviews]) == []


def test_a_job_whose_review_another_batch_claimed_returns_at_once_and_writes_nothing(api_client, local):
    reviews = [submit(api_client) for _ in range(3)]
    winner = tasks.moderate_review(reviews[0].pk, job_id="job-winner")
    assert winner == "batch of 3: 3 finalized"
    before = (PipelineEvent.objects.count(), ReviewTransition.objects.count(), ModerationRequest.objects.count())

    late = [tasks.moderate_review(r.pk) for r in reviews[1:]]

    assert late == ["claimed by batch job-winner"] * 2
    assert (PipelineEvent.objects.count(), ReviewTransition.objects.count(), ModerationRequest.objects.count()) == before
    # The winning job delivered again (at least once) is a lost claim, recorded as before.
    assert tasks.moderate_review(reviews[0].pk, job_id="job-winner") == "claim lost"
    assert PipelineEvent.objects.filter(kind=EventKind.CLAIM_LOST).count() == 1


def test_the_model_runs_once_over_the_whole_batch(api_client, local, monkeypatch):
    calls = count_model_calls(monkeypatch)
    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(5)]

    assert tasks.moderate_review(reviews[2].pk) == "batch of 5: 5 finalized"

    assert len(calls) == 1 and sorted(calls[0]) == sorted(TEXTS[i % 3] for i in range(5))
    assert ProviderAttempt.objects.filter(outcome="result").count() == 5
    statuses = dict(ContentReview.objects.values_list("content__text", "status"))
    assert statuses[TEXTS[1]] == ReviewStatus.REJECTED and statuses[TEXTS[0]] == ReviewStatus.APPROVED
    assert violations([r.pk for r in reviews]) == []


def _shape(review) -> list:
    """The review's timeline without what differs between any two reviews (ids, times, latencies)."""
    volatile = {"latency_ms", "external_id"}
    return [(e.kind, re.sub(r"request:\d+", "request:N", e.title),
             {k: v for k, v in e.detail.items() if k not in volatile}, sorted(e.ids))
            for e in review_timeline(review)]


def test_a_batched_reviews_audit_trail_equals_a_one_by_one_reviews(api_client, local, settings):
    settings.MODERATION_BATCH_SIZE = 1
    alone = submit(api_client, text=TEXTS[1])
    assert tasks.moderate_review(alone.pk, job_id="job-a") == "finalized applied"
    settings.MODERATION_BATCH_SIZE = 16
    batched = [submit(api_client, text=TEXTS[1]) for _ in range(3)]
    assert tasks.moderate_review(batched[0].pk, job_id="job-b") == "batch of 3: 3 finalized"
    assert tasks.moderate_review(batched[2].pk) == "claimed by batch job-b"  # its own job, later: nothing written

    for review in [alone, *batched]:
        review.refresh_from_db()
    for review in batched:
        assert _shape(review) == _shape(alone)
        # The transition and history rows field by field, but for the review's own ids.
        fields = ("from_status", "to_status", "cause", "actor", "actor_id", "attempt_no", "reason")
        rows = [tuple(getattr(t, f) for f in fields) for t in review.transitions.order_by("id")]
        assert rows == [tuple(getattr(t, f) for f in fields) for t in alone.transitions.order_by("id")]
        history = ("status", "version", "worker_id", "history_type", "history_change_reason", "history_user_id",
                   "provider_request_id")
        assert list(review.history.order_by("history_id").values_list(*history)) == list(
            alone.history.order_by("history_id").values_list(*history))
        assert list(review.history.order_by("history_id").values_list("active_idempotency_key", flat=True)) == [
            None, review.active_idempotency_key, review.active_idempotency_key]
    assert violations([r.pk for r in [alone, *batched]]) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("dies", ["after_the_claim", "during_the_model_call"])
def test_a_batch_whose_worker_dies_leaves_every_review_for_the_sweeper_to_finish(api_client, local, monkeypatch,
                                                                                 settings, dies):
    from datetime import timedelta

    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(4)]

    def killed(*args, **kwargs):
        raise SystemExit("worker killed")

    # After the claim committed and before anything was recorded as sent; or with every attempt
    # recorded in flight, during the model call.
    monkeypatch.setattr(batch, "_attempts_begin" if dies == "after_the_claim" else "_call_many", killed)
    with pytest.raises(SystemExit):
        tasks.moderate_review(reviews[0].pk)
    monkeypatch.undo()

    claimed = ContentReview.objects.filter(pk__in=[r.pk for r in reviews])
    assert set(claimed.values_list("status", flat=True)) == {ReviewStatus.PROCESSING}
    assert violations([r.pk for r in reviews]) == []  # consistent, only unfinished
    in_flight = ProviderAttempt.objects.filter(outcome="in_flight")
    assert in_flight.count() == (0 if dies == "after_the_claim" else 4)
    # Time passes: the operations fall silent, and the dead worker's attempts outlive their lease.
    in_flight.update(started_at=F("started_at") - timedelta(seconds=settings.Q_TASK_TIMEOUT_S + 1))
    for request in ModerationRequest.objects.all():
        silent_for(request, settings.MODERATION_STUCK_AFTER_S + 1)

    report = services.reviews_sweep()

    assert sorted(map(str, report.redispatched)) == sorted(str(r.pk) for r in reviews)
    for task in queued_tasks("moderation.tasks.dispatch_request"):
        tasks.dispatch_request(task["kwargs"]["request_id"])
    assert set(claimed.values_list("status", flat=True)) <= set(FINAL_STATUSES)
    assert ModerationRequest.objects.count() == 4  # the same operations, with their keys
    assert in_flight.count() == 0
    assert violations([r.pk for r in reviews]) == []


def test_with_batch_size_one_a_job_claims_its_own_review_only(api_client, local, settings):
    settings.MODERATION_BATCH_SIZE = 1
    reviews = [submit(api_client) for _ in range(3)]

    assert tasks.moderate_review(reviews[1].pk) == "finalized applied"

    statuses = dict(ContentReview.objects.values_list("pk", "status"))
    assert [statuses[r.pk] for r in reviews] == [ReviewStatus.PENDING, ReviewStatus.APPROVED, ReviewStatus.PENDING]


def test_a_provider_without_moderate_many_gets_one_request_per_operation(api_client, scripted, settings):
    from tests.helpers import result

    settings.MODERATION_BATCH_SIZE = 16
    scripted.default = result(0.1)
    reviews = [submit(api_client) for _ in range(3)]

    assert tasks.moderate_review(reviews[0].pk) == "batch of 3: 3 finalized"

    keys = ModerationRequest.objects.values_list("idempotency_key", flat=True)
    assert sorted(c.idempotency_key for c in scripted.calls) == sorted(map(str, keys))
    assert violations([r.pk for r in reviews]) == []


def test_a_batch_out_of_time_hands_the_rest_to_dispatch_jobs_of_their_own(api_client, scripted, settings):
    import time

    from tests.helpers import result

    scripted.default = result(0.1)
    reviews = [submit(api_client) for _ in range(3)]
    claim = services.reviews_claim(review_id=reviews[0].pk, worker_id="w", job_id="j", size=3)

    reports = services.requests_dispatch_batch(requests=claim.requests, worker_id="w", job_id="j",
                                               deadline=time.monotonic())  # no time left for any attempt

    assert [r.action for r in reports] == ["handed_off"] * 3 and scripted.calls == []
    handed = [t["kwargs"]["request_id"] for t in queued_tasks("moderation.tasks.dispatch_request")]
    assert sorted(handed) == sorted(q.pk for q in claim.requests)
    for request_id in handed:
        tasks.dispatch_request(request_id)
    assert set(ContentReview.objects.values_list("status", flat=True)) == {ReviewStatus.APPROVED}


def test_a_review_erased_during_the_batchs_model_call_is_already_final_and_the_others_apply(api_client, local,
                                                                                             monkeypatch):
    from moderation.privacy.erasure import content_erase
    from moderation.providers import local as local_model

    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(4)]
    real = local_model.predictor

    def erase_one_meanwhile():
        predict = real()

        def call(texts):
            content_erase(review_id=reviews[2].pk, actor="api", actor_id="acme", reason="withdrawn")
            return predict(texts)
        return call

    monkeypatch.setattr(local_model, "predictor", erase_one_meanwhile)

    assert tasks.moderate_review(reviews[0].pk) == "batch of 4: 4 finalized"

    statuses = dict(ContentReview.objects.values_list("pk", "status"))
    assert statuses[reviews[2].pk] == ReviewStatus.MANUAL_REVIEW
    assert ReviewTransition.objects.filter(review=reviews[2], cause=Cause.PROVIDER_RESULT).count() == 0
    assert PipelineEvent.objects.filter(kind=EventKind.ALREADY_FINAL, review=reviews[2]).count() == 1
    assert all(statuses[r.pk] in (ReviewStatus.APPROVED, ReviewStatus.REJECTED) for r in reviews if r != reviews[2])
    assert violations([r.pk for r in reviews]) == []


@pytest.mark.django_db(transaction=True)
def test_a_batch_finalize_refused_as_a_whole_finalizes_each_result_alone(api_client, local, monkeypatch):
    from moderation.errors import IllegalTransition

    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(3)]
    real, refused = results.result_apply_locked, []

    def refuse_the_second(review, *args, **kwargs):
        if len(refused) == 0 and review.pk == sorted(r.pk for r in reviews)[1]:
            refused.append(review.pk)
            raise IllegalTransition(review_id=review.pk, from_status=review.status, cause=Cause.PROVIDER_RESULT)
        return real(review, *args, **kwargs)

    monkeypatch.setattr(results, "result_apply_locked", refuse_the_second)

    assert tasks.moderate_review(reviews[0].pk) == "batch of 3: 3 finalized"

    assert refused  # the shared transaction rolled back, then each result went through review_finalize
    for review in reviews:
        assert ReviewTransition.objects.filter(review=review, cause=Cause.PROVIDER_RESULT).count() == 1
    assert set(ContentReview.objects.values_list("status", flat=True)) <= {ReviewStatus.APPROVED, ReviewStatus.REJECTED}
    assert violations([r.pk for r in reviews]) == []


def test_behind_a_slow_provider_a_batch_hands_the_rest_to_dispatch_jobs_other_workers_run(api_client, scripted,
                                                                                         settings):
    import time

    from tests.helpers import result

    settings.PROVIDER_TIMEOUT_S = 0.2
    scripted.default, scripted.on_call = result(0.1), lambda request: time.sleep(0.3)
    reviews = [submit(api_client) for _ in range(3)]

    assert tasks.moderate_review(reviews[0].pk) == "batch of 3: 1 finalized, 2 handed_off"

    assert len(scripted.calls) == 1  # the own review's request; the others wait for no one
    assert len(queued_tasks("moderation.tasks.dispatch_request")) == 2


def test_a_batch_of_eight_costs_a_bounded_number_of_statements(api_client, local):
    from django.test.utils import CaptureQueriesContext

    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(8)]
    with CaptureQueriesContext(connection) as batched:
        tasks.moderate_review(reviews[0].pk)
    with CaptureQueriesContext(connection) as cheap:
        tasks.moderate_review(reviews[1].pk)

    # Claim (lock, others, UPDATE, supersedes, requests, history, transitions: about 8), attempts
    # (about 7), finalize (about 4 + 9 per review: decision, outbox, review, history, transition,
    # request, language, policy...): 92 when written; one review alone takes 31 for all of it.
    # 56 since the decision's writes went into one statement and the batch's detected languages
    # into one UPDATE (one per review before: seven more here), transaction control included.
    assert len(batched.captured_queries) <= 56
    assert len(cheap.captured_queries) == 1  # the job of a review the batch took: one read
