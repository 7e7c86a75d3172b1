"""Bulk jobs against the single decisions and the reprocessing that run beside them, on real
PostgreSQL with threads (moderation/services/bulk.py). The guard is the version each review had
when the job was confirmed, checked under the review's row lock: remove it (`_act` passing no
`expected_version`) and the job decides again what another moderator or the model just decided,
and these tests fail."""

from __future__ import annotations

import threading
import time

import pytest

from audit.models import Actor, ReviewTransition
from moderation import services
from moderation.errors import StaleVersion
from moderation.models import BulkItemOutcome, ContentReview, Decision, DecisionSource
from moderation.services import bulk
from tests.helpers import SCORE_FOR, collide, decided, result, staff_browser
from tests.moderation.test_author_races import queued_behind

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "supervisor").user


@pytest.fixture
def sam(django_user_model):
    return staff_browser(django_user_model, "sam", "moderator").user


def approving_all(reviews, moderator):
    job = services.bulk_job_draft(reviews=ContentReview.objects.filter(pk__in=[r.pk for r in reviews]),
                                  moderator=moderator, action="override", label="approved", reason="a false alarm")
    services.bulk_job_start(job_id=job.pk, moderator=moderator)
    return job


def run_to_the_end(job) -> str:
    return services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 120)


def moderator_decisions(review) -> int:
    return Decision.objects.filter(review=review, source=DecisionSource.MODERATOR).count()


def item_of(job, review):
    return job.items.get(review=review)


def test_a_moderator_deciding_while_the_job_waits_for_the_review_wins_and_the_job_skips_it(api_client, mia, sam):
    review = decided(api_client, "manual_review")
    job = approving_all([review], mia)
    decided_first = threading.Event()

    def moderator():
        from django.db import transaction

        with transaction.atomic():  # sam's decision holds the row lock until the job queues behind it
            services.review_override(review_id=review.pk, label="rejected", category="spam", reason="spam",
                                     moderator=sam, expected_version=review.version)
            decided_first.set()
            queued_behind()

    def the_job():
        assert decided_first.wait(10)
        return run_to_the_end(job)

    collide(2, lambda i: (moderator, the_job)[i]())

    review.refresh_from_db()
    assert review.status == "rejected" and moderator_decisions(review) == 1
    assert review.decision.moderator == sam
    item = item_of(job, review)
    assert item.outcome == BulkItemOutcome.SKIPPED
    decided_at = review.transitions.order_by("-id").first().created_at
    assert item.reason == f"it changed since you opened it: rejected by moderator sam at {decided_at:%H:%M} UTC"


def test_a_moderator_deciding_while_the_job_holds_the_review_is_refused_as_stale(api_client, mia, sam, monkeypatch):
    review = decided(api_client, "manual_review")
    job = approving_all([review], mia)
    holds = threading.Event()
    real = bulk.review_override

    def deciding_then_waiting(**kwargs):
        decision = real(**kwargs)
        holds.set()
        queued_behind()  # the job's transaction stays open until the moderator waits behind it
        return decision

    monkeypatch.setattr(bulk, "review_override", deciding_then_waiting)

    def moderator():
        assert holds.wait(10)
        return services.review_override(review_id=review.pk, label="rejected", category="spam", reason="spam",
                                        moderator=sam, expected_version=review.version)

    answers = collide(2, lambda i: (run_to_the_end, lambda _: moderator())[i](job), expect=StaleVersion)

    assert isinstance(answers[1], StaleVersion)
    review.refresh_from_db()
    assert review.status == "approved" and moderator_decisions(review) == 1
    assert item_of(job, review).outcome == BulkItemOutcome.DONE


