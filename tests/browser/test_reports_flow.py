"""A moderator works the user-reports queue in a real browser (Playwright driving Debian's
Chromium, headless): the queue shows what the reports say, the review page prefills the
category from them, and "Agree with reports" rejects and counts toward each reporter's accuracy.

Skipped, saying why, only when no Chromium is installed (`.ci/run` installs it).
"""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from moderation import services
from moderation.models import ContentReview, PileOn, Report, Reporter
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, staff
from tests.helpers import decided

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]

# (reporter, reason, weight when they reported)
REPORTERS = [("u-101", "harassment", "1.50"), ("u-102", "harassment", "0.50"), ("u-103", "spam", "1.00")]
RESOLVED_BEFORE, ACTIONED_BEFORE = 6, 4


def test_a_moderator_agrees_with_the_reports_of_a_piled_on_review_and_the_reporters_accuracy_counts_it(
    live_server, api_client, django_user_model, tmp_path
):
    review = decided(api_client, "approved")
    for reporter_id, reason, weight in REPORTERS:
        Reporter.objects.create(client=api_client, reporter_id=reporter_id, resolved=RESOLVED_BEFORE,
                                actioned=ACTIONED_BEFORE)
        filed = services.report_file(review_id=review.pk, reporter_id=reporter_id, reason=reason)
        Report.objects.filter(pk=filed.report.pk).update(weight=Decimal(weight))
    ContentReview.objects.filter(pk=review.pk).update(pile_on=PileOn.BURST)
    review.refresh_from_db()
    assert (review.status, review.queue) == ("manual_review", "reports")
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/")
        page.click("#queue-reports a")
        page.wait_for_selector(f"#queue-item-{review.short_id}")
        row = page.inner_text(f"#queue-item-{review.short_id}")
        page.screenshot(path=str(tmp_path / "reports-queue.png"), full_page=True)

        page.click(f"#queue-item-{review.short_id} a[href*='/timeline/']")
        page.wait_for_selector("#decide-form")
        summary = page.inner_text("#report-summary")
        prefilled = page.eval_on_selector("#decide-form select[name=category]", "s => s.value")
        labels = page.inner_text("#decide-form")
        page.keyboard.press("r")  # "Agree with reports": the category list takes the focus, already filled
        agreed = page.get_by_label("Agree with reports").is_checked()
        page.fill("#decide-form textarea[name=reason]", "Harassment, as the reporters said.")
        page.locator("#decide-form").screenshot(path=str(tmp_path / "decide-panel-reports.png"))
        page.keyboard.press("Control+Enter")  # decide and next: the queue is empty now
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")

    cells = re.split(r"\t", row)
    assert review.short_id in cells[0] and "pile-on: burst" in row
    assert "3" in cells and "3.00" in cells and "harassment ×2, spam ×1" in row
    assert "pile-on: burst" in summary and "3 reports" in summary and "weighted score 3.00" in summary
    assert "harassment ×2, spam ×1" in summary and "User ×3" in summary
    assert prefilled == "harassment"
    assert "Agree with reports" in labels and "Disagree" in labels and agreed
    assert "Rejected as harassment. Undo" in message and "queue is empty" in message
    review.refresh_from_db()
    assert (review.status, review.decision.label, review.decision.category) == ("rejected", "rejected", "harassment")
    assert review.decision.reason == "Harassment, as the reporters said."
    # The agreement is recorded by the decision path (moderation/services/report_outcomes.py): every
    # reporter was judged right once more, and their weights follow from these counts.
    assert list(Report.objects.filter(review=review).values_list("agreed", flat=True)) == [True] * len(REPORTERS)
    counts = {r.reporter_id: (r.resolved, r.actioned) for r in Reporter.objects.filter(client=api_client)}
    assert counts == {reporter_id: (RESOLVED_BEFORE + 1, ACTIONED_BEFORE + 1) for reporter_id, _, _ in REPORTERS}
