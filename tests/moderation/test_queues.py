"""The human queues: which queue a review joins, its priority, "review next" per queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from audit.models import Actor
from moderation import services
from moderation.models import Cause, ContentReview, DecisionSource, ModerationPolicy, ReviewQueue, ReviewStatus
from moderation.review_queues import priority, queue_entry
from moderation.validation import validate_policy
from moderation.services.transitions import transition_review
from moderation.services.decide import decide_locked
from tests.helpers import claimed, collide, decided, result


def scored(client, score: float) -> ContentReview:
    """A review the model sent to manual_review with `score` as its top category score (harassment:
    the initial policy sends 0.33 to 0.68 to a human)."""
    review, request = claimed(client)
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(score), cause="provider_result")
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    return review


def enter(review: ContentReview, cause: Cause, *, report_count: int = 0) -> ContentReview:
    """Send a decided review to manual_review by `cause` through the one transition function, as
    the report and appeal services do (approved -> user_reports, rejected -> appeal)."""
    with transaction.atomic():
        locked = ContentReview.objects.select_for_update().get(pk=review.pk)
        transition_review(locked, cause, actor=Actor.SYSTEM, report_count=report_count)
    review.refresh_from_db()
    return review


def failed(client) -> ContentReview:
    """A review whose provider failed for good: handed to a human by the decide path."""
    review, _ = claimed(client)
    with transaction.atomic():
        locked = ContentReview.objects.select_for_update().select_related("client", "content").get(pk=review.pk)
        decide_locked(locked, cause=Cause.PROVIDER_FAILED, label=ReviewStatus.MANUAL_REVIEW,
                      source=DecisionSource.SYSTEM, actor=Actor.SYSTEM, explanation="provider failed")
    review.refresh_from_db()
    return review


@pytest.mark.django_db
class TestEnteringAQueue:
    def test_each_cause_sends_the_review_to_its_named_queue(self, api_client, django_user_model):
        mia = django_user_model.objects.create_user("mia")
        low = scored(api_client, 0.65)
        reported = enter(decided(api_client, "approved"), Cause.USER_REPORTS, report_count=3)
        appealed = enter(decided(api_client, "rejected"), Cause.APPEAL)
        broken = failed(api_client)
        review, _ = claimed(api_client)
        escalated = services.review_escalate(review_id=review.pk, reason="look", moderator=mia)

        queues = {r.pk: ContentReview.objects.get(pk=r.pk).queue for r in (low, reported, appealed, broken, escalated)}
        assert queues == {low.pk: ReviewQueue.LOW_CONFIDENCE, reported.pk: ReviewQueue.REPORTS,
                          appealed.pk: ReviewQueue.APPEALS, broken.pk: ReviewQueue.PROVIDER_FAILURES,
                          escalated.pk: ReviewQueue.ESCALATIONS}

    def test_the_priority_is_computed_from_score_reports_and_appeal_with_the_policys_weights(self, api_client):
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, priority_score_weight=50,
                                priority_report_weight=7, priority_appeal_weight=30, priority_age_points_per_hour=5)
        low = scored(api_client, 0.65)
        reported = enter(decided(api_client, "approved"), Cause.USER_REPORTS, report_count=4)
        appealed = enter(decided(api_client, "rejected"), Cause.APPEAL)

        assert low.priority == pytest.approx(50 * 0.65)
        assert reported.priority == pytest.approx(50 * 0.1 + 7 * 4)
        assert appealed.priority == pytest.approx(30)  # an appeal's own weight: not the appealed decision's score
        # The order key is the entry time moved earlier by priority / (points per hour).
        assert low.queued_at - low.queue_order_at == timedelta(hours=32.5 / 5)

    def test_leaving_manual_review_leaves_the_queue(self, api_client, django_user_model):
        review = scored(api_client, 0.6)
        services.review_override(review_id=review.pk, label="approved", reason="fine",
                                 moderator=django_user_model.objects.create_user("mia"))
        review.refresh_from_db()
        assert (review.queue, review.priority, review.queued_at, review.queue_order_at) == ("", None, None, None)

    def test_waiting_earns_priority_so_an_old_review_overtakes_a_newer_urgent_one(self):
        policy = ModerationPolicy(priority_score_weight=100, priority_report_weight=15, priority_appeal_weight=40,
                                  priority_age_points_per_hour=10)
        now = timezone.now()
        old = queue_entry(policy, cause=Cause.PROVIDER_RESULT, category_scores={"x": 0.51}, now=now - timedelta(hours=5))
        new = queue_entry(policy, cause=Cause.PROVIDER_RESULT, category_scores={"x": 0.89}, now=now)
        fresh = queue_entry(policy, cause=Cause.PROVIDER_RESULT, category_scores={"x": 0.89},
                            now=now - timedelta(hours=2))
        # 0.89 is 38 points ahead of 0.51: 3.8 hours of waiting at 10 points an hour.
        assert old.order_at < new.order_at
        assert fresh.order_at < old.order_at

    def test_priority_counts_reports_and_an_appeal(self):
        policy = ModerationPolicy(priority_score_weight=100, priority_report_weight=15, priority_appeal_weight=40,
                                  priority_age_points_per_hour=10)
        assert priority(policy, category_scores={"a": 0.2, "b": 0.6}) == 60
        assert priority(policy, category_scores={}, report_count=3) == 45
        assert priority(policy, category_scores={"a": 0.5}, appealed=True) == 40

    def test_an_appeal_of_a_moderators_rejection_ranks_with_one_of_a_confident_model_rejection(
        self, api_client, django_user_model
    ):
        by_model = decided(api_client, "rejected")  # the model's 0.95
        by_moderator = decided(api_client, "manual_review")
        services.review_override(review_id=by_moderator.pk, label="rejected", reason="a threat", category="violence",
                                 moderator=django_user_model.objects.create_user("mia"))
        appealed = [enter(review, Cause.APPEAL) for review in (by_model, by_moderator)]

        assert [r.queue for r in appealed] == [ReviewQueue.APPEALS] * 2
        assert appealed[0].priority == appealed[1].priority == ModerationPolicy.objects.get().priority_appeal_weight
        # Otherwise equal, the one that waited longer goes first: age counts, the model's score does not.
        assert appealed[0].queue_order_at < appealed[1].queue_order_at

    def test_an_appeal_ranks_by_its_authors_strike_points_and_its_age_not_the_models_score(self):
        policy = ModerationPolicy(priority_score_weight=100, priority_report_weight=15, priority_appeal_weight=40,
                                  priority_age_points_per_hour=10, priority_strike_weight=5)
        now = timezone.now()
        confident = queue_entry(policy, cause=Cause.APPEAL, category_scores={"hate": 0.99}, now=now)
        human = queue_entry(policy, cause=Cause.APPEAL, category_scores={}, now=now)
        repeat = queue_entry(policy, cause=Cause.APPEAL, category_scores={}, author_points=4, now=now)
        older = queue_entry(policy, cause=Cause.APPEAL, category_scores={}, now=now - timedelta(hours=3))

        assert confident.priority == human.priority == 40 and confident.order_at == human.order_at
        assert repeat.priority == 40 + 5 * 4 and repeat.order_at < human.order_at
        assert older.order_at < repeat.order_at  # 3 hours waited are 30 points, more than 20 strike points
        # Elsewhere the model's score still counts.
        assert queue_entry(policy, cause=Cause.PROVIDER_RESULT, category_scores={"hate": 0.6}, now=now).priority == 60

    @pytest.mark.parametrize(("fields", "error"), [
        ({"priority_age_points_per_hour": 0}, "waiting must count"),
        ({"priority_report_weight": -1}, "priority_report_weight must be a number"),
        ({"priority_score_weight": True}, "priority_score_weight must be a number"),
        ({"categories": []}, "non-empty list"),
        ({"categories": ["Hate Speech"]}, "lowercase"),
        ({"categories": ["spam", "spam"]}, "must not repeat"),
    ])
    def test_the_one_policy_validator_refuses_bad_weights_and_categories(self, db, fields, error):
        base = {"reject_threshold": 0.9, "review_threshold": 0.5, "flagged_label": "manual_review"}
        assert any(error in e for e in validate_policy({**base, **fields}))
        with pytest.raises(ValidationError):
            services.policy_publish(reject_threshold=0.9, review_threshold=0.5, **fields)


@pytest.mark.django_db
class TestReviewNext:
    def test_review_next_takes_the_highest_priority_first_not_the_oldest(self, api_client, django_user_model):
        unsure, likely = scored(api_client, 0.51), scored(api_client, 0.66)
        mia, sam = (django_user_model.objects.create_user(n) for n in ("mia", "sam"))
        assert services.review_take_next(moderator=mia) == likely
        assert services.review_take_next(moderator=sam) == unsure

    def test_review_next_takes_only_from_the_queue_the_moderator_picks(self, api_client, django_user_model):
        scored(api_client, 0.66)
        appealed = enter(decided(api_client, "rejected"), Cause.APPEAL)
        mia = django_user_model.objects.create_user("mia")
        assert services.review_take_next(moderator=mia, queue=ReviewQueue.APPEALS) == appealed
        assert services.review_take_next(moderator=mia, queue=ReviewQueue.REPORTS) is None

    def test_skipping_a_review_hands_out_the_next_one(self, api_client, django_user_model):
        first, second = scored(api_client, 0.66), scored(api_client, 0.62)
        mia = django_user_model.objects.create_user("mia")
        assert services.review_take_next(moderator=mia) == first
        services.review_release(review_id=first.pk, moderator=mia)
        assert services.review_take_next(moderator=mia, skip=[first.pk]) == second

    def test_an_unknown_queue_is_refused(self, django_user_model):
        with pytest.raises(ValueError, match="unknown queue"):
            services.review_take_next(moderator=django_user_model.objects.create_user("mia"), queue="vip")

    def test_review_next_at_scale_walks_the_queue_index(self, api_client, django_user_model):
        from django.db import connection

        scored(api_client, 0.65)
        mia = django_user_model.objects.create_user("mia")
        waiting = (ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, queue=ReviewQueue.LOW_CONFIDENCE)
                   .filter(leased_to__isnull=True).order_by("queue_order_at", "id"))
        with connection.cursor() as cursor:
            # Every other way off (a scan of another index, then a sort), so the plan says whether
            # the queue's index can serve this order, whatever the statistics earlier tests left.
            for way in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                cursor.execute(f"SET LOCAL {way} = off")
            sql, params = waiting.query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "queue_order_idx" in plan and "Sort" not in plan, plan
        assert services.review_take_next(moderator=mia, queue=ReviewQueue.LOW_CONFIDENCE) is not None


@pytest.mark.django_db(transaction=True)
class TestQueueRaces:
    def test_moderators_pressing_review_next_on_one_queue_at_once_never_share_a_review(
        self, api_client, django_user_model
    ):
        for score in (0.5, 0.6, 0.65):
            scored(api_client, score)
        enter(decided(api_client, "rejected"), Cause.APPEAL)  # another queue: never handed out here
        moderators = [django_user_model.objects.create_user(f"m{i}") for i in range(3)]
        for _ in range(3):
            ContentReview.objects.update(leased_to=None, lease_expires_at=None)
            taken = collide(3, lambda i: services.review_take_next(moderator=moderators[i],
                                                                   queue=ReviewQueue.LOW_CONFIDENCE))
            assert all(isinstance(r, ContentReview) for r in taken), taken
            assert len({r.pk for r in taken}) == 3
            holders = dict(ContentReview.objects.filter(leased_to__isnull=False).values_list("pk", "leased_to"))
            assert holders == {r.pk: m.pk for r, m in zip(taken, moderators, strict=True)}
