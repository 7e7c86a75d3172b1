"""Canned reasons and nothing typed lost, in a real browser (Playwright driving Debian's Chromium,
headless; docs/workplace.md, "Canned reasons"): a rejection decided by keyboard with a canned
reason and no free text, the category required by the browser itself, and a stale refusal that
comes back with everything the moderator typed."""

from __future__ import annotations

from moderation.models import ContentReview, ModeratorNote
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, pytestmark, staff, waiting  # noqa: F401

SLUR_EN = "The content uses a slur against a protected group."


def test_the_keyboard_flow_rejects_with_a_canned_reason_and_no_free_text(live_server, api_client, django_user_model):
    review = waiting(api_client, "people like them are vermin", {"hate": 0.81, "harassment": 0.3})
    staff(django_user_model, "mia", "moderator")
    url = f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(url)
        page.wait_for_selector("#decide-form")
        hidden_before = page.locator("#reasons-hate").is_hidden()
        page.keyboard.press("r")              # reject: the category list takes the focus
        page.keyboard.press("Control+Enter")  # no category yet: the browser refuses to send the form
        missing = page.evaluate("document.querySelector('#decide-form select[name=category]').validity.valueMissing")
        still_here = page.url == url
        page.keyboard.press("2")              # the second category (hate); its canned reasons take the focus
        focused = page.evaluate("document.activeElement.value")
        shown = [page.locator(f"#reasons-{key}").is_visible() for key in ("hate", "spam", "_approval")]
        page.keyboard.press("1")              # tick its first canned reason
        ticked = page.locator('#reasons-hate input[value="hate:slur"]').is_checked()
        page.keyboard.press("Control+Enter")  # decide and next
        page.wait_for_url(lambda now: now != url)
        message = page.inner_text(".messagelist")

    assert hidden_before and missing and still_here
    assert focused == "hate:slur" and shown == [True, False, False] and ticked
    assert "Rejected as hate. Undo" in message  # the success message names the decision (docs/workplace.md)
    decision = ContentReview.objects.get(pk=review.pk).decision
    assert (decision.label, decision.category, decision.reason_codes, decision.reason) == ("rejected", "hate",
                                                                                           ["slur"], "")
    assert decision.reason_shared is False


def test_a_stale_refusal_keeps_the_typed_reason(live_server, api_client, django_user_model):
    review = waiting(api_client, "a post two moderators look at", {"hate": 0.7})
    staff(django_user_model, "mia", "moderator")
    staff(django_user_model, "sam", "moderator")
    url = f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/"
    typed, note = "Second line: a slur aimed at the neighbours — «see the reply»", "Same author as ticket 77."

    with chromium() as browser:
        mia, sam = (log_in(browser, live_server, name) for name in ("mia", "sam"))
        mia.goto(url)
        sam.goto(url)
        mia.check("#decide-form input[value=rejected]")
        mia.select_option("#decide-form select[name=category]", "hate")
        mia.check('#reasons-hate input[value="hate:slur"]')
        mia.fill("#decide-form textarea[name=reason]", typed)
        mia.check("#decide-form input[name=share_reason]")
        mia.fill("#decide-form textarea[name=note]", note)

        sam.check("#decide-form input[value=approved]")  # meanwhile another moderator decides it
        sam.click("#decide-submit")
        sam.wait_for_selector(".messagelist")

        mia.click("#decide-submit")
        mia.wait_for_selector(".messagelist")
        message = mia.inner_text(".messagelist")
        kept = {
            "label": mia.locator("#decide-form input[value=rejected]").is_checked(),
            "category": mia.input_value("#decide-form select[name=category]"),
            "canned": mia.locator('#reasons-hate input[value="hate:slur"]').is_checked(),
            "shown": mia.locator("#reasons-hate").is_visible(),
            "reason": mia.input_value("#decide-form textarea[name=reason]"),
            "share": mia.locator("#decide-form input[name=share_reason]").is_checked(),
            "note": mia.input_value("#decide-form textarea[name=note]"),
        }
        status = mia.inner_text("#review-status")
        mia.click("#decide-submit")  # deciding again decides the review as it is now
        mia.wait_for_selector(".messagelist")
        second = mia.inner_text(".messagelist")

    assert "Not overridden: it changed since you opened it: approved by moderator " in message, message
    assert "Nothing was applied" in message and "manual_override" not in message
    assert kept == {"label": True, "category": "hate", "canned": True, "shown": True, "reason": typed, "share": True,
                    "note": note}
    assert "Approved" in status
    assert "Rejected as hate. Undo" in second
    decision = ContentReview.objects.get(pk=review.pk).decision
    assert (decision.label, decision.moderator.username, decision.reason_codes, decision.reason,
            decision.reason_shared) == ("rejected", "mia", ["slur"], typed, True)
    assert ModeratorNote.objects.get(review=review).text == note
