"""Deadlines in a real browser (docs/workplace.md, "Deadlines"): a moderator sees each waiting
review's due time in words, orders the queue by it, sees the near and the late ones marked, and
decides a late one; a team lead then finds that breach counted on the deadline page, which a
moderator may not open."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from moderation.models import ContentReview, QueueVisit, ReviewStatus
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401 - shots: a fixture
from tests.helpers import decided

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]


def due_in(review: ContentReview, hours: float) -> ContentReview:
    """Move a waiting review's anchor and due time (48 hours apart, the default target) and its
    open visit's, so that it is due in `hours` (negative: past)."""
    now = timezone.now()
    anchor, due = now + timedelta(hours=hours - 48), now + timedelta(hours=hours)
    ContentReview.objects.filter(pk=review.pk).update(queued_at=anchor, due_at=due)
    QueueVisit.objects.filter(review=review, left_at__isnull=True).update(anchor_at=anchor, due_at=due)
    review.refresh_from_db()
    return review


def test_due_times_order_marks_and_a_breach_counted(live_server, api_client, django_user_model, shots):  # noqa: F811
    # Made in this order, so the queue's own order (most urgent first: equal scores, the oldest
    # entry first) is on time, near, late; by due time it is late, near, on time.
    on_time, near, late = (due_in(decided(api_client, ReviewStatus.MANUAL_REVIEW), hours) for hours in (30, 2, -3))
    staff(django_user_model, "mia", "moderator")
    staff(django_user_model, "lea", "team_lead")
    queue_url = f"{live_server.url}/admin/moderation/contentreview/queues/?queue=low_confidence"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(queue_url)
        page.wait_for_selector("#queue-items")
        words = {review.pk: page.inner_text(f"#due-{review.short_id}") for review in (on_time, near, late)}
        page.click("#order-due")
        page.wait_for_selector("#order-priority")
        order = page.eval_on_selector_all("#queue-items tbody tr", "rows => rows.map(r => r.id)")
        page.screenshot(path=str(shots / "queues-by-due-time.png"), full_page=True)
        page.click(f"#queue-item-{late.short_id} a")
        page.wait_for_selector("#decide-form")
        on_review_page = page.inner_text("#review-status")
        page.check("#decide-form input[value=approved]")
        page.fill("#decide-form textarea[name=reason]", "Within the rules, seen late.")
        page.click("#decide-submit")
        page.wait_for_selector(".messagelist")
        denied = page.goto(f"{live_server.url}/admin/moderation/contentreview/deadlines/").status

        lead = log_in(browser, live_server, "lea")
        lead.click("#deadlines-link")
        lead.wait_for_selector("#deadlines-weekly")
        now_row = lead.inner_text("#now-low_confidence")
        weekly = lead.inner_text("#deadlines-weekly")
        lead.screenshot(path=str(shots / "deadlines.png"), full_page=True)

    assert words[on_time.pk].startswith("due ") and "(in 1\xa0day" in words[on_time.pk]
    assert words[near.pk].startswith("Near its deadline: due ")
    assert words[late.pk].startswith("Past its deadline: was due ") and "3\xa0hours ago" in words[late.pk]
    assert order == [f"queue-item-{r.short_id}" for r in (late, near, on_time)]
    assert "Past its deadline" in on_review_page
    assert denied == 403  # a moderator does not read everyone's figures
    # Now: two wait (one of them near its deadline); the late one was decided, late.
    assert now_row.split("\t")[2:] == ["2", "1 near", "0"], now_row
    assert "Low-confidence model results\t1\t" in weekly and "1 late" in weekly, weekly
    late.refresh_from_db()
    assert late.status == ReviewStatus.APPROVED
    assert QueueVisit.objects.get(review=late).left_at > QueueVisit.objects.get(review=late).due_at
