"""One item never holds its batch (docs/design.md, "Batches"): an exception while scoring, deciding
or finalizing one review fails that review's attempt alone, to its retry path, and the job decides
the others all the same; with batches on (one job, sixteen reviews) and off (a job per review).
Real PostgreSQL; the invariant checker after each."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import ReviewTransition
from moderation import tasks
from moderation.invariants import violations
from moderation.models import (
    FINAL_STATUSES,
    AttemptOutcome,
    Cause,
    CircuitState,
    ContentReview,
    Decision,
    ModerationRequest,
    ProviderAttempt,
    ReviewStatus,
)
from moderation.providers import local as local_model
from moderation.services import circuit_get, results, reviews_sweep
from moderation.services import policy as policy_service
from tests.helpers import POISON, poison_the_rules, raise_on_poison, submit

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = ["thanks, see you on sunday", "shut up, you idiot", "a perfectly friendly sentence"]



def sixteen_with_one_poison(api_client) -> tuple[list[ContentReview], ContentReview]:
    reviews = [submit(api_client, text=TEXTS[i % 3]) for i in range(7)]
    poison = submit(api_client, text=f"a {POISON} sentence")
    reviews += [poison] + [submit(api_client, text=TEXTS[i % 3]) for i in range(8)]
    return reviews, poison


def poison_the_model(monkeypatch, poison) -> None:
    """The local model raises when any text it is given holds the poison (a vectorised call too)."""
    real = local_model.predictor

    def model():
        predict = real()
        return lambda texts: raise_on_poison(texts) or predict(texts)

    monkeypatch.setattr(local_model, "predictor", model)


def poison_language_detection(monkeypatch, poison) -> None:
    real = policy_service.detect
    monkeypatch.setattr(policy_service, "detect", lambda text: raise_on_poison(text) or real(text))


def poison_the_finalize(monkeypatch, poison) -> None:
    """The poisoned review's finalize transaction raises after it wrote its decision: nothing of
    it may stay."""
    real = results.result_apply_locked

    def apply(review, *args, **kwargs):
        real(review, *args, **kwargs)
        if review.pk == poison.pk:
            raise RuntimeError(f"{POISON} finalize")

    monkeypatch.setattr(results, "result_apply_locked", apply)


POISONS = {
    "model": poison_the_model,
    "rules": lambda monkeypatch, poison: poison_the_rules(monkeypatch),
    "language": poison_language_detection,
    "finalize": poison_the_finalize,
}


def run_jobs(reviews: list[ContentReview], size: int) -> list[str]:
    """With batches on, the first review's job (it takes all sixteen); off, every review's job."""
    return [tasks.moderate_review(review.pk) for review in (reviews[:1] if size > 1 else reviews)]


def assert_on_its_retry_path(poison: ContentReview, *, attempts: int = 1) -> ModerationRequest:
    """Processing, nothing of a decision written, its last attempt failed with the error and its
    next one scheduled."""
    poison.refresh_from_db()
    assert poison.status == ReviewStatus.PROCESSING
    request = ModerationRequest.objects.get(review=poison)
    assert request.next_attempt_at is not None and request.attempt_no == attempts
    last = request.attempts.get(attempt_no=attempts)
    assert last.outcome == AttemptOutcome.ITEM_ERROR and f"RuntimeError: {POISON}" in last.error, last.error
    assert f"RuntimeError: {POISON}" in request.last_error
    assert not Decision.objects.filter(review=poison).exists()
    assert list(poison.transitions.values_list("cause", flat=True)) == [Cause.JOB_STARTED]
    return request


@pytest.mark.parametrize("size", [16, 1], ids=["batch", "alone"])
@pytest.mark.parametrize("where", POISONS)
def test_one_poisoned_review_fails_alone_and_the_same_job_decides_the_others(api_client, local, monkeypatch,
                                                                             settings, where, size):
    settings.MODERATION_BATCH_SIZE = size
    reviews, poison = sixteen_with_one_poison(api_client)
    POISONS[where](monkeypatch, poison)

    answers = run_jobs(reviews, size)

    if size > 1:
        assert answers == ["batch of 16: 15 finalized, 1 retry_scheduled"]
    else:
        assert [a.split()[0] for a in answers] == ["finalized"] * 7 + ["retry_scheduled"] + ["finalized"] * 8
    statuses = dict(ContentReview.objects.values_list("pk", "status"))
    assert all(statuses[r.pk] in FINAL_STATUSES for r in reviews if r != poison), statuses
    assert_on_its_retry_path(poison)
    assert violations([r.pk for r in reviews]) == []


def test_a_review_that_keeps_failing_is_retried_to_its_budget_then_handed_to_a_human(api_client, local,
                                                                                      monkeypatch, settings):
    # A failure of one item says nothing of the provider: even a hair-trigger circuit stays closed.
    settings.BREAKER_MIN_CALLS, settings.BREAKER_FAILURE_RATIO = 1, 0.01
    reviews, poison = sixteen_with_one_poison(api_client)
    poison_the_rules(monkeypatch)
    assert run_jobs(reviews, 16) == ["batch of 16: 15 finalized, 1 retry_scheduled"]

    for attempt_no in range(2, settings.MODERATION_MAX_ATTEMPTS + 1):
        request = assert_on_its_retry_path(poison, attempts=attempt_no - 1)
        ModerationRequest.objects.filter(pk=request.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        assert reviews_sweep().retries_enqueued == [request.pk]  # the retry, as the sweeper finds it due
        tasks.dispatch_request(request.pk)

    poison.refresh_from_db()
    assert poison.status == ReviewStatus.MANUAL_REVIEW
    last = ReviewTransition.objects.filter(review=poison).latest("id")
    assert last.cause == Cause.PROVIDER_FAILED and f"RuntimeError: {POISON}" in last.reason, last.reason
    outcomes = ProviderAttempt.objects.filter(request__review=poison).values_list("outcome", flat=True)
    assert list(outcomes) == [AttemptOutcome.ITEM_ERROR] * settings.MODERATION_MAX_ATTEMPTS
    assert circuit_get("local").state == CircuitState.CLOSED
    assert violations([r.pk for r in reviews]) == []


def test_a_model_that_cannot_run_at_all_fails_the_whole_batch_to_its_retries(api_client, local, monkeypatch):
    # Not one item's fault: every attempt ends as the provider's error, and the breaker hears it.
    reviews, _ = sixteen_with_one_poison(api_client)

    def missing():
        raise OSError("model file missing")

    monkeypatch.setattr(local_model, "predictor", missing)

    assert run_jobs(reviews, 16) == ["batch of 16: 16 retry_scheduled"]

    assert set(ProviderAttempt.objects.values_list("outcome", flat=True)) == {AttemptOutcome.ERROR}
    assert ModerationRequest.objects.filter(next_attempt_at__isnull=False).count() == 16
    assert violations([r.pk for r in reviews]) == []
