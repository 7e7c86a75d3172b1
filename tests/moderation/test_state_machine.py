"""The review state machine, checked against docs/design.md's table over every (from, cause, to)."""

from __future__ import annotations

import itertools

import pytest
from django.db import transaction

from audit.models import EventKind, PipelineEvent, ReviewTransition
from moderation import services
from moderation.errors import IllegalTransition, NotApplicable
from moderation.models import Cause, ContentReview, ReviewStatus
from moderation.services.transitions import transition_review
from tests.helpers import claimed, decided, submit

S = ReviewStatus
FINAL = (S.APPROVED, S.REJECTED, S.MANUAL_REVIEW)

# docs/design.md "State machine", transcribed independently of the model's decorators.
LEGAL = {
    (S.PENDING, S.PROCESSING, Cause.JOB_STARTED),
    (S.PROCESSING, S.PROCESSING, Cause.RETRY_RECONCILE),
    *((S.PROCESSING, to, cause) for to in FINAL for cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK)),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.PROVIDER_FAILED),
    # A moderator's escalation of a review still in the provider's hands.
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.MANUAL_ESCALATION),
    *((src, to, Cause.MANUAL_OVERRIDE) for src in FINAL for to in (S.APPROVED, S.REJECTED)),
    *((src, S.PENDING, Cause.REPROCESS) for src in FINAL),
    (S.APPROVED, S.MANUAL_REVIEW, Cause.USER_REPORTS),
    (S.APPROVED, S.MANUAL_REVIEW, Cause.NOTICE),
    (S.REJECTED, S.MANUAL_REVIEW, Cause.APPEAL),
    # The content was erased before a decision: nothing is left to moderate.
    (S.PENDING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    # ... or while an appeal of its rejection waited for a human: the rejection stands.
    (S.MANUAL_REVIEW, S.REJECTED, Cause.CONTENT_ERASED),
    # A moderator took back their own decision before anything of it left (review_undo).
    (S.APPROVED, S.MANUAL_REVIEW, Cause.UNDO),
    (S.REJECTED, S.MANUAL_REVIEW, Cause.UNDO),
}
LABELLED = {Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK, Cause.MANUAL_OVERRIDE}
FIXED_TARGET = {
    Cause.JOB_STARTED: S.PROCESSING,
    Cause.RETRY_RECONCILE: S.PROCESSING,
    Cause.PROVIDER_FAILED: S.MANUAL_REVIEW,
    Cause.MANUAL_ESCALATION: S.MANUAL_REVIEW,
    Cause.REPROCESS: S.PENDING,
    Cause.USER_REPORTS: S.MANUAL_REVIEW,
    Cause.NOTICE: S.MANUAL_REVIEW,
    Cause.APPEAL: S.MANUAL_REVIEW,
    Cause.CONTENT_ERASED: S.MANUAL_REVIEW,
    Cause.UNDO: S.MANUAL_REVIEW,
}


def fixed_target(cause: Cause, src: str) -> str:
    """The one status a cause without a label leads to from `src`."""
    if cause == Cause.CONTENT_ERASED and src == S.MANUAL_REVIEW:
        return S.REJECTED
    return FIXED_TARGET[cause]


def review_in(status, client) -> ContentReview:
    if status == S.PENDING:
        return submit(client)
    if status == S.PROCESSING:
        return claimed(client)[0]
    return decided(client, status)


def attempt(review: ContentReview, cause: Cause, to: str) -> None:
    """Ask for `from -> to` through the one transition helper, as services do."""
    with transaction.atomic():
        locked = ContentReview.objects.select_for_update().get(pk=review.pk)
        if cause in LABELLED:
            transition_review(locked, cause, label=to, actor="system")
        elif fixed_target(cause, locked.status) == to:
            transition_review(locked, cause, actor="system")
        else:
            # This cause cannot even name that target: the model offers no such transition.
            raise IllegalTransition(review_id=review.pk, from_status=locked.status, cause=cause)


CASES = [
    (src, to, cause)
    for src, to, cause in itertools.product(S.values, S.values, Cause.values)
    if cause in LABELLED or fixed_target(cause, src) == to
]


def test_the_table_covers_every_legal_transition_of_the_design():
    assert LEGAL <= set(CASES)
    assert len(CASES) == 5 * 5 * len(LABELLED) + 5 * len(FIXED_TARGET)


@pytest.mark.django_db
@pytest.mark.parametrize(("src", "to", "cause"), CASES)
def test_transition_is_allowed_exactly_when_the_design_allows_it(api_client, src, to, cause):
    review = review_in(src, api_client)
    before = ContentReview.objects.get(pk=review.pk)
    log_before = list(ReviewTransition.objects.filter(review=review).values_list("id", flat=True))

    if (src, to, cause) in LEGAL:
        attempt(review, cause, to)
        after = ContentReview.objects.get(pk=review.pk)
        assert after.status == to
        assert after.version == before.version + 1
        new_rows = ReviewTransition.objects.filter(review=review).exclude(id__in=log_before)
        assert list(new_rows.values_list("from_status", "to_status", "cause")) == [(src, to, cause)]
    else:
        with pytest.raises(IllegalTransition):
            attempt(review, cause, to)
        after = ContentReview.objects.get(pk=review.pk)
        assert (after.status, after.version, after.updated_at) == (before.status, before.version, before.updated_at)
        assert list(ReviewTransition.objects.filter(review=review).values_list("id", flat=True)) == log_before


@pytest.mark.django_db
def test_status_cannot_be_assigned_directly(api_client):
    review = submit(api_client)
    with pytest.raises(AttributeError, match="Direct status modification is not allowed"):
        review.status = S.APPROVED


@pytest.mark.django_db
def test_an_illegal_service_call_is_counted_and_changes_nothing(api_client, django_user_model):
    moderator = django_user_model.objects.create(username="mod")
    review = decided(api_client, S.APPROVED)
    transitions = review.transitions.count()

    with pytest.raises(IllegalTransition):
        services.review_supersede(review_id=review.pk, reason="silent")

    review.refresh_from_db()
    assert review.status == S.APPROVED
    assert review.transitions.count() == transitions
    event = PipelineEvent.objects.get(kind=EventKind.ILLEGAL_TRANSITION)
    assert event.review_id == review.pk
    assert event.detail["cause"] == Cause.RETRY_RECONCILE
    assert event.detail["from_status"] == S.APPROVED
    # A moderator's action that does not apply is refused before the state machine: not counted.
    working, _ = claimed(api_client)
    with pytest.raises(NotApplicable):
        services.review_override(review_id=working.pk, label=S.APPROVED, reason="looks fine", moderator=moderator)
    assert PipelineEvent.objects.filter(kind=EventKind.ILLEGAL_TRANSITION).count() == 1


@pytest.mark.django_db
def test_every_transition_writes_history_with_its_cause(api_client):
    review = decided(api_client, S.REJECTED)
    reasons = list(review.history.order_by("history_id").values_list("status", "history_change_reason"))
    assert reasons == [
        (S.PENDING, None),
        (S.PROCESSING, Cause.JOB_STARTED),
        (S.REJECTED, Cause.PROVIDER_RESULT),
    ]


def test_the_invariant_checker_uses_the_same_table():
    from moderation import invariants

    assert invariants.LEGAL == LEGAL
