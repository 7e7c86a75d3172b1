"""Undo of a moderator's decision (moderation/services/moderator.py, review_undo): everything the
decision wrote is taken back while nothing of it has left, and refused with its reason once
something has; the race against the notification sender has exactly one winner."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from moderation import services
from moderation.errors import ContentErased, NotUndoable, StaleVersion
from moderation.privacy.erasure import content_erase
from moderation.invariants import pipeline_violations, review_violations
from moderation.observability import workplace
from moderation.models import (
    Cause,
    ContentReview,
    Decision,
    DecisionNotification,
    NotificationStatus,
    ReviewQueue,
    ReviewStatus,
    Strike,
    StrikeEnd,
    TransparencyStatement,
)
from tests.helpers import claimed, collide, reads_wait_for_each_other, result, staff_browser

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


@pytest.fixture
def receiver(webhook_receiver):
    return webhook_receiver


@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator").user


@pytest.fixture
def max_(django_user_model):
    return staff_browser(django_user_model, "max", "moderator").user


def unsure(api_client, *, author_id: str | None = None) -> ContentReview:
    """A review the model sent to a human (manual_review, low-confidence queue)."""
    review, _ = services.review_submit(client=api_client, external_id=uuid.uuid4().hex, kind="text",
                                       text="you are an idiot", author_id=author_id)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    assert services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.6),
                                    cause="provider_result") == "applied"
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    return review


def reject(review: ContentReview, moderator):
    return services.review_override(review_id=review.pk, label=ReviewStatus.REJECTED, category="harassment",
                                    reason="insults another user", moderator=moderator,
                                    expected_version=review.version)


def undo(review_id, decision, moderator, version=None):
    if version is None:
        version = ContentReview.objects.get(pk=review_id).version
    return services.review_undo(review_id=review_id, decision_id=decision.pk, moderator=moderator,
                                expected_version=version)


def test_an_undone_rejection_restores_the_review_and_nothing_leaves(api_client, receiver, mia):
    review = unsure(api_client)
    before = review.decision_id
    decision = reject(review, mia)
    assert TransparencyStatement.objects.filter(decision=decision).exists()

    undone = undo(review.pk, decision, mia)

    review.refresh_from_db()
    assert (review.status, review.decision_id, review.queue) == (ReviewStatus.MANUAL_REVIEW, before,
                                                                  ReviewQueue.LOW_CONFIDENCE)
    assert review.leased_to == mia and review.lease_expires_at > timezone.now() and undone.leased_to == mia
    notification = DecisionNotification.objects.get(decision=decision)
    assert notification.status == NotificationStatus.CANCELLED
    assert not TransparencyStatement.objects.filter(decision=decision).exists()
    last = review.transitions.order_by("-id").first()
    assert (last.cause, last.from_status, last.to_status, last.actor_id) == (Cause.UNDO, "rejected", "manual_review", "mia")
    assert "undid the decision rejected (harassment)" in last.reason
    assert review.history.first().history_user == mia  # audited in the history too
    assert review_violations([review.pk]) == [] and pipeline_violations([review.pk]) == []
    # The sender finds it cancelled and posts nothing.
    assert services.notification_deliver(notification_id=notification.pk) == "already cancelled"
    assert receiver.received == []
    # And the moderator decides again, as if the first decision had not been made.
    again = services.review_override(review_id=review.pk, label=ReviewStatus.APPROVED, reason="a quote",
                                     moderator=mia, expected_version=review.version)
    assert again.label == ReviewStatus.APPROVED


def test_an_undone_decision_counts_in_no_figure(api_client, mia, client):
    """Issue 49: the index's decisions per moderator and /metrics' decision counter count only the
    decisions that stand (Decision.objects.standing): the undone rejection is in neither."""
    review = unsure(api_client)
    undo(review.pk, reject(review, mia), mia)
    services.review_override(review_id=review.pk, label=ReviewStatus.APPROVED, reason="a quote", moderator=mia,
                             expected_version=ContentReview.objects.get(pk=review.pk).version)

    assert [(row["moderator__username"], row["decisions"]) for row in workplace.decisions_per_moderator()] == [("mia", 1)]
    assert workplace.moderator_decision_totals() == [("mia", "approved", 1)]
    # The review left its queue once: the undone rejection's exit is not a time in queue.
    assert [(t.queue, t.left) for t in workplace.time_in_review_queue()] == [("low_confidence", 1)]
    client.force_login(mia)
    mia.is_superuser = True
    mia.save(update_fields=["is_superuser"])
    metrics = client.get("/metrics").content.decode()
    counted = [line for line in metrics.splitlines() if line.startswith("moderation_moderator_decisions_total{")]
    assert counted == ['moderation_moderator_decisions_total{label="approved",moderator="mia"} 1.0'], counted
    undone = Decision.objects.filter(review=review, label=ReviewStatus.REJECTED)
    assert undone.count() == 1 and not undone.standing().exists()  # the row stays (invariant 9)


def test_an_undo_after_the_notification_left_is_refused_with_the_time(api_client, receiver, mia):
    review = unsure(api_client)
    decision = reject(review, mia)
    notification = DecisionNotification.objects.get(decision=decision)
    assert services.notification_deliver(notification_id=notification.pk) == "delivered"
    notification.refresh_from_db()

    with pytest.raises(NotUndoable) as refused:
        undo(review.pk, decision, mia)

    assert refused.value.reason == f"the client was already notified at {notification.delivered_at:%H:%M} UTC"
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED and review.decision_id == decision.pk
    assert TransparencyStatement.objects.filter(decision=decision).exists()  # nothing was half-undone


def test_an_undo_while_an_attempt_is_in_flight_is_refused(api_client, receiver, mia):
    from moderation.services.notifications import delivery_begin

    review = unsure(api_client)
    decision = reject(review, mia)
    delivery_begin(DecisionNotification.objects.get(decision=decision).pk, timezone.now())  # the sender is posting

    with pytest.raises(NotUndoable, match="the client was already notified at"):
        undo(review.pk, decision, mia)
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.REJECTED


def test_only_the_moderator_who_decided_may_undo_and_only_the_decision_in_force(api_client, mia, max_):
    review = unsure(api_client)
    decision = reject(review, mia)

    with pytest.raises(NotUndoable, match="only the moderator who made a decision may undo it"):
        undo(review.pk, decision, max_)
    undo(review.pk, decision, mia)
    with pytest.raises(NotUndoable, match="no longer the decision in force"):
        undo(review.pk, decision, mia)


def test_an_undo_from_a_page_older_than_the_review_is_stale(api_client, mia):
    review = unsure(api_client)
    decision = reject(review, mia)
    left = ContentReview.objects.get(pk=review.pk).version
    services.review_reprocess(review_id=review.pk, actor="admin", actor_id="sam", reason="new model", user=None)

    with pytest.raises(StaleVersion):
        undo(review.pk, decision, mia, version=left)


def test_a_decision_made_on_a_decided_review_is_not_undone(api_client, mia):
    review, request = claimed(api_client)
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    review.refresh_from_db()
    decision = reject(review, mia)  # approved -> rejected: there was no human wait to go back to

    with pytest.raises(NotUndoable, match="was approved, not waiting for a human"):
        undo(review.pk, decision, mia)


def test_an_undone_rejection_takes_back_the_authors_strike(api_client, mia):
    review = unsure(api_client, author_id="author-1")
    decision = reject(review, mia)
    strike = Strike.objects.get(decision=decision)
    assert review.author.__class__.objects.get(pk=review.author_id).strike_points == strike.points > 0

    undo(review.pk, decision, mia)

    strike.refresh_from_db()
    assert strike.end == StrikeEnd.UNDONE and strike.ended_at is not None
    assert review.author.__class__.objects.get(pk=review.author_id).strike_points == 0


# A rule that reads what only the one computation of a queue entry reads: the author's standing and
# the cause of the entry (an undo's own transition is not a provider's result).
REPEAT_RULE = {"name": "Authors in good standing", "queue": "good-authors",
               "when": {"author_standing": ["good"], "cause": ["provider_result"]}}


@pytest.mark.parametrize("recorded", [True, False], ids=["queue recorded", "no queue recorded"])
def test_an_undone_review_is_back_in_the_queue_and_priority_the_one_computation_gives(api_client, mia, recorded):
    """Its author's strike points count in its priority and its author's standing in its routing,
    as when it entered; a review that kept no record of its queue (decided before `last_queue`
    was) is routed by the cause that sent it there, not by the undo's."""
    services.review_queue_save(queue_id=None, slug="good-authors", name="Good authors")
    services.policy_publish_change(lambda active: {"routing_rules": [REPEAT_RULE]})
    reject(unsure(api_client, author_id="repeat"), mia)  # one strike point, kept
    review = unsure(api_client, author_id="repeat")
    entered = (review.queue, review.priority, review.queued_at, review.queue_order_at)
    assert entered[:2] == ("good-authors", 65.0)  # the rule's queue; 100 x 0.6 for the score, 5 for the point
    decision = reject(review, mia)
    if not recorded:
        ContentReview.objects.filter(pk=review.pk).update(last_queue="")

    undo(review.pk, decision, mia)

    review.refresh_from_db()
    assert (review.queue, review.last_queue, review.priority) == ("good-authors", "good-authors", 65.0)
    # In its place: entered when its entry's transition was written (a moment after it was queued),
    # moved ahead by the same priority.
    *_, queued_at, order_at = entered
    assert abs(review.queued_at - queued_at) < timedelta(seconds=1)
    assert review.queued_at - review.queue_order_at == queued_at - order_at


