"""Matched watched terms, highlighted in a content's text, for any moderator page.

    {% load moderation_rules %}
    {% rule_matches review %}                 the whole block: language, highlighted text, rules
    {{ text|highlight_terms:matches }}         only the highlighted text (matches as stored)
    {{ match|words_in:text }}                  the words a match spans, cut from the text
    {{ value|visible }}                        any content string, hidden characters shown
    {{ terms|visible_terms:"added" }}          a list of terms, each in a span of that class

Content text is shown with its hidden characters made visible (moderation.visible_text): a bidi
control or a zero-width character is replaced by a marker, so it never takes effect on the page.

A decision stores where each match lies, never the words (moderation.verdicts.match_record): they
are cut from the content here, so the page shows them while the content exists, and nothing
once it is erased.
"""

from __future__ import annotations

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from moderation.language import Detection
from moderation.models import ContentReview
from moderation.verdicts import match_record, rule_text
from moderation.rules import rule_matches as policy_rule_matches
from moderation.services import policy_active
from moderation.visible_text import Found, find, marked_html, visible_html

register = template.Library()


@register.filter
def highlight_terms(text: str, matches) -> SafeString:
    """`text` escaped, with each matched span in a <mark> naming its rules and terms."""
    return highlighted_html(text, matches, find(text or ""))


@register.filter
def visible(value) -> SafeString:
    """A content string escaped, its hidden characters shown as markers (moderation.visible_text)."""
    return visible_html(str(value) if value is not None else "")


@register.filter
def visible_terms(terms, css_class: str) -> SafeString:
    """Each term in a `<span class="{css_class}">`, escaped, its hidden characters shown; added
    terms with a "+". One call for a whole list: a term editor's diff may show 45,000 terms."""
    opening = f'<span class="{escape(css_class)}">' + ("+" if css_class == "added" else "")
    return mark_safe(" ".join([f"{opening}{visible_html(term)}</span>" for term in terms]))


def highlighted_html(text: str, matches, found: Found) -> SafeString:
    """`text` (cut into `found`) escaped, with each matched span in a <mark> naming its rules and
    terms, and its hidden characters shown. The markers are drawn inside the pieces the stored
    spans cut, so the spans keep their offsets in the text as the matcher read it.

    Overlapping matches ("dasar bodoh" and "bodoh") are marked once, over their union.
    """
    spans: list[list] = []
    # A hash bank's match has no span (an image has no words): it is not marked in the text.
    for m in sorted((m for m in matches or [] if has_span(m)), key=lambda m: (m["start"], -m["end"])):
        label = f'{m["rule"]}: {m["term"]}'
        if spans and m["start"] < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], m["end"])
            spans[-1][2].append(label)
            spans[-1][3] |= {m["action"]}
        else:
            spans.append([m["start"], m["end"], [label], {m["action"]}])
    out, pos = [], 0
    for start, end, labels, actions in spans:
        action = "allow" if actions == {"allow"} else ("reject" if "reject" in actions else "manual_review")
        out.append(marked_html(found, pos, start))
        out.append(format_html('<mark class="rule-match rule-{}" title="{}">{}</mark>', action,
                               "; ".join(dict.fromkeys(labels)), marked_html(found, start, end)))
        pos = end
    out.append(marked_html(found, pos, len(text)))
    return mark_safe("".join(out))  # every piece above is escaped


def has_span(match: dict) -> bool:
    """Whether a stored match lies on words of the text (a rule's), not on an image (a bank's)."""
    return all(isinstance(match.get(key), int) and not isinstance(match.get(key), bool) for key in ("start", "end"))


@register.filter
def words_in(match: dict, text: str) -> str:
    """The words of `text` a stored match spans ("" when the text no longer holds them: erased)."""
    start, end = match.get("start"), match.get("end")
    if not text or not isinstance(start, int) or not isinstance(end, int) or not 0 <= start < end <= len(text):
        return ""
    return text[start:end]


@register.inclusion_tag("moderation/includes/rule_matches.html")
def rule_matches(review: ContentReview) -> dict:
    """The content's detected language and its text with matched terms highlighted: the matches
    stored on the review's decision, or (a moderator's decision, none yet) those of the active
    policy now."""
    content = review.content
    text = rule_text(content)
    decision = review.decision
    if decision is not None and decision.rule_matches:
        matches, source = decision.rule_matches, f"matched under {decision.policy}"
    else:
        policy = policy_active()
        detection = Detection(content.language, tuple(tuple(c) for c in content.language_candidates or ()))
        matches = [match_record(m) for m in policy_rule_matches(policy, text, detection)]
        source = f"terms of the active {policy}"
    matches = [m for m in matches if has_span(m)]  # a bank's are on the media panel (moderation/admin/review_media.py)
    hidden = find(text)
    return {"content": content, "text": text, "matches": matches, "source": source,
            "candidates": content.language_candidates, "hidden": hidden,
            "highlighted": highlighted_html(text, matches, hidden)}
