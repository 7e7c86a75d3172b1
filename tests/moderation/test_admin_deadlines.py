"""Deadlines in the admin (docs/workplace.md, "Deadlines"): due times on the queue page and the
review list, the order by due time (index-backed), and the deadline page's access."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from moderation.models import ContentReview, ModerationQueue, QueueVisit, ReviewQueue, ReviewStatus
from tests.helpers import staff_browser
from tests.moderation.test_queues import scored

QUEUES = reverse("admin:moderation_contentreview_queues")
DEADLINES = reverse("admin:moderation_contentreview_deadlines")


def due_in(review: ContentReview, hours: float, *, window: float = 48) -> ContentReview:
    """Move a waiting review's anchor and due time so that it is due in `hours` (negative: past)."""
    now = timezone.now()
    ContentReview.objects.filter(pk=review.pk).update(queued_at=now + timedelta(hours=hours - window),
                                                      due_at=now + timedelta(hours=hours))
    review.refresh_from_db()
    return review


@pytest.mark.django_db
class TestQueuePage:
    def test_each_item_shows_its_due_time_in_words_and_the_near_and_past_ones_say_so(self, api_client, django_user_model):
        on_time, near, late = (due_in(scored(api_client, 0.6), hours) for hours in (30, 2, -3))
        page = staff_browser(django_user_model, "mia", "moderator").get(QUEUES + "?queue=low_confidence").content.decode()
        assert f'id="due-{on_time.short_id}" data-state="on_time">due ' in page
        assert f'id="due-{near.short_id}" data-state="near">Near its deadline: due ' in page
        assert f'id="due-{late.short_id}" data-state="breached">Past its deadline: was due ' in page
        assert "3\xa0hours ago" in page

    def test_the_queue_orders_by_due_time_on_request(self, api_client, django_user_model):
        # Priority puts the 0.65 first; due times put the 0.5 first.
        urgent, early = scored(api_client, 0.65), scored(api_client, 0.5)
        due_in(urgent, 20)
        due_in(early, 5)
        mia = staff_browser(django_user_model, "mia", "moderator")
        by_priority = mia.get(QUEUES + "?queue=low_confidence").content.decode()
        by_due = mia.get(QUEUES + "?queue=low_confidence&order=due").content.decode()
        assert by_priority.index(f"queue-item-{urgent.short_id}") < by_priority.index(f"queue-item-{early.short_id}")
        assert by_due.index(f"queue-item-{early.short_id}") < by_due.index(f"queue-item-{urgent.short_id}")
        assert "by due time, the earliest first" in by_due

    def test_ordering_by_due_time_walks_the_due_index(self, api_client):
        scored(api_client, 0.6)
        waiting = ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW,
                                               queue=ReviewQueue.LOW_CONFIDENCE).order_by("due_at", "id")[:50]
        with connection.cursor() as cursor:
            # Every other way off (a scan of another index, then a sort), so the plan says whether
            # the due index can serve this order, whatever the statistics earlier tests left.
            for way in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                cursor.execute(f"SET LOCAL {way} = off")
            sql, params = waiting.query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert "review_queue_due_idx" in plan and "Sort" not in plan, plan

    def test_the_review_list_shows_the_due_time_of_a_waiting_review(self, api_client, django_user_model):
        late = due_in(scored(api_client, 0.6), -1)
        page = staff_browser(django_user_model, "mia", "moderator").get(
            reverse("admin:moderation_contentreview_changelist")).content.decode()
        assert f'id="due-{late.short_id}" data-state="breached">Past its deadline' in page


@pytest.mark.django_db
class TestDeadlinePage:
    def test_a_moderator_may_not_see_the_figures_a_team_lead_may(self, db, django_user_model):
        assert staff_browser(django_user_model, "mia", "moderator").get(DEADLINES).status_code == 403
        for role in ("team_lead", "supervisor", "auditor"):
            assert staff_browser(django_user_model, f"{role}-1", role).get(DEADLINES).status_code == 200

    def test_the_figures_count_a_breach_and_the_open_ones_past_due(self, api_client, django_user_model):
        from moderation import services

        lead = staff_browser(django_user_model, "lea", "team_lead")
        late = due_in(scored(api_client, 0.6), -1)
        decided = scored(api_client, 0.6)
        services.review_override(review_id=decided.pk, label="approved", reason="fine", moderator=lead.user)
        QueueVisit.objects.filter(review=decided).update(due_at=timezone.now() - timedelta(minutes=5))
        page = lead.get(DEADLINES).content.decode()
        assert late.queue == ReviewQueue.LOW_CONFIDENCE
        row = page[page.index('id="now-low_confidence"'):]
        assert '<td class="figure waiting">1</td>' in row[:600] and "1 past due" in row[:600]
        week = page[page.index('id="week-'):]
        assert '-low_confidence"' in week[:40]
        assert '<td class="figure decided">1</td>' in week[:600] and "1 late" in week[:600]

    def test_a_queue_the_viewer_may_not_open_shows_no_figures(self, api_client, django_user_model):
        ModerationQueue.objects.create(slug=ReviewQueue.LOW_CONFIDENCE).groups.add(Group.objects.create(name="doubts"))
        review = scored(api_client, 0.6)
        QueueVisit.objects.filter(review=review).update(left_at=timezone.now(), decided=True)
        page = staff_browser(django_user_model, "lea", "team_lead").get(DEADLINES).content.decode()
        assert 'id="now-low_confidence"' not in page and 'id="week-' not in page
        assert "No decision in these weeks in the queues you may open." in page

    def test_bad_weeks_or_zone_are_refused_in_words_and_the_defaults_shown(self, db, django_user_model):
        lead = staff_browser(django_user_model, "lea", "team_lead")
        for query in ("?weeks=0", "?weeks=x", "?weeks=٣", "?tz=Mars/Olympus"):
            answer = lead.get(DEADLINES + query)
            assert answer.status_code == 200
            assert "Not shown as asked" in answer.content.decode() and "8 weeks in UTC" in answer.content.decode()
        assert "Not shown as asked" not in lead.get(DEADLINES + "?weeks=2&tz=Europe/Berlin").content.decode()

    @hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(tz=st.text(max_size=70), weeks=st.text(max_size=5))
    def test_any_text_in_the_form_gets_a_page(self, db, django_user_model, tz, weeks):
        lead = staff_browser(django_user_model, f"lea-{abs(hash((tz, weeks)))}", "team_lead")
        answer = lead.get(DEADLINES, {"tz": tz.replace("\x00", ""), "weeks": weeks.replace("\x00", "")})
        assert answer.status_code == 200
