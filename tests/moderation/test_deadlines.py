"""Deadlines (docs/design.md, "Deadlines"): each queue's target in the policy, a review's due time,
the visits the figures count, and the figures per queue and week (median, p95, breaches)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from hypothesis import given, settings as hsettings, strategies as st

from moderation import services
from django.core.exceptions import ValidationError
from moderation.models import Cause, ContentReview, ModerationPolicy, ModerationQueue, QueueVisit, ReviewQueue
from moderation.observability.deadlines import open_figures, week_start, week_zone, weekly_figures
from moderation.review_queues import DeadlineState, deadline_for, deadline_state
from moderation.selectors import decision_times, decisions_between, queues_forbidden
from moderation.services.routing import review_queues
from moderation.validation import validate_deadlines
from tests.helpers import decided
from tests.moderation.test_queues import enter, scored

HOUR = timedelta(hours=1)


def visit(review, queue: str, *, anchor: datetime, left: datetime | None, due_hours: float = 24,
          decided_: bool = True) -> QueueVisit:
    """A closed visit at chosen times, for the computation's edge cases (the services write them
    at the clock's times: TestVisits)."""
    return QueueVisit.objects.create(review=review, queue=queue, cause=Cause.NOTICE, anchor_at=anchor,
                                     due_at=anchor + timedelta(hours=due_hours), left_at=left,
                                     decided=decided_ and left is not None)


class TestTargets:
    def test_a_fresh_installation_has_sensible_targets(self, db):
        policy = services.policy_active()
        assert deadline_for(policy, ReviewQueue.NOTICES) == timedelta(hours=24)
        assert deadline_for(policy, ReviewQueue.APPEALS) == timedelta(days=7)
        assert deadline_for(policy, ReviewQueue.REPORTS) == timedelta(hours=72)
        assert deadline_for(policy, ReviewQueue.LOW_CONFIDENCE) == timedelta(hours=48)  # the default
        assert deadline_for(policy, ReviewQueue.URGENT) == timedelta(minutes=policy.urgent_deadline_minutes)

    def test_an_edit_publishes_a_new_version_that_new_entries_follow(self, api_client):
        old = services.policy_active()
        services.policy_publish(reject_threshold=old.reject_threshold, review_threshold=old.review_threshold,
                                deadline_hours={"appeals": 48}, deadline_default_hours=12)
        new = services.policy_active()
        assert new.version == old.version + 1 and new.history.count() == 1  # versioned and audited
        appealed = enter(decided(api_client, "rejected"), Cause.APPEAL)
        assert appealed.due_at - appealed.queued_at == timedelta(hours=48)
        low = scored(api_client, 0.6)
        assert low.due_at - low.queued_at == timedelta(hours=12)

    @pytest.mark.parametrize(("fields", "error"), [
        ({"deadline_hours": []}, "deadline_hours must be an object"),
        ({"deadline_hours": {"appeals": 0}}, "'appeals' must be a number of hours above 0"),
        ({"deadline_hours": {"appeals": True}}, "'appeals' must be a number of hours above 0"),
        ({"deadline_hours": {"appeals": 24 * 366}}, "at most 8760"),
        ({"deadline_hours": {"nowhere": 5}}, "there is no queue 'nowhere'"),
        ({"deadline_hours": {"urgent": 1}}, "urgent_deadline_minutes"),
        ({"deadline_default_hours": 0}, "deadline_default_hours must be a whole number from 1"),
        ({"deadline_default_hours": 1.5}, "deadline_default_hours must be a whole number from 1"),
        ({"deadline_near_share": 1}, "deadline_near_share must be a number above 0 and below 1"),
        ({"deadline_near_share": 0}, "deadline_near_share must be a number above 0 and below 1"),
    ])
    def test_bad_targets_are_refused_with_what_is_wrong(self, fields, error):
        errors = validate_deadlines(fields, queues=set(ReviewQueue.values))
        assert len(errors) == 1 and error in errors[0]

    def test_publishing_bad_targets_is_refused(self, db):
        policy = services.policy_active()
        with pytest.raises(ValidationError, match="deadline_near_share"):
            services.policy_publish(reject_threshold=policy.reject_threshold, review_threshold=policy.review_threshold,
                                    deadline_near_share=2)
        assert services.policy_active().version == policy.version


