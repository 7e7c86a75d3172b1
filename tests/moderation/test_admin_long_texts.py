"""The review page highlights the sentences of a long text that crossed a threshold
(Decision.parts), escaped, with the hidden-character markers and the watched terms inside them,
and any stored parts and any text render without error (docs/workplace.md, "Long texts")."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import ContentReview
from moderation.providers import ModerationInput, get_provider
from moderation.templatetags.moderation_rules import highlighted_html, quoted_spans
from moderation.text.visible import find
from tests.moderation import test_workplace_pages
from tests.moderation.test_admin_hidden_characters import ZWSP_MARKER, content_panel
from tests.moderation.test_long_texts import GARDEN
from tests.moderation.test_workplace_pages import page_of
from tests.helpers import examples

moderator = test_workplace_pages.moderator  # a fixture: a logged-in moderator's test client

BAD = "<b>You</b> are a fucking id\u200biot and a worthless piece of shit."


def judged_by_the_local_model(client, text: str) -> ContentReview:
    """A review decided by the real local model, called as the job calls it (moderation/services/dispatch.py)."""
    review, _ = services.review_submit(client=client, external_id="long-1", kind="text", text=text)
    request = services.review_claim(review_id=review.pk, worker_id="w")
    result = get_provider("local").moderate(ModerationInput(idempotency_key=str(request.idempotency_key),
                                                              content_type="text", text=text))
    services.review_finalize(idempotency_key=request.idempotency_key, result=result, cause="provider_result")
    return ContentReview.objects.select_related("decision").get(pk=review.pk)


@pytest.mark.django_db
def test_the_sentence_that_crossed_is_highlighted_escaped_with_its_markers_and_terms_inside(moderator, api_client):
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, term_lists=[
        {"category": "insult", "action": "manual_review", "language": "", "terms": ["piece of shit. Our"]}])
    review = judged_by_the_local_model(api_client, GARDEN * 6 + BAD + " " + GARDEN * 6)
    assert review.status == "rejected" and review.decision.parts["whole"]["insult"] < 0.28

    panel = content_panel(moderator.get(page_of(review)).content.decode())

    # The term spans the part's end: marked on each side of it, so the elements nest.
    mark = '<mark class="rule-match rule-manual_review" title="insult:manual_review: piece of shit. Our">'
    (crossed,) = review.decision.parts["crossed"]
    title = f'Crossed a threshold: insult {crossed["scores"]["insult"]:.3f}'  # the model's score of the part
    assert (f'<span class="flagged-part flagged-reject" id="flagged-part-0" title="{title}">'
            f"&lt;b&gt;You&lt;/b&gt; are a fucking id{ZWSP_MARKER}iot and a worthless {mark}piece of shit.</mark></span>"
            f"{mark} Our</mark> community garden") in panel
    assert panel.count('class="flagged-part') == 1
    assert ("<strong>Judged by parts.</strong>\n  1 of the 25 sentences or passages the model scored crossed a threshold "
            "(the whole text: hate ") in panel  # every category the model scored, as PostgreSQL orders its keys
    assert '<script src="/static/moderation/flagged_parts.js" defer></script>' in panel
    assert "\u200b" not in panel and "<b>You" not in panel and "&amp;lt;" not in panel


@pytest.mark.django_db
def test_a_moderators_decision_keeps_the_models_highlights_in_view(moderator, api_client):
    review = judged_by_the_local_model(api_client, GARDEN * 3 + BAD + " " + GARDEN)
    services.review_override(review_id=review.pk, label="approved", reason="quoted in a report about abuse",
                             moderator=moderator.user, expected_version=review.version)
    review.refresh_from_db()
    assert review.decision.source == "moderator" and review.decision.parts == {}
    assert 'id="flagged-part-0"' in content_panel(moderator.get(page_of(review)).content.decode())


@pytest.mark.django_db
def test_a_short_text_has_no_parts_notice_or_script(moderator, api_client):
    review = judged_by_the_local_model(api_client, "shut up you fucking idiot")
    panel = content_panel(moderator.get(page_of(review)).content.decode())
    assert review.decision.parts == {} and "flagged-part" not in panel and "flagged_parts.js" not in panel


class Tags(HTMLParser):
    """Checks that elements nest and collects the text a browser would show."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.started, self.text, self.flagged = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        self.started.append(tag)
        self.flagged += "flagged-part" in (dict(attrs).get("class") or "")

    def handle_endtag(self, tag):
        assert self.open and self.open.pop() == tag, (tag, self.open)

    def handle_data(self, data):
        self.text.append(data)


