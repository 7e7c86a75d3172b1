"""The moderator's workplace in a real browser (Playwright driving Debian's Chromium, headless).

Skipped, saying why, only when no Chromium is installed (`.ci/run` installs it). With
UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (shown in the README).
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group

from audit.models import ReviewTransition
from moderation.models import ContentReview
from tests.helpers import decided

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
PASSWORD = "correct-horse-battery-9"


@contextmanager
def chromium():
    """A headless Chromium. Data is made before it starts and checked after it stops: the ORM
    is not used while Playwright's event loop runs in this thread."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        return Path(settings.BASE_DIR) / "docs" / "screenshots"
    return tmp_path


def staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def log_in(browser, live_server, username: str):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#dashboard")
    return page


def test_a_moderator_filters_opens_a_timeline_and_overrides_with_a_reason(live_server, api_client, django_user_model, shots):
    waiting = [decided(api_client, "manual_review") for _ in range(2)]
    decided(api_client, "approved")
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        page.click("#changelist-filter >> text=Manual review")
        page.wait_for_url("**status__exact=manual_review**")
        listed = page.locator("#result_list tbody tr").count()
        page.screenshot(path=str(shots / "review-list.png"), full_page=True)

        page.click("#review-next")  # the oldest waiting review, leased to mia
        page.wait_for_selector("#timeline")
        summary, before = page.inner_text("#content-main"), page.inner_text("#timeline")
        page.screenshot(path=str(shots / "review-timeline.png"), full_page=True)

        page.check("#override-form input[value=rejected]")
        page.fill("#override-form textarea", "Targeted harassment; the model was unsure.")
        page.locator("#override-form").screenshot(path=str(shots / "override-form.png"))
        page.click("#override-submit")
        page.wait_for_selector(".messagelist")
        message, status, after = page.inner_text(".messagelist"), page.inner_text("#review-status"), page.inner_text("#timeline")

    assert listed == 2
    assert str(waiting[0].pk) in summary
    assert "submitted by" in before and "processing -> manual_review" in before
    assert "Review overridden." in message and status == "Rejected"
    assert "manual_review -> rejected (manual_override)" in after and "history: status rejected" in after
    review = ContentReview.objects.get(pk=waiting[0].pk)
    assert review.status == "rejected" and review.decision.reason.startswith("Targeted harassment")
    last = ReviewTransition.objects.filter(review=review).last()
    assert (last.cause, last.actor, last.actor_id) == ("manual_override", "admin", "mia")


def test_an_auditor_sees_no_action_buttons(live_server, api_client, django_user_model):
    review = decided(api_client, "manual_review")
    staff(django_user_model, "ada", "auditor")

    with chromium() as browser:
        page = log_in(browser, live_server, "ada")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        controls = page.locator("#review-next").count() + page.locator("select[name=action]").count()
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        page.wait_for_selector("#timeline")
        forms = sum(page.locator(form).count() for form in ("#override-form", "#escalate-form", "#reprocess-form"))

    assert controls == 0 and forms == 0