def test_a_decision_that_resolved_reports_is_not_undone(api_client, mia):
    review, request = claimed(api_client)
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    for i in range(3):
        services.report_file(review_id=review.pk, reporter_id=f"user-{i}", reason="harassment")
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    decision = reject(review, mia)

    with pytest.raises(NotUndoable, match="it resolved 3 reports, whose reporters are told"):
        undo(review.pk, decision, mia)
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.REJECTED


def test_an_erased_review_is_neither_decided_nor_escalated(api_client, mia):
    review = unsure(api_client)
    content_erase(review_id=review.pk, actor="admin", actor_id="sam", reason="GDPR request 17")
    review.refresh_from_db()

    with pytest.raises(ContentErased):
        reject(review, mia)
    pending, _ = services.review_submit(client=api_client, external_id="e2", kind="text", text="hello")
    content_erase(review_id=pending.pk, actor="admin", actor_id="sam", reason="GDPR request 18")
    pending.refresh_from_db()
    with pytest.raises(ContentErased):
        services.review_escalate(review_id=pending.pk, reason="look", moderator=mia)


def test_escalating_keeps_the_review_with_the_moderator_unless_they_release_it(api_client, mia):
    kept, _ = claimed(api_client)
    released, _ = claimed(api_client)

    services.review_escalate(review_id=kept.pk, reason="looks like a threat", moderator=mia, release=False)
    services.review_escalate(review_id=released.pk, reason="looks like a threat", moderator=mia, release=True)

    kept.refresh_from_db()
    released.refresh_from_db()
    assert (kept.status, kept.queue, kept.leased_to) == (ReviewStatus.MANUAL_REVIEW, ReviewQueue.ESCALATIONS, mia)
    assert kept.lease_expires_at > timezone.now() + timedelta(seconds=60)
    assert (released.status, released.leased_to) == (ReviewStatus.MANUAL_REVIEW, None)
    # "Review next" gives the escalating moderator the one they kept.
    assert services.review_take_next(moderator=mia).pk == kept.pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(4))
