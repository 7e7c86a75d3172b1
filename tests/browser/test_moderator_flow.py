"""The moderator's workplace in a real browser (Playwright driving Debian's Chromium, headless).

Skipped, saying why, only when no Chromium is installed (`.ci/run` installs it). With
UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (shown in the README).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.models import ReviewTransition
from moderation import services, tasks
from moderation.models import ApiClient, Author, ContentReview, ModeratorNote
from moderation.providers import ModerationResult
from tests.helpers import LoopbackJsonServer, decided, queued_tasks, result

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
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#dashboard")
    return page


def waiting(client, text: str, scores: dict[str, float], kind: str = "text", **content) -> ContentReview:
    """A submission the model was unsure about: it waits in the low-confidence queue."""
    review, _ = services.review_submit(client=client, external_id=f"post-{len(scores)}-{abs(hash(text))}", kind=kind,
                                       text=text, **content)
    request = services.review_claim(review_id=review.pk, worker_id="worker-1")
    services.review_finalize(
        idempotency_key=request.idempotency_key, cause="provider_result",
        result=ModerationResult(model="omni-moderation-latest", flagged=True,
                                categories={c: s >= 0.5 for c, s in scores.items()}, category_scores=scores),
    )
    review.refresh_from_db()
    assert review.status == "manual_review"
    return review


THREAD = ("Replying to the thread about the parking rules.\n\n"
          "Honestly, people like you should not be allowed near a keyboard. Everyone on this street knows "
          "what you did last summer, and if you show up at the meeting on Thursday you will regret it.\n\n"
          "— sent from the neighbourhood app")


def test_a_moderator_takes_the_most_urgent_review_reads_it_whole_and_rejects_it_by_keyboard(
    live_server, api_client, django_user_model, shots
):
    unsure = waiting(api_client, "Is this sarcasm? 'Great job breaking the build again, genius.'",
                     {"harassment": 0.53, "hate": 0.02})
    urgent = waiting(api_client, THREAD, {"harassment": 0.67, "violence": 0.6, "hate": 0.05},
                     metadata={"author_id": "u-4411", "thread": {"id": 981, "title": "Parking rules"}})
    media = waiting(api_client, "", {"violence": 0.55}, kind="image", media_url="https://cdn.example.org/uploads/8812.jpg")
    decided(api_client, "approved")
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        page.wait_for_selector("#result_list")
        listed = page.inner_text("#result_list")
        page.set_viewport_size({"width": 1920, "height": 900})  # every column in the picture
        page.screenshot(path=str(shots / "review-list.png"), full_page=True)
        page.set_viewport_size({"width": 1400, "height": 900})

        page.click("#open-queues")
        page.wait_for_selector("#queue-items")
        queue = page.inner_text("#queue-items")
        depth = page.inner_text("#queue-low_confidence .depth")
        page.screenshot(path=str(shots / "queues.png"), full_page=True)

        page.click("#review-next-low_confidence")
        page.wait_for_selector("#decide-form")
        first_url, content, scores = page.url, page.inner_text("#content"), page.inner_text("#scores")
        images = page.locator("#content img").count()
        page.screenshot(path=str(shots / "review-page.png"), full_page=True)

        page.keyboard.press("r")        # reject: the category list takes the focus
        page.keyboard.press("1")        # its first category (harassment); the focus moves to its canned reasons
        page.keyboard.press("w")        # the reason in the moderator's own words
        page.keyboard.type("Threatens a neighbour; the model was unsure.")  # letters type, no shortcut fires
        page.keyboard.press("Escape")   # leave the field
        page.keyboard.press("n")        # the note
        page.keyboard.type("Same author threatened others in thread 981.")
        page.locator("#decide-form").screenshot(path=str(shots / "decide-panel.png"))
        page.keyboard.press("Control+Enter")  # decide and next
        page.wait_for_url(lambda url: url != first_url and "/timeline/" in url)
        message, second_url = page.inner_text(".messagelist"), page.url
        page.goto(f"{live_server.url}/admin/")
        workload = page.inner_text("#workload")
        page.screenshot(path=str(shots / "admin-index.png"), full_page=True)

    assert "Replying to the thread about the parking rules." in listed
    assert "image at cdn.example.org" in listed
    # (The image waits in "Images", with the viewer that protects moderators: tests/browser/test_media_viewer.py.)
    assert depth == "2" and queue.index("Replying to the thread") < queue.index("Is this sarcasm")
    assert str(urgent.pk) in first_url and "?queue=low_confidence" in first_url
    assert "you will regret it." in content and "Parking rules" in content and images == 0
    assert "harassment" in scores and "0.670" in scores and "violence" in scores
    assert "Rejected as harassment. Undo" in message and "mia\t1" in workload
    assert str(unsure.pk) in second_url  # next in the low-confidence queue
    decided_review = ContentReview.objects.get(pk=urgent.pk)
    assert (decided_review.status, decided_review.decision.category) == ("rejected", "harassment")
    assert decided_review.decision.reason == "Threatens a neighbour; the model was unsure."
    assert ModeratorNote.objects.get(review=urgent).text == "Same author threatened others in thread 981."
    assert ContentReview.objects.get(pk=unsure.pk).leased_to.username == "mia"
    assert ContentReview.objects.get(pk=media.pk).leased_to is None and media.queue == "images"
    last = ReviewTransition.objects.filter(review=urgent).last()
    assert (last.cause, last.actor, last.actor_id) == ("manual_override", "admin", "mia")


def test_moderators_pressing_review_next_at_once_get_different_reviews(live_server, api_client, django_user_model):
    reviews = [waiting(api_client, f"borderline post number {i}", {"harassment": 0.6 + i / 100}) for i in range(5)]
    names = ["mia", "sam", "ada", "kim"]
    for name in names:
        staff(django_user_model, name, "moderator")

    with chromium() as browser:
        pages = [log_in(browser, live_server, name) for name in names]
        for page in pages:
            page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/")
        start = time.time() * 1000 + 500  # every page presses the button at this same instant
        for page in pages:
            page.evaluate("at => setTimeout(() => document.getElementById('review-next-low_confidence').click(),"
                          " at - Date.now())", start)
        for page in pages:
            page.wait_for_selector("#decide-form")
        opened = [page.url for page in pages]

    taken = [next(str(r.pk) for r in reviews if str(r.pk) in url) for url in opened]
    assert len(set(taken)) == len(names), taken
    holders = {str(r.pk): r.leased_to.username for r in ContentReview.objects.filter(leased_to__isnull=False)}
    assert holders == dict(zip(taken, names, strict=True))


def test_a_stale_decision_shows_what_changed_and_applies_nothing(live_server, api_client, django_user_model):
    review = waiting(api_client, "a post two people look at", {"harassment": 0.67})
    staff(django_user_model, "mia", "moderator")
    staff(django_user_model, "sam", "supervisor")
    url = f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/"

    with chromium() as browser:
        mia, sam = (log_in(browser, live_server, name) for name in ("mia", "sam"))
        mia.goto(url)
        sam.goto(url)
        sam.fill("#reprocess-form textarea", "new model version")
        sam.click("#reprocess-form button[type=submit]")
        sam.wait_for_selector(".messagelist")

        mia.check("#decide-form input[value=rejected]")
        mia.select_option("#decide-form select[name=category]", "harassment")
        mia.fill("#decide-form textarea[name=reason]", "insulting")
        mia.fill("#decide-form textarea[name=note]", "should not be kept")
        mia.click("#decide-submit")
        mia.wait_for_selector(".messagelist")
        message, status = mia.inner_text(".messagelist"), mia.inner_text("#review-status")

    assert "it changed since you opened it: sent to the model again by moderator sam at " in message, message
    assert "manual_review" not in message and "admin:sam" not in message  # codes stay in the timeline's raw record
    assert "Nothing was applied" in message and "Waiting for the model (sent to the model again by a moderator)" in status
    review.refresh_from_db()
    assert review.decisions.count() == 1 and review.decision.source == "provider"
    assert not ModeratorNote.objects.exists()


def test_an_auditor_sees_no_action_buttons(live_server, api_client, django_user_model):
    review = decided(api_client, "manual_review")
    staff(django_user_model, "ada", "auditor")

    with chromium() as browser:
        page = log_in(browser, live_server, "ada")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        controls = page.locator("#review-next").count() + page.locator("select[name=action]").count()
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/")
        controls += page.locator(".review-next").count()
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        page.wait_for_selector("#timeline")
        forms = sum(page.locator(form).count() for form in ("#decide-form", "#escalate-form", "#reprocess-form",
                                                             "#note-form"))

    assert controls == 0 and forms == 0


def test_a_moderator_follows_the_author_link_sees_the_strikes_and_suspends_for_7_days(
    live_server, api_client, django_user_model, shots
):
    # Both rejected by the model's harassment score alone: the default term lists (a matched term
    # would name its own category) are left out of this version.
    services.policy_publish_change(lambda active: {"term_lists": []}, notes="the model alone")
    for text in ("you are an idiot", "idiots, all of you"):
        rejected, _ = services.review_submit(client=api_client, external_id=text, kind="text", text=text,
                                             author_id="u-4411")
        request = services.review_claim(review_id=rejected.pk, worker_id="worker-1")
        services.review_finalize(idempotency_key=request.idempotency_key, cause="provider_result", result=result(0.95))
    review = waiting(api_client, THREAD, {"harassment": 0.67, "violence": 0.6}, author_id="u-4411")
    staff(django_user_model, "mia", "moderator")
    received = []
    receiver = LoopbackJsonServer(lambda path, headers, body: received.append(json.loads(body)) or (200, {}, 0))
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=receiver.url)  # from now on: no earlier decision

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        beside = page.inner_text("#review-author")
        page.click("#author-link")
        page.wait_for_selector("#active-strikes")
        strikes = page.inner_text("#active-strikes")
        page.fill("#suspend-form input[name=days]", "7")
        page.fill("#suspend-form textarea[name=reason]", "Threatens neighbours after two warnings by the model.")
        page.click("#suspend-submit")
        page.wait_for_selector(".messagelist")
        message, standing = page.inner_text(".messagelist"), page.inner_text("#author-standing")
        page.screenshot(path=str(shots / "author-page.png"), full_page=True)

    delivered = [tasks.deliver_notification(**t["kwargs"]) for t in queued_tasks("moderation.tasks.deliver_notification")]
    receiver.shutdown()
    assert "u-4411" in beside and "2 active strike points" in beside
    assert strikes.count("harassment") == 2
    assert "Author suspended." in message and "Suspended" in standing and "until" in standing
    # The client reads it over the API, through the live server.
    asked = urllib.request.Request(f"{live_server.url}/api/v1/authors/u-4411/",
                                   headers={"Authorization": f"Bearer {api_client.token}"})
    with urllib.request.urlopen(asked, timeout=10) as answer:
        assert answer.status == 200
        seen = json.loads(answer.read())
    assert seen["standing"] == "suspended" and seen["strike_points"] == 2
    author = Author.objects.get(client=api_client, author_id="u-4411")
    assert seen["restriction"]["action"] == "suspend"
    assert parse_datetime(seen["restriction"]["until"]) == author.restricted_until
    assert abs(author.restricted_until - timezone.now() - timedelta(days=7)) < timedelta(minutes=5)
    assert delivered == ["delivered"]
    [body] = received
    assert body["type"] == "author.actioned"
    assert {k: body["data"][k] for k in ("author_id", "action", "cause", "reason")} == {
        "author_id": "u-4411", "action": "suspend", "cause": "moderator",
        "reason": "Threatens neighbours after two warnings by the model."}
    assert body["data"]["until"] == author.restricted_until.isoformat().replace("+00:00", "Z")


def test_a_digit_after_typing_a_category_name_never_picks_another_category(live_server, api_client, django_user_model):
    """Issue: press r, type "pro" into the category list, press 1: the review was rejected as
    harassment (category #1). Letters typed into the list choose by name; a digit after them
    picks nothing else, and the decision records the category the moderator typed."""
    review = waiting(api_client, "You absolute clown, nobody wants your posts here", {"harassment": 0.6})
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        page.wait_for_selector("#decide-form")
        page.keyboard.press("r")           # reject: the category list takes the focus
        page.keyboard.type("pro")          # choose "profanity" by name
        chosen = page.eval_on_selector("select[name=category]", "s => s.value")
        page.keyboard.press("1")           # a digit after letters: no shortcut fires
        after_digit = page.eval_on_selector("select[name=category]", "s => s.value")
        page.fill("textarea[name=reason]", "Swearing at another user.")
        page.keyboard.press("Control+Enter")
        page.wait_for_selector(".messagelist")
        message = page.inner_text(".messagelist")

    decided_review = ContentReview.objects.get(pk=review.pk)
    assert chosen == after_digit == "profanity"
    assert "Rejected as profanity" in message
    assert (decided_review.status, decided_review.decision.category) == ("rejected", "profanity")
