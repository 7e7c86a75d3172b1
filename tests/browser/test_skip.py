"""`j` (Skip) in the keyboard review flow moves on and never hands back a review the moderator
passed over, for as long as a lease lasts (issue 49: `j` on the second of two reviews handed
the first back). A real browser: Playwright driving Debian's Chromium, headless."""

from __future__ import annotations

import pytest

from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, staff, waiting

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]


def test_j_moves_through_the_queue_and_never_hands_a_skipped_review_back(live_server, api_client, django_user_model):
    reviews = [waiting(api_client, f"borderline post number {i}", {"harassment": 0.66 - i / 100}) for i in range(3)]
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=low_confidence")
        page.click("#review-next-low_confidence")
        page.wait_for_selector("#decide-form")
        opened = [page.url]
        for _ in range(len(reviews)):
            with page.expect_navigation():
                page.keyboard.press("j")
            opened.append(page.url)
        said = page.inner_text("ul.messagelist")
        page.click("#review-next-low_confidence")  # Review next does not hand them back either
        page.wait_for_load_state()
        again = page.url

    shown = [next((str(r.pk) for r in reviews if str(r.pk) in url), url) for url in opened]
    assert shown[:3] == [str(r.pk) for r in reviews], shown  # most urgent first, each once
    assert "/queues/" in shown[3] and "You skipped 3 reviews lately" in said, (shown, said)
    assert not any(str(r.pk) in again for r in reviews), again
