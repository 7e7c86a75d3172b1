"""A second look at decided content end to end in a real browser (docs/workplace.md, "A second
look at a decided review"): a moderator sends two rejected reviews for a second look with a
reason; a team lead (a senior moderator) finds them in the escalations queue, changes one
through the decide panel and confirms the other. The client is told once, of the changed
decision only. With UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/."""

from __future__ import annotations

import json

import pytest

from moderation import tasks
from moderation.models import ApiClient, ContentReview, SecondLook
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.helpers import LoopbackJsonServer, decided, queued_tasks

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]


def ask(page, live_server, review: ContentReview, reason: str) -> str:
    page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
    page.fill("#second-look-form textarea[name=reason]", reason)
    page.click("#second-look-submit")
    page.wait_for_selector(".messagelist")
    return page.inner_text(".messagelist")


def test_a_decided_review_is_sent_for_a_second_look_and_a_senior_changes_one_and_confirms_another(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    changed, confirmed = decided(api_client, "rejected"), decided(api_client, "rejected")
    staff(django_user_model, "mia", "moderator")
    staff(django_user_model, "tina", "team_lead")
    received = []
    receiver = LoopbackJsonServer(lambda path, headers, body: received.append(json.loads(body)) or (200, {}, 0))
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=receiver.url)  # from now on

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        sent = ask(page, live_server, changed, "Reads like satire of the politician, not an insult.")
        ask(page, live_server, confirmed, "The reporter says it was a quote.")
        state_for_mia = page.inner_text("#second-look")
        mia_may_decide = page.locator("#decide-form").count()

        page = log_in(browser, live_server, "tina")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=escalations")
        page.wait_for_selector("#second-looks")
        listed, count = page.inner_text("#second-looks"), page.inner_text("#second-look-count")
        page.screenshot(path=str(shots / "second-look-queue.png"), full_page=True)

        page.click(f"#second-look-{changed.short_id} a")
        page.wait_for_selector("#confirm-form")
        panel = page.inner_text("#second-look")
        page.check("#decide-form input[name=label][value=approved]")
        page.fill("#decide-form textarea[name=reason]", "Satire of a public figure: allowed.")
        page.screenshot(path=str(shots / "second-look.png"), full_page=True)
        page.click("#decide-submit")
        page.wait_for_selector(".messagelist")
        changed_message = page.inner_text(".messagelist")

        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=escalations")
        page.click(f"#second-look-{confirmed.short_id} a")
        page.fill("#confirm-form textarea[name=reason]", "A quote of an insult is still an insult here.")
        page.click("#confirm-submit")
        page.wait_for_selector(".messagelist")
        confirmed_message, confirmed_state = page.inner_text(".messagelist"), page.inner_text("#second-look")

    delivered = [tasks.deliver_notification(**t["kwargs"]) for t in queued_tasks("moderation.tasks.deliver_notification")]
    receiver.shutdown()
    assert "Sent for a second look" in sent and "the client is told only if it changes" in sent
    assert "Sent for a second look by mia" in state_for_mia and mia_may_decide == 0
    assert changed.short_id in listed and confirmed.short_id in listed and "satire of the politician" in listed
    assert "+ 2 decided reviews for a second look" in count
    assert "The decision stands, and the client has been told nothing of this" in panel
    assert "Approved." in changed_message and "The second look is closed with this decision" in changed_message
    assert "Decision confirmed: the second look is closed. Nothing changed, and the client is not told." in confirmed_message
    assert "Confirmed: the decision stands" in confirmed_state and "by tina" in confirmed_state
    changed.refresh_from_db()
    confirmed.refresh_from_db()
    assert (changed.status, changed.decision.moderator.username) == ("approved", "tina")
    assert confirmed.status == "rejected" and confirmed.decision.source == "provider"
    assert sorted(SecondLook.objects.values_list("status", flat=True)) == ["changed", "confirmed"]
    # Told once, of the changed decision; nothing of the confirmed one.
    assert delivered == ["delivered"]
    [told] = received
    assert told["type"] == "review.decided" and told["data"]["review_id"] == str(changed.pk)
    assert told["data"]["status"] == "approved"