def test_undo_against_the_sender_has_exactly_one_winner(api_client, receiver, mia, monkeypatch, round_):
    """Both read the notification row before either acts (a barrier in from_db), then race. The
    row lock decides: the sender commits its attempt first and the undo is refused, or the undo
    holds the row, the sender skips it, and nothing is posted. Without the lock in
    notification_cancel_locked both win: the client is told of a decision that was undone."""
    review = unsure(api_client)
    decision = reject(review, mia)
    notification = DecisionNotification.objects.get(decision=decision)
    version = ContentReview.objects.get(pk=review.pk).version
    reads_wait_for_each_other(monkeypatch, DecisionNotification, 2)

    def run(i):
        if i == 0:
            return services.notification_deliver(notification_id=notification.pk)
        return services.review_undo(review_id=review.pk, decision_id=decision.pk, moderator=mia,
                                    expected_version=version)

    sent, undone = collide(2, run, expect=NotUndoable)

    review.refresh_from_db()
    if isinstance(undone, NotUndoable):  # the sender won: the client knows, the decision stands
        assert sent == "delivered" and len(receiver.received) == 1
        assert "the client was already notified at" in undone.reason
        assert review.status == ReviewStatus.REJECTED
    else:  # the undo won: nothing left, and nothing will
        assert receiver.received == [], "the client was told of a decision that was undone"
        assert sent in ("busy", "already cancelled")
        assert review.status == ReviewStatus.MANUAL_REVIEW
        assert DecisionNotification.objects.get(pk=notification.pk).status == NotificationStatus.CANCELLED