def parsed(markup: str) -> Tags:
    tags = Tags()
    tags.feed(markup)
    tags.close()
    assert tags.open == []
    return tags


SPAN = st.tuples(st.integers(-3, 80), st.integers(-3, 80))
PART = st.one_of(
    st.builds(lambda s, level, score: {"start": s[0], "end": s[1], "level": level, "scores": {"profanity": score}},
              SPAN, st.sampled_from(["reject", "review", "??", None]), st.floats(allow_nan=True)),
    st.dictionaries(st.sampled_from(["start", "end", "scores", "level"]),
                    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3), st.lists(st.integers()))),
    st.none(), st.integers(), st.text(max_size=3),
)
MATCH = st.builds(lambda s, action: {"start": min(s), "end": max(s) + 1, "rule": "r<x>", "term": "t&", "action": action},
                  st.tuples(st.integers(0, 60), st.integers(0, 60)), st.sampled_from(["reject", "manual_review", "allow"]))
TEXT = st.one_of(st.text(max_size=80), st.lists(st.sampled_from(
    ["\u202e", "\u200b", "👩\u200d💻", "і", "a", "<b>", "&amp;", ". ", "\U000e0067", "\ufe0f", " ", '"', "idiot"]),
    max_size=30).map("".join))


def within(text: str):
    """Parts as the provider stores them, inside `text` (start < end <= len)."""
    if not text:
        return st.just([])
    return st.lists(st.builds(
        lambda a, b, level, score: {"start": min(a, b), "end": max(a, b) + 1, "level": level, "scores": {"profanity": score}},
        st.integers(0, len(text) - 1), st.integers(0, len(text) - 1), st.sampled_from(["reject", "review"]),
        st.floats(0, 1)), max_size=5)


@settings(max_examples=examples(300), deadline=None)
@given(TEXT.flatmap(lambda text: st.tuples(st.just(text), within(text) | st.lists(PART, max_size=6) | st.none()
                                           | st.text(max_size=4))), st.lists(MATCH, max_size=4))
def test_any_text_with_any_stored_parts_renders_nested_and_shows_the_same_text(drawn, matches):
    text, parts = drawn
    matches = [m for m in matches if m["end"] <= len(text)]
    found = find(text)
    plain = parsed(highlighted_html(text, matches, found))
    marked = parsed(highlighted_html(text, matches, found, parts))
    assert "".join(marked.text) == "".join(plain.text)  # highlighting adds elements, never changes the text
    valid = [p for p in parts if isinstance(p, dict) and type(p.get("start")) is int and type(p.get("end")) is int
             and 0 <= p["start"] < p["end"] <= len(text)] if isinstance(parts, list) else []
    assert (marked.flagged > 0) == bool(valid)
    assert re.search("[\u202a-\u202e\u2066-\u2069\u200b]", "".join(marked.text)) is None
    assert set(marked.started) <= {"span", "mark"}  # a "<b>" of the text is text, never an element


RATIONALE = st.one_of(
    st.builds(lambda s, category: {"start": s[0], "end": s[1], "category": category, "score": 0.9, "text": "why"},
              SPAN, st.one_of(st.text(max_size=4), st.integers(), st.none())),
    st.dictionaries(st.sampled_from(["start", "end", "category"]),
                    st.one_of(st.none(), st.booleans(), st.integers(-3, 80), st.text(max_size=3))),
    st.none(), st.text(max_size=3), st.integers(),
)


@settings(max_examples=examples(300), deadline=None)
@given(TEXT.flatmap(lambda text: st.tuples(st.just(text), within(text))), RATIONALE, st.lists(MATCH, max_size=4))
def test_a_models_quoted_span_renders_beside_the_parts_and_shows_the_same_text(drawn, rationale, matches):
    text, parts = drawn
    matches = [m for m in matches if m["end"] <= len(text)]
    found = find(text)
    quoted = quoted_spans(rationale, len(text))
    plain = parsed(highlighted_html(text, matches, found, parts))
    marked = parsed(highlighted_html(text, matches, found, parts, quoted))
    assert "".join(marked.text) == "".join(plain.text)  # the quote adds an element, never changes the text
    valid = (isinstance(rationale, dict) and type(rationale.get("start")) is int and type(rationale.get("end")) is int
             and 0 <= rationale["start"] < rationale["end"] <= len(text))
    assert bool(quoted) == valid
    assert (marked.flagged > 0) == (bool(parts) or valid)