class TestDeadlineState:
    anchor = datetime(2026, 3, 2, 12, tzinfo=UTC)
    due = anchor + timedelta(hours=10)

    @pytest.mark.parametrize(("now", "state"), [
        (anchor, DeadlineState.ON_TIME),
        (anchor + timedelta(hours=7, minutes=59), DeadlineState.ON_TIME),
        (anchor + timedelta(hours=8), DeadlineState.NEAR),  # the last 20% of ten hours
        (anchor + timedelta(hours=10), DeadlineState.NEAR),  # due now: not yet late
        (anchor + timedelta(hours=10, seconds=1), DeadlineState.BREACHED),
    ])
    def test_near_in_the_last_share_of_the_window_and_breached_after_it(self, now, state):
        assert deadline_state(queued_at=self.anchor, due_at=self.due, now=now, near_share=0.2) == state

    def test_without_a_due_time_nothing_is_marked(self):
        assert deadline_state(queued_at=None, due_at=None, now=self.anchor, near_share=0.2) == DeadlineState.ON_TIME


@pytest.mark.django_db
class TestVisits:
    def test_entering_a_queue_sets_the_due_time_from_the_anchor_and_opens_a_visit(self, api_client):
        appealed = enter(decided(api_client, "rejected"), Cause.APPEAL)
        (opened,) = QueueVisit.objects.filter(review=appealed)
        assert (opened.queue, opened.anchor_at, opened.due_at, opened.left_at) == (
            ReviewQueue.APPEALS, appealed.queued_at, appealed.queued_at + timedelta(days=7), None)

    def test_a_decision_closes_the_visit_and_counts_once(self, api_client, django_user_model):
        mia = django_user_model.objects.create_user("mia")
        review = scored(api_client, 0.6)
        services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia)
        review.refresh_from_db()
        assert review.due_at is None  # out of the queue
        (closed,) = QueueVisit.objects.filter(review=review)
        assert closed.decided and closed.left_at is not None
        (row,) = decision_times(decisions_between(closed.anchor_at, timezone.now() + HOUR), "queue")
        assert (row["queue"], row["decided"], row["breached"]) == (ReviewQueue.LOW_CONFIDENCE, 1, 0)

    def test_an_undone_decision_is_no_decision_and_the_redecision_counts_from_the_first_anchor(
            self, api_client, django_user_model):
        mia = django_user_model.objects.create_user("mia")
        review = scored(api_client, 0.6)
        anchor, due = review.queued_at, review.due_at
        services.review_take_next(moderator=mia)
        undone = services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia)
        review.refresh_from_db()
        services.review_undo(review_id=review.pk, decision_id=undone.pk, moderator=mia, expected_version=review.version)
        review.refresh_from_db()
        assert review.due_at == due  # the same deadline
        (reopened,) = QueueVisit.objects.filter(review=review)
        assert (reopened.anchor_at, reopened.due_at, reopened.left_at, reopened.decided) == (anchor, due, None, False)
        assert decision_times(decisions_between(anchor, timezone.now() + HOUR), "queue") == []

        services.review_override(review_id=review.pk, label="rejected", reason="no", category="insult", moderator=mia)
        (closed,) = QueueVisit.objects.filter(review=review)
        (row,) = decision_times(decisions_between(anchor, timezone.now() + HOUR), "queue")
        assert row["decided"] == 1 and row["median_s"] == pytest.approx((closed.left_at - anchor).total_seconds())

    def test_leaving_without_a_decision_is_no_decision(self, api_client, django_user_model):
        from moderation.privacy.erasure import content_erase

        sam = django_user_model.objects.create_user("sam", is_superuser=True)
        sent_back, erased = scored(api_client, 0.6), scored(api_client, 0.6)
        services.review_reprocess(review_id=sent_back.pk, actor="admin", actor_id="admin:sam", reason="again", user=sam)
        content_erase(review_id=erased.pk, actor="admin", actor_id="admin:sam", reason="the user asked")
        left = QueueVisit.objects.filter(review__in=[sent_back, erased])
        assert left.count() == 2 and all(v.left_at is not None and not v.decided for v in left)
        assert decision_times(decisions_between(timezone.now() - HOUR, timezone.now() + HOUR), "queue") == []

    def test_a_review_goes_through_a_queue_twice_and_each_stay_counts(self, api_client, django_user_model):
        mia, sam = (django_user_model.objects.create_user(name) for name in ("mia", "sam"))
        review = scored(api_client, 0.6)
        services.review_override(review_id=review.pk, label="rejected", reason="no", category="insult", moderator=mia)
        enter(review, Cause.APPEAL)
        services.review_override(review_id=review.pk, label="approved", reason="fair", moderator=sam)
        assert sorted(QueueVisit.objects.filter(review=review).values_list("queue", flat=True)) == [
            ReviewQueue.APPEALS, ReviewQueue.LOW_CONFIDENCE]
        assert not QueueVisit.objects.filter(review=review, left_at__isnull=True).exists()


