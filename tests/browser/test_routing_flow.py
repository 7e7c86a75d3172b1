"""A routing rule in a real browser: a supervisor dry-runs and publishes a rule sending Indonesian
user reports to a group-only queue; then of two moderators, the one in the group sees that queue
and takes its review with "Review next", and the other neither sees it nor can open the review.
With UPDATE_SCREENSHOTS=1 the screenshot goes to docs/screenshots/."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from moderation.models import ContentReview, ModerationPolicy, ModerationQueue
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.moderation.test_queue_access import ENGLISH, INDONESIAN, RULE, reported

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
QUEUES = "/admin/moderation/contentreview/queues/"


def test_a_rule_sends_indonesian_reports_to_a_group_only_queue_another_moderator_cannot_take(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    indonesian_group = Group.objects.create(name="indonesian")
    queue = ModerationQueue.objects.create(slug="reports-id", name="Indonesian reports",
                                           description="User reports of Indonesian texts")
    queue.groups.add(indonesian_group)
    ModerationPolicy.objects.update(model_languages=["en", "id"])  # (published by post_migrate; no decision yet)
    before = reported(api_client, f"{INDONESIAN} (sebelum aturan)", 1)  # waiting before the rule
    staff(django_user_model, "sue", "supervisor")
    ina = staff(django_user_model, "ina", "moderator")
    ina.groups.add(indonesian_group)
    staff(django_user_model, "sam", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "sue")
        page.goto(f"{live_server.url}/admin/moderation/moderationpolicy/")
        page.click("#edit-routing")
        page.fill("#id_rules", json.dumps([RULE], indent=2))
        page.fill("#id_dry_last", "100")
        page.click("#preview")
        page.wait_for_selector("#routing-moved")
        dry_run = page.inner_text("#routing-moved"), page.inner_text("#routing-moves")
        page.click("#publish")
        page.wait_for_selector(".messagelist")
        published = page.inner_text(".messagelist")

    assert dry_run == ("1 of 1 would wait in another queue.", "1 from User reports to Indonesian reports")
    assert "Published policy version" in published
    assert ContentReview.objects.get(pk=before.pk).queue == "reports"  # a rule routes what enters after it
    routed = reported(api_client, INDONESIAN, 2)
    english = reported(api_client, ENGLISH, 3)
    assert routed.queue == "reports-id" and english.queue == "reports"
    review_page = f"{live_server.url}/admin/moderation/contentreview/{routed.pk}/timeline/"

    with chromium() as browser:
        sam = log_in(browser, live_server, "sam")
        sam.goto(f"{live_server.url}{QUEUES}")
        sam_queues = sam.inner_text("#queue-summary")
        sam_buttons = sam.locator("#review-next-reports-id").count()
        refused = sam.goto(review_page).status
        sam.goto(f"{live_server.url}{QUEUES}?queue=reports")
        sam.click("#review-next-reports")
        sam.wait_for_selector("#content-text")
        sam_took = sam.url

        ina_page = log_in(browser, live_server, "ina")
        ina_page.goto(f"{live_server.url}{QUEUES}?queue=reports-id")
        ina_row = ina_page.inner_text("#queue-reports-id")
        ina_page.locator("#queue-summary").screenshot(path=str(shots / "routing-queues.png"))
        ina_page.click("#review-next-reports-id")
        ina_page.wait_for_selector("#content-text")
        ina_took, ina_text = ina_page.url, ina_page.inner_text("#content-text")

    assert "Indonesian reports" not in sam_queues and "User reports" in sam_queues and sam_buttons == 0
    assert refused == 404  # as for a review that does not exist
    assert str(routed.pk) not in sam_took
    assert ina_row.split("\t")[:2] == ["Indonesian reports", "1"]
    assert ina_took.startswith(review_page) and ina_text == INDONESIAN
    assert ContentReview.objects.get(pk=routed.pk).leased_to.username == "ina"
