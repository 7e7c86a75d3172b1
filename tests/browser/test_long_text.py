"""A long text in a real browser: the sentences the local model found offensive are highlighted in
the content box, which scrolls to the first on load (the page's own script policy, from a static
file), and "Next flagged passage" goes to the next. With UPDATE_SCREENSHOTS=1 the screenshot goes
to docs/screenshots/."""

from __future__ import annotations

import pytest

from moderation import tasks
from moderation.models import ContentReview
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.helpers import submit
from tests.moderation.test_long_texts import GARDEN

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
FIRST = "<b>Honestly</b> the new treasurer is a fucking id\u200biot and a worthless piece of shit."
SECOND = "Whoever took the wheelbarrow is a thieving bastard, fuck you."
TEXT = GARDEN * 12 + FIRST + " " + GARDEN * 10 + SECOND + " " + GARDEN * 4

# Where a flagged part lies: inside the content box's visible area, and inside the window.
IN_VIEW = """element => {
    const box = document.getElementById('content-text').getBoundingClientRect();
    const part = element.getBoundingClientRect();
    return {inBox: part.top >= box.top && part.bottom <= box.bottom,
            inWindow: part.top >= 0 && part.bottom <= window.innerHeight,
            scrolled: document.getElementById('content-text').scrollTop,
            current: element.classList.contains('flagged-current'),
            colours: [getComputedStyle(element).color, getComputedStyle(element).backgroundColor]};
}"""


def test_a_long_text_shows_its_bad_sentence_highlighted_and_scrolled_into_view(
    live_server, api_client, django_user_model, settings, shots  # noqa: F811
):
    settings.MODERATION_PROVIDER = "local"
    review = submit(api_client, text=TEXT)
    tasks.moderate_review(review.pk)
    review = ContentReview.objects.select_related("decision").get(pk=review.pk)
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        errors = []  # a script error, or a script or style the page's policy refused
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        page.wait_for_selector("#content-text .flagged-part.flagged-current")
        first = page.eval_on_selector("#flagged-part-0", IN_VIEW)
        texts = page.eval_on_selector_all("#content-text .flagged-part", "parts => parts.map(p => p.innerText)")
        notice = page.inner_text("#flagged-notice")
        page.locator("#rule-matches").screenshot(path=str(shots / "long-text.png"))
        page.click("#next-flagged-part")
        second = page.eval_on_selector("#flagged-part-1", IN_VIEW)
        first_after = page.eval_on_selector("#flagged-part-0", "e => e.classList.contains('flagged-current')")

    assert review.status == "rejected" and review.decision.parts["whole"]["insult"] < 0.3
    assert texts == ["<b>Honestly</b> the new treasurer is a fucking id⟨U+200B⟩iot and a worthless piece of shit.", SECOND]
    assert first["scrolled"] > 0 and first["inBox"] and first["inWindow"] and first["current"]
    assert first["colours"] == ["rgb(17, 17, 17)", "rgb(253, 226, 226)"]
    assert second["inBox"] and second["inWindow"] and second["current"] and second["scrolled"] > first["scrolled"]
    assert first_after is False and errors == []
    assert notice.startswith("Judged by parts. 2 of the ") and (
        f"crossed a threshold (the whole text: hate {review.decision.parts['whole']['hate']:.3f}" in notice)