@pytest.mark.django_db
class TestFiguresPerQueueAndWeek:
    now = datetime(2026, 3, 11, 12, tzinfo=UTC)  # a Wednesday

    def test_no_items_no_rows(self):
        assert weekly_figures(now=self.now, queues=review_queues()) == []
        assert decision_times(decisions_between(self.now - HOUR, self.now), "queue") == []

    def test_one_item_is_its_own_median_and_p95(self, api_client):
        review = scored(api_client, 0.6)
        visit(review, ReviewQueue.NOTICES, anchor=self.now - 5 * HOUR, left=self.now - 2 * HOUR)
        (row,) = weekly_figures(now=self.now, queues=review_queues())
        assert (row.queue, row.week, row.decided, row.median_s, row.p95_s, row.breached) == (
            ReviewQueue.NOTICES, date(2026, 3, 9), 1, 3 * 3600, 3 * 3600, 0)

    def test_median_p95_and_breaches_per_queue(self, api_client):
        review = scored(api_client, 0.6)
        for hours in range(1, 21):  # 1 to 20 hours, a 10-hour target: 10 breaches
            visit(review, ReviewQueue.APPEALS, anchor=self.now - 30 * HOUR, left=self.now - 30 * HOUR + hours * HOUR,
                  due_hours=10)
        visit(review, ReviewQueue.REPORTS, anchor=self.now - 2 * HOUR, left=self.now - HOUR, due_hours=72)
        visit(review, ReviewQueue.REPORTS, anchor=self.now - 3 * HOUR, left=self.now - HOUR, decided_=False)  # erased
        rows = {row.queue: row for row in weekly_figures(now=self.now, queues=review_queues())}
        appeals = rows[ReviewQueue.APPEALS]
        assert (appeals.decided, appeals.breached) == (20, 10)
        assert appeals.median_s == pytest.approx(10.5 * 3600)
        assert appeals.p95_s == pytest.approx((19 + 0.05) * 3600)  # percentile_cont: 19.05 of 1..20
        assert (rows[ReviewQueue.REPORTS].decided, rows[ReviewQueue.REPORTS].breached) == (1, 0)
        assert ReviewQueue.LOW_CONFIDENCE not in rows  # the review's own visit there is open: no decision yet

    def test_a_decision_exactly_at_its_due_time_is_no_breach(self, api_client):
        review = scored(api_client, 0.6)
        visit(review, ReviewQueue.NOTICES, anchor=self.now - 24 * HOUR, left=self.now, due_hours=24)
        (row,) = weekly_figures(now=self.now, queues=review_queues())
        assert row.breached == 0

    def test_weeks_start_on_monday_midnight_in_the_zone_asked(self, api_client):
        review = scored(api_client, 0.6)
        # Sunday 23:30 UTC is Monday 00:30 in Berlin (UTC+1 in March before the switch).
        sunday_night = datetime(2026, 3, 8, 23, 30, tzinfo=UTC)
        visit(review, ReviewQueue.NOTICES, anchor=sunday_night - HOUR, left=sunday_night)
        utc = weekly_figures(now=self.now, zone=ZoneInfo("UTC"), queues=review_queues())
        berlin = weekly_figures(now=self.now, zone=ZoneInfo("Europe/Berlin"), queues=review_queues())
        assert [row.week for row in utc] == [date(2026, 3, 2)]
        assert [row.week for row in berlin] == [date(2026, 3, 9)]

    def test_a_week_across_a_daylight_saving_switch_is_one_week(self, api_client):
        review = scored(api_client, 0.6)
        zone = ZoneInfo("Europe/Berlin")  # clocks go forward on Sunday 2026-03-29
        now = datetime(2026, 3, 30, 8, tzinfo=UTC)
        for moment in (datetime(2026, 3, 23, 0, 30, tzinfo=zone), datetime(2026, 3, 29, 23, 30, tzinfo=zone)):
            visit(review, ReviewQueue.NOTICES, anchor=moment - HOUR, left=moment)
        visit(review, ReviewQueue.NOTICES, anchor=now - HOUR, left=datetime(2026, 3, 30, 0, 30, tzinfo=zone))
        rows = weekly_figures(now=now, zone=zone, queues=review_queues())
        assert [(row.week, row.decided) for row in rows] == [(date(2026, 3, 30), 1), (date(2026, 3, 23), 2)]
        assert week_start(now, zone) == datetime(2026, 3, 30, tzinfo=zone)

    def test_only_the_weeks_asked_are_counted(self, api_client):
        review = scored(api_client, 0.6)
        visit(review, ReviewQueue.NOTICES, anchor=self.now - 30 * 24 * HOUR, left=self.now - 29 * 24 * HOUR)
        assert weekly_figures(now=self.now, weeks=2, queues=review_queues()) == []
        assert len(weekly_figures(now=self.now, weeks=6, queues=review_queues())) == 1
        with pytest.raises(ValueError, match="weeks is a whole number"):
            weekly_figures(now=self.now, weeks=0, queues=review_queues())

    def test_a_queue_the_viewer_may_not_open_has_no_figures(self, api_client, django_user_model):
        ModerationQueue.objects.create(slug=ReviewQueue.APPEALS).groups.add(Group.objects.create(name="appeals team"))
        mia = django_user_model.objects.create_user("mia")
        review = scored(api_client, 0.6)
        visit(review, ReviewQueue.APPEALS, anchor=self.now - 5 * HOUR, left=self.now - 2 * HOUR)
        visit(review, ReviewQueue.NOTICES, anchor=self.now - 5 * HOUR, left=self.now - 2 * HOUR)
        mine = weekly_figures(now=self.now, queues=review_queues(mia), hidden_queues=queues_forbidden(mia))
        assert [row.queue for row in mine] == [ReviewQueue.NOTICES]


