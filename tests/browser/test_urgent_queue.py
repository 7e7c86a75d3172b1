"""The urgent queue in a real browser (DSA Art. 18; docs/legal-holds.md): a threat-to-life item is
shown with its deadline in minutes and the one-step "inform the authorities" action, which leads
to the printable report."""

from __future__ import annotations

from datetime import timedelta

import pytest

from moderation import services
from moderation.models import AuthorityReport, ReviewStatus
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, staff
from tests.helpers import decided

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]


def test_the_urgent_queue_shows_the_minutes_deadline_and_the_inform_action(live_server, api_client, django_user_model):
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, urgent_categories=["harassment"],
                            urgent_deadline_minutes=15)
    review = decided(api_client, ReviewStatus.MANUAL_REVIEW)
    deadline = f"{review.queued_at + timedelta(minutes=15):%H:%M}"
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=urgent")
        shown = page.inner_text(f"#deadline-{review.short_id}")
        summary = page.inner_text("#queue-summary")
        page.fill(f"#recipient-{review.short_id}", "Police emergency line")
        page.click(f"#inform-{review.short_id}")
        page.wait_for_selector("#authority-report")
        report_page = page.inner_text("#authority-report")

    assert shown == f"deadline {deadline} UTC (15 minutes after it arrived)"
    assert "Threat to life or safety" in summary
    assert "Police emergency line" in report_page and "thanks for the lovely dinner, see you at the party" in report_page
    assert AuthorityReport.objects.get().sent_by == "mia"
