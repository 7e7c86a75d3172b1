"""The list, the queues and the review page show what a browser would hide of a content's text
(moderation/text/visible.py): a bidi control or a zero-width character as a marker in its
place, never raw, and the review page says the text contains them."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import ContentReview
from tests.moderation import test_workplace_pages
from tests.moderation.test_workplace_pages import LIST, QUEUES, page_of, submitted
from tests.helpers import examples

moderator = test_workplace_pages.moderator  # a fixture: a logged-in moderator's test client

RAW_HIDDEN = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u00ad\U000e0000-\U000e007f]")
BIDI_MARKER = '<span class="hidden-char hidden-bidi" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>'
ZWSP_MARKER = '<span class="hidden-char hidden-invisible" title="U+200B ZERO WIDTH SPACE">⟨U+200B⟩</span>'


def content_panel(html: str) -> str:
    """The review page's content panel: from its opening to the review summary after it."""
    start = html.index('<div class="content-panel" id="content">')
    return html[start:html.index('<dl class="review-summary">', start)]


@pytest.mark.django_db
class TestTheReviewPage:
    def test_a_reversed_word_shows_its_marker_and_the_notice_and_no_raw_control(self, moderator, api_client):
        review = submitted(api_client, text="\u202eesrever")
        html = moderator.get(page_of(review)).content.decode()
        panel = content_panel(html)
        assert f"{BIDI_MARKER}esrever" in panel
        assert ('<p class="hidden-notice" id="hidden-notice" role="note"><strong>Hidden characters.</strong> '
                "This text contains 1 bidirectional control, shown as ⟨U+…⟩ in place of each.</p>") in panel
        assert RAW_HIDDEN.search(panel) is None

    def test_a_zero_width_space_and_a_cyrillic_letter_are_shown_and_counted(self, moderator, api_client):
        review = submitted(api_client, text="you id\u200biot, you idіot \u202eesrever")
        panel = content_panel(moderator.get(page_of(review)).content.decode())
        # "idiot" is a default term (moderation/data/terms): its match is highlighted, the marker inside.
        assert re.search(f'you <mark class="rule-match rule-manual_review" title="[^"]*idiot">id{re.escape(ZWSP_MARKER)}iot</mark>',
                         panel), panel
        assert ('id<span class="script-mix hidden-mixed_script" title="Cyrillic letter in a Latin word: '
                'U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I">і</span>ot') in panel
        assert ("This text contains 1 bidirectional control and 1 zero-width or invisible character, shown as ⟨U+…⟩ "
                "in place of each. It has 1 word mixing scripts, the letters of the other script highlighted: "
                "“idіot” (і Cyrillic in a Latin word).") in panel
        assert RAW_HIDDEN.search(panel) is None

    def test_a_watched_term_after_a_control_is_highlighted_where_it_is_with_its_foreign_letter_inside(
        self, moderator, api_client
    ):
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=[
            {"category": "insult", "action": "manual_review", "language": "", "terms": ["bodoh"]}])
        review = submitted(api_client, text="\u202eesrever id\u200biot dasar bоdoh")  # a Cyrillic о
        panel = content_panel(moderator.get(page_of(review)).content.decode())
        # The normal form folds the Cyrillic о (moderation/text/normal.py); the match's span, counted in the text with
        # the control, lands on "bоdoh" and not one character off, the letter's highlight inside.
        foreign = ('<span class="script-mix hidden-mixed_script" title="Cyrillic letter in a Latin word: '
                   'U+043E CYRILLIC SMALL LETTER O">о</span>')
        assert re.search(f'dasar <mark class="rule-match rule-manual_review" title="[^"]*bodoh">b{re.escape(foreign)}doh</mark>',
                         panel), panel
        assert f"“b{foreign}doh”" in panel  # the matched words, in the list below the text
        assert RAW_HIDDEN.search(panel) is None

    def test_metadata_values_and_keys_show_their_hidden_characters(self, moderator, api_client):
        review = submitted(api_client, kind="metadata", metadata={"na\u202eme": "\u202eesrever", "bio": {"x": "a\u200bb"}})
        panel = content_panel(moderator.get(page_of(review)).content.decode())
        assert f"na{BIDI_MARKER}me" in panel and f"{BIDI_MARKER}esrever" in panel and f"a{ZWSP_MARKER}b" in panel
        assert RAW_HIDDEN.search(panel) is None

    def test_plain_text_has_no_notice_and_no_marker(self, moderator, api_client):
        review = submitted(api_client, text="Привет, 日本語, naïve café, 👩\u200d💻")
        html = moderator.get(page_of(review)).content.decode()
        assert 'id="hidden-notice"' not in html and "hidden-char" not in content_panel(html)
        assert "Привет, 日本語, naïve café, 👩\u200d💻" in content_panel(html)


@pytest.mark.django_db
def test_the_list_and_the_queue_show_the_markers_in_the_excerpt(moderator, api_client):
    review = submitted(api_client, text="\u202eesrever and id\u200biot")
    listed = moderator.get(LIST).content.decode()
    queued = moderator.get(f"{QUEUES}?queue={review.queue}").content.decode()
    for html in (listed, queued):
        assert f'<span class="excerpt">{BIDI_MARKER}esrever and id{ZWSP_MARKER}iot</span>' in html
        assert "\u202e" not in html and "\u200b" not in html
    assert ".hidden-char {" in listed  # the badge's style, under the page's policy (an inline style block)


WEIRD = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=60)
FEW = settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.django_db
@FEW
@given(text=WEIRD.filter(str.strip) | st.lists(st.sampled_from(
    ["\u202e", "\u2066", "\u200b", "\u200d", "👩", "💻", "і", "a", "\U000e0067", "\U000e007f", "🏴", "\ufe0f", "<b>", "&",
     " "]), min_size=1, max_size=20).map("".join).filter(str.strip))
@example(text="\u202eesrever")
def test_any_text_renders_on_the_list_and_the_review_page_with_no_raw_bidi_control(moderator, api_client, text):
    review = submitted(api_client, text=text, external_id=f"weird-{ContentReview.objects.count()}")
    page = moderator.get(page_of(review))
    assert page.status_code == 200
    panel = content_panel(page.content.decode())
    assert re.search("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", panel) is None
    listed = moderator.get(LIST)
    assert listed.status_code == 200
