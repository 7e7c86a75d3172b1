"""Rolling out a policy change in a real browser (docs/quality.md): a supervisor saves a stricter
version as a draft, backtests it over what moderators decided and watches the job's page finish,
puts the draft in shadow beside the active version while new content is decided live, reads the
shadow's agreement, and activates the draft from its page. The backtest job and the live traffic
run in a worker thread through the services and tasks a django-q2 worker calls. With
UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from moderation import services, tasks
from moderation.models import Backtest, BacktestStatus, ModerationPolicy, ReviewStatus, ShadowRun, ShadowVerdict
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.helpers import queued_tasks, submit

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]

DECIDED = [
    ("you are a worthless idiot and everyone hates you", ReviewStatus.REJECTED, "insult"),
    ("dasar goblok tolol kamu anjing", ReviewStatus.REJECTED, "insult"),
    ("what a stupid idea, honestly", ReviewStatus.APPROVED, ""),
    ("Thanks for the help yesterday, see you at the market", ReviewStatus.APPROVED, ""),
    ("Terima kasih atas bantuannya kemarin", ReviewStatus.APPROVED, ""),
    ("this is a dumb take and you know it", ReviewStatus.APPROVED, ""),
]
LIVE = ["you absolute moron", "Selamat pagi semua", "see you at the meeting on Thursday", "kamu bodoh sekali"]


def judged_live(client, text):
    review = submit(client, text=text)
    services.review_claim(review_id=review.pk, worker_id="w")
    services.request_dispatch(request_id=review.requests.get().pk, worker_id="w", job_id="j")
    review.refresh_from_db()
    return review


def test_draft_backtest_shadow_activate(live_server, api_client, django_user_model, settings, shots):  # noqa: F811
    settings.QUALITY_SETTLE_S = 0  # judged at once, not a minute later
    settings.MODERATION_PROVIDER, settings.MODERATION_BATCH_SIZE = "local", 16
    lead = staff(django_user_model, "lena", "moderator")
    for text, label, category in DECIDED:
        review = judged_live(api_client, text)
        if review.status != label or review.decision.source != "moderator":
            services.review_override(review_id=review.pk, label=label, reason="checked", category=category,
                                     moderator=lead, expected_version=review.version)
    staff(django_user_model, "sara", "supervisor")
    active = services.policy_active()
    backtest_asked, backtest_done, shadow_asked, shadow_done = (threading.Event() for _ in range(4))

    def worker():
        """A django-q2 worker: the backtest's job; then live traffic, and the shadow's minute."""
        try:
            assert backtest_asked.wait(60)
            for _ in range(100):
                jobs = queued_tasks("moderation.tasks.backtest_run")
                if jobs:
                    break
                time.sleep(0.1)
            tasks.backtest_run(**jobs[0]["kwargs"])
            backtest_done.set()
            assert shadow_asked.wait(60)
            for text in LIVE:
                judged_live(api_client, text)
            tasks.quality_minute()
            shadow_done.set()
        finally:
            backtest_done.set(), shadow_done.set()
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        with chromium() as browser:
            page = log_in(browser, live_server, "sara")
            page.goto(f"{live_server.url}/admin/moderation/moderationpolicy/add/")
            page.fill("#id_reject_threshold", "0.8")
            page.fill("#id_review_threshold", "0.3")
            page.fill("#id_category_thresholds", '{"hate": {"review": 0.05, "reject": 0.95}}')
            page.check("#id_as_draft")
            page.fill("#id_notes", "Hate speech: every hint goes to a human.")
            page.click("input[name=_save]")
            page.wait_for_selector("#result_list")
            listed = page.inner_text("#result_list")
            page.click(f"#result_list a:text-is('{active.version + 1}')")
            page.wait_for_selector("#policy-quality")
            before = page.inner_text("#policy-quality")
            page.screenshot(path=str(shots / "policy-draft.png"))

            page.fill("#id_limit", "100")
            page.click("#backtest-start")
            page.wait_for_selector("#backtest-progress")
            backtest_asked.set()
            assert backtest_done.wait(120)
            # The page reloads itself while the backtest runs.
            page.wait_for_function("() => document.querySelector('#backtest-status').innerText.includes('Done')",
                                   timeout=30_000)
            figures = page.inner_text(".backtest-figures")
            changes = page.inner_text("#backtest-changes")
            page.screenshot(path=str(shots / "backtest.png"), full_page=True)

            page.click(f"a:text-is('policy v{active.version + 1} (draft)')")
            page.wait_for_selector("#shadow-start")
            page.click("#shadow-start")
            page.wait_for_selector("#shadow-summary")
            shadow_asked.set()
            assert shadow_done.wait(120)
            page.reload()
            agreement = page.inner_text("#shadow-agreement")
            disagreements = page.inner_text("#shadow-disagreements")
            page.screenshot(path=str(shots / "shadow.png"), full_page=True)

            page.click(f"a:text-is('policy v{active.version + 1} (draft)')")
            page.wait_for_selector("#activate")
            beside = page.inner_text("#policy-quality")
            page.click("#activate")
            page.wait_for_selector(".messagelist")
            message = page.inner_text(".messagelist")
            after = page.inner_text("#policy-quality")
            page.screenshot(path=str(shots / "policy-activated.png"))
    finally:
        backtest_asked.set(), shadow_asked.set()
        thread.join(120)

    draft = ModerationPolicy.objects.get(version=active.version + 1)
    assert "draft of v" in listed
    assert "acts on nothing" in before and "No finished backtest" in before
    backtest = Backtest.objects.get()
    assert backtest.status == BacktestStatus.DONE and backtest.total == len(DECIDED) and backtest.changed >= 1
    assert "all" in figures and changes.count("\n") >= backtest.changed
    assert ShadowVerdict.objects.filter(shadow=ShadowRun.objects.get()).count() == len(LIVE)
    assert "(none)" in agreement or "insult" in agreement or "hate" in agreement
    assert disagreements.strip()
    assert f"backtest {backtest.pk}" in beside
    assert f"version {draft.version} is now the active version" in message and "Activated" in after
    assert services.policy_active() == draft and draft.activated_by.username == "sara"
