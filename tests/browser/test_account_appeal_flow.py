"""An account appeal end to end in a real browser (docs/workplace.md, "Account appeals"): the
author appeals a ban over the API; the moderator who banned them finds it in the account
appeals' queue and is told another must decide; a supervisor opens the appeal's page (the
appeal, the ban, the strikes and the content behind them), overturns it, and the client is told
over its webhook that the appeal was overturned and the author restored. With
UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/."""

from __future__ import annotations

import json
import urllib.request

import pytest

from moderation import services, tasks
from moderation.models import AccountAppeal, ApiClient, Author
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.helpers import LoopbackJsonServer, queued_tasks, result

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
REASON = "Posts the same scam link in every thread."


def api(live_server, api_client, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    asked = urllib.request.Request(f"{live_server.url}{path}", method=method,
                                   data=json.dumps(body).encode() if body is not None else None,
                                   headers={"Authorization": f"Bearer {api_client.token}",
                                            "Content-Type": "application/json"})
    with urllib.request.urlopen(asked, timeout=10) as answer:
        return answer.status, json.loads(answer.read())


def test_an_account_appeal_is_queued_refused_to_who_banned_overturned_by_another_and_the_client_told(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    services.policy_publish_change(lambda active: {"term_lists": []}, notes="the model alone")
    for text in ("buy followers at scam.example", "cheap followers, scam.example again"):
        review, _ = services.review_submit(client=api_client, external_id=text, kind="text", text=text,
                                           author_id="u-7001")
        request = services.review_claim(review_id=review.pk, worker_id="worker-1")
        services.review_finalize(idempotency_key=request.idempotency_key, cause="provider_result", result=result(0.95))
    mia = staff(django_user_model, "mia", "moderator")
    staff(django_user_model, "sam", "supervisor")
    author = Author.objects.get(author_id="u-7001")
    services.author_act(author_pk=author.pk, moderator=mia, action="ban", reason=REASON, days=None,
                        expected_version=author.version)
    received = []
    receiver = LoopbackJsonServer(lambda path, headers, body: received.append(json.loads(body)) or (200, {}, 0))
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=receiver.url)  # from now on
    status, filed = api(live_server, api_client, "POST", "/api/v1/authors/u-7001/appeals/",
                        {"statement": "I sell real followers, not a scam."})
    assert status == 201 and filed["status"] == "open"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/")
        page.click("#account-appeals-link a")
        page.wait_for_selector("#result_list")
        queue = page.inner_text("#result_list")
        page.screenshot(path=str(shots / "account-appeals-queue.png"), full_page=True)
        page.click(f"#appeal-{filed['id']}")
        page.wait_for_selector("#appeal-strikes")
        refused = page.inner_text("#appeal-four-eyes")
        forms_for_mia = page.locator("#appeal-decide").count()

        page = log_in(browser, live_server, "sam")
        page.goto(f"{live_server.url}/admin/moderation/accountappeal/")
        page.click(f"#appeal-{filed['id']}")
        page.wait_for_selector("#appeal-decide")
        statement, action, strikes = (page.inner_text(s) for s in ("#appeal-statement", "#appeal-action",
                                                                    "#appeal-strikes"))
        page.check("#appeal-decide input[name=outcome][value=overturned]")
        page.fill("#appeal-decide textarea[name=reason]", "Real follower sales; the links are not a scam.")
        page.screenshot(path=str(shots / "account-appeal-page.png"), full_page=True)
        page.click("#appeal-decide-submit")
        page.wait_for_selector(".messagelist")
        message, decision = page.inner_text(".messagelist"), page.inner_text("#appeal-decision")

    delivered = [tasks.deliver_notification(**t["kwargs"]) for t in queued_tasks("moderation.tasks.deliver_notification")]
    receiver.shutdown()
    assert "u-7001" in queue and "Ban with no end, taken by moderator mia" in queue
    assert "You took this action, so another moderator must decide its appeal" in refused and forms_for_mia == 0
    assert "I sell real followers, not a scam." in statement
    assert "Ban with no end, taken by moderator mia" in action and REASON in action and "It is in force." in action
    rows = strikes.splitlines()[1:]  # under the header: one row a strike, its content beside it
    assert len(rows) == 2 and all(row.startswith("harassment\t1\t") and "scam.example" in row for row in rows)
    assert "Appeal overturned: the restriction is lifted." in message
    assert "Overturned (restriction lifted) by moderator sam" in decision
    appeal = AccountAppeal.objects.get()
    assert (appeal.status, appeal.resolved_by.username) == ("overturned", "sam")
    assert Author.objects.get(pk=author.pk).standing == "good"
    assert delivered == ["delivered", "delivered"]
    assert sorted(body["type"] for body in received) == ["account_appeal.resolved", "author.restored"]
    [told] = [body for body in received if body["type"] == "account_appeal.resolved"]
    assert told["data"]["outcome"] == "overturned"
    [restored] = [body for body in received if body["type"] == "author.restored"]
    assert restored["data"]["why"] == "overturned"
    _, seen = api(live_server, api_client, "GET", "/api/v1/authors/u-7001/")
    assert seen["standing"] == "good" and seen["restriction"] is None