@pytest.mark.django_db
class TestOpenFigures:
    def test_waiting_near_and_past_their_deadline_per_queue(self, api_client):
        now = timezone.now()
        reviews = [scored(api_client, 0.6) for _ in range(3)]
        # Due in 40 h of 48 (on time), due in 1 h of 48 (near), due 1 h ago (breached).
        for review, due_in in zip(reviews, (40, 1, -1), strict=True):
            ContentReview.objects.filter(pk=review.pk).update(queued_at=now + (due_in - 48) * HOUR,
                                                              due_at=now + due_in * HOUR)
        figures = {f.queue: f for f in open_figures(services.policy_active(), now=now, queues=review_queues())}
        low = figures[ReviewQueue.LOW_CONFIDENCE]
        assert (low.waiting, low.near, low.breached) == (3, 1, 1)
        assert (figures[ReviewQueue.NOTICES].waiting, figures[ReviewQueue.NOTICES].breached) == (0, 0)


class TestWeekZone:
    def test_the_installations_zone_by_default(self, settings):
        settings.TIME_ZONE = "UTC"
        assert week_zone(None) == ZoneInfo("UTC") and week_zone("") == ZoneInfo("UTC")

    @pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "x" * 65, "Europe/\x00Berlin", " "])
    def test_a_name_that_is_no_zone_is_refused_clearly(self, name):
        with pytest.raises(ValueError, match="time zone"):
            week_zone(name)

    @hsettings(max_examples=200, deadline=None)
    @given(st.text(max_size=80))
    def test_any_text_is_a_zone_or_a_clear_refusal(self, name):
        try:
            zone = week_zone(name)
        except ValueError as exc:
            assert "time zone" in str(exc)
        else:
            assert isinstance(zone, ZoneInfo)


def test_the_policy_model_defaults_match_the_documented_targets():
    policy = ModerationPolicy()
    assert policy.deadline_hours == {"notices": 24, "appeals": 168, "reports": 72}
    assert (policy.deadline_default_hours, policy.deadline_near_share) == (48, 0.2)
