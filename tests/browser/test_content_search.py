"""Search by a word of the content, in a real browser: the moderator types an Indonesian word in
the review list's search box and sees the reviews that contain it, in any form, and only those;
the queue page's search does the same within a queue. The list fits a 1400 px window with long
content and every column (docs/workplace.md, "Search")."""

from __future__ import annotations

import pytest

from tests.moderation.test_content_search import in_language
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff, waiting  # noqa: F401  (shots: a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
# One long word and a long sentence: neither may widen the list past the window.
LONG_WORD = "a" * 400
LONG_TEXT = "dasar kamu bodoh sekali, " + "tidak ada yang mau membaca tulisanmu yang panjang ini " * 40


def test_a_moderator_finds_reviews_by_a_word_of_their_content_and_the_list_fits_1400_px(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    plain = in_language(waiting(api_client, LONG_TEXT, {"harassment": 0.6}), "id")
    affixed = in_language(waiting(api_client, "jangan membodohi orang lain", {"harassment": 0.55}), "id")
    other = in_language(waiting(api_client, "selamat pagi semua", {"harassment": 0.52}), "id")
    long_word = in_language(waiting(api_client, LONG_WORD, {"harassment": 0.51}), "")
    english = in_language(waiting(api_client, "you are a complete idiot", {"harassment": 0.67}), "en")
    staff(django_user_model, "mia", "moderator")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")  # a 1400 px wide window
        page.goto(f"{live_server.url}/admin/moderation/contentreview/")
        page.wait_for_selector("#result_list")
        widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        # Django's list scrolls sideways inside its own box (.results, overflow-x: auto): the page
        # then fits while the last columns hide behind a scrollbar. The table must fit too.
        table = page.evaluate("""() => { const box = document.querySelector('#changelist .results');
            return [box.scrollWidth, box.clientWidth, document.querySelector('#result_list').getBoundingClientRect().right]; }""")
        page.fill("#searchbar", "bodoh")
        page.press("#searchbar", "Enter")
        page.wait_for_selector("#search-rule")
        found = page.inner_text("#result_list")
        rule = page.inner_text("#search-rule")
        found_width = page.evaluate("() => document.documentElement.scrollWidth")
        page.screenshot(path=str(shots / "search.png"))

        page.fill("#searchbar", "idi")
        page.press("#searchbar", "Enter")
        page.wait_for_selector("#search-rule")
        fragment = page.inner_text("#result_list")

        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=low_confidence")
        page.fill("#queue-search-q", "bodoh")
        page.select_option("#queue-filter-language", "id")
        page.click("#queue-search button[type=submit]")
        page.wait_for_selector("#search-rule")
        queued = page.inner_text("#queue-items")
        queue_width = page.evaluate("() => document.documentElement.scrollWidth")

    assert widths[1] == 1400 and widths[0] <= 1400, widths
    assert table[0] <= table[1] and table[2] <= 1400, table
    assert found_width <= 1400 and queue_width <= 1400, (found_width, queue_width)
    assert plain.short_id in found and affixed.short_id in found
    assert other.short_id not in found and long_word.short_id not in found and english.short_id not in found
    assert rule == "Searched by words, and ids."
    assert english.short_id in fragment and plain.short_id not in fragment
    assert plain.short_id in queued and affixed.short_id in queued and other.short_id not in queued
