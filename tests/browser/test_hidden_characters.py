"""A bidi text in a real browser: the review list and the review page show the override as a
marker, the word reads as it was written ("esrever", never "reverse"), and the page says the
text contains a bidirectional control. With UPDATE_SCREENSHOTS=1 the screenshot goes to
docs/screenshots/."""

from __future__ import annotations

import pytest

from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff, waiting  # noqa: F401  (shots: a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
# The marker's colours against each other: a badge the moderator cannot miss or misread.
BADGE = "element => [getComputedStyle(element).color, getComputedStyle(element).backgroundColor]"


def test_a_reversed_word_is_shown_with_its_marker_and_the_page_says_so(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    review = waiting(api_client, "\u202eesrever", {"harassment": 0.55})
    split = waiting(api_client, "you id\u200biot", {"harassment": 0.6})
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        page.wait_for_selector("#result_list")
        listed = page.inner_text("#result_list")

        page.goto(f"{live_server.url}/admin/moderation/contentreview/{review.pk}/timeline/")
        page.wait_for_selector("#content-text")
        text, notice = page.inner_text("#content-text"), page.inner_text("#hidden-notice")
        badge = page.eval_on_selector("#content-text .hidden-char", BADGE)
        hover = page.get_attribute("#content-text .hidden-char", "title")
        # What the browser lays out: the marker first, then the word left to right as typed.
        first_left = page.evaluate("""() => {
            const text = document.querySelector('#content-text');
            const marker = text.querySelector('.hidden-char').getBoundingClientRect();
            const range = document.createRange();
            range.setStart(text.lastChild, 0); range.setEnd(text.lastChild, 1);   // the "e" of esrever
            const e = range.getBoundingClientRect();
            range.setStart(text.lastChild, 6); range.setEnd(text.lastChild, 7);   // its final "r"
            return [marker.right <= e.left + 0.5, e.left < range.getBoundingClientRect().left];
        }""")
        page.locator("#rule-matches").screenshot(path=str(shots / "hidden-characters.png"))

        page.goto(f"{live_server.url}/admin/moderation/contentreview/{split.pk}/timeline/")
        page.wait_for_selector("#content-text")
        split_text = page.inner_text("#content-text")

    assert "⟨U+202E⟩esrever" in listed and "you id⟨U+200B⟩iot" in listed
    assert text == "⟨U+202E⟩esrever" and "reverse" not in text
    assert notice == "Hidden characters. This text contains 1 bidirectional control, shown as ⟨U+…⟩ in place of each."
    assert first_left == [True, True]  # no override took effect: "esrever" runs left to right after its marker
    assert hover == "U+202E RIGHT-TO-LEFT OVERRIDE"
    assert badge == ["rgb(255, 255, 255)", "rgb(91, 33, 182)"]
    assert split_text == "you id⟨U+200B⟩iot"