def test_moderators_deciding_reviews_while_a_job_runs_over_them_each_review_is_decided_once(api_client, mia, sam):
    reviews = [decided(api_client, "manual_review") for _ in range(40)]
    job = approving_all(reviews, mia)
    contested = reviews[::4]  # from the job's first reviews (a real collision) to its last (decided first)
    won: list = []

    def moderator():
        for review in reversed(contested):
            try:
                services.review_override(review_id=review.pk, label="rejected", category="spam", reason="spam",
                                         moderator=sam, expected_version=review.version)
                won.append(review.pk)
            except StaleVersion:
                pass  # the job decided it first: sam is told, nothing applied

    collide(2, lambda i: (lambda: run_to_the_end(job), moderator)[i]())

    assert won, "the moderator won no review: the test proved nothing"
    for review in reviews:
        assert moderator_decisions(review) == 1, review.pk
    skipped = set(job.items.filter(outcome=BulkItemOutcome.SKIPPED).values_list("review_id", flat=True))
    assert skipped == set(won)
    assert set(ContentReview.objects.filter(pk__in=won).values_list("status", flat=True)) == {"rejected"}
    assert job.items.filter(outcome=BulkItemOutcome.DONE).count() == len(reviews) - len(won)


def test_reviews_reprocessed_while_a_job_runs_over_them_are_skipped_not_decided_over_the_new_verdict(
    api_client, mia, sam, monkeypatch
):
    reviews = [decided(api_client, "manual_review") for _ in range(30)]
    job = approving_all(reviews, mia)
    early, late = reviews[:3], reviews[-6:]  # collide with the job; reprocessed long before it gets there
    reprocessed: list = []
    all_reprocessed = threading.Event()
    real_act = bulk._act

    def act(job, item):
        if item.position == len(reviews) - len(late):
            assert all_reprocessed.wait(20)  # the late ones are re-decided by the model by now
        return real_act(job, item)

    monkeypatch.setattr(bulk, "_act", act)

    def reprocessing():
        try:
            for review in [*early, *late]:
                try:
                    services.review_reprocess(review_id=review.pk, actor=Actor.ADMIN, actor_id="admin:sam",
                                              reason="new model", user=sam, expected_version=review.version)
                except StaleVersion:
                    continue  # the job approved it first
                request = services.review_claim(review_id=review.pk, worker_id="worker-9")
                services.review_finalize(idempotency_key=request.idempotency_key, cause="provider_result",
                                         result=result(SCORE_FOR["manual_review"]))
                reprocessed.append(review.pk)
        finally:
            all_reprocessed.set()

    collide(2, lambda i: (lambda: run_to_the_end(job), reprocessing)[i]())

    assert set(pk for pk in reprocessed if pk in {r.pk for r in late}) == {r.pk for r in late}
    for pk in reprocessed:
        item = job.items.get(review_id=pk)
        overrides = ReviewTransition.objects.filter(review_id=pk, cause="manual_override").values_list("id", flat=True)
        reprocess = ReviewTransition.objects.filter(review_id=pk, cause="reprocess").values_list("id", flat=True)
        # Never decided by the job after the model's new verdict.
        assert all(o < min(reprocess) for o in overrides), pk
        assert item.outcome == BulkItemOutcome.SKIPPED or list(overrides), pk
        if item.outcome == BulkItemOutcome.SKIPPED:
            assert item.reason.startswith("it changed since you opened it: ") or item.reason == "not decided yet"
    for review in late:
        review.refresh_from_db()
        assert review.status == "manual_review" and moderator_decisions(review) == 0


def test_two_workers_on_one_job_decide_each_review_once(api_client, mia):
    reviews = [decided(api_client, "manual_review") for _ in range(30)]
    job = approving_all(reviews, mia)

    answers = collide(2, lambda i: run_to_the_end(job))

    assert sorted(a.split(":")[0] for a in answers) in (["done", "the rest is being done by another worker"],
                                                        ["done", "done"])
    assert [moderator_decisions(r) for r in reviews] == [1] * len(reviews)
    assert job.items.filter(outcome=BulkItemOutcome.DONE).count() == len(reviews)
