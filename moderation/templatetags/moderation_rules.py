"""Matched watched terms, highlighted in a content's text, for any moderator page.

    {% load moderation_rules %}
    {% rule_matches review %}                 the whole block: language, highlighted text, rules
    {{ text|highlight_terms:matches }}         only the highlighted text (matches as stored)
    {{ match|words_in:text }}                  the words a match spans, cut from the text
    {{ match|rule_in_words }}                  what the matched rule does, in words
    {{ value|visible }}                        any content string, hidden characters shown
    {{ terms|visible_terms:"added" }}          a list of terms, each in a span of that class

A long text's sentences that crossed a threshold (Decision.parts, moderation.verdicts.parts_record),
and the passage a model quoted for its rationale (Decision.rationale, the `llm` provider's), are
highlighted in the same text, and the page scrolls its text to the first of them
(moderation/static/moderation/flagged_parts.js: a file, so the page's script policy needs no nonce).

Content text is shown with its hidden characters made visible (moderation.text.visible): a bidi
control or a zero-width character is replaced by a marker, so it never takes effect on the page.

A decision stores where each match lies, never the words (moderation.verdicts.match_record): they
are cut from the content here, so the page shows them while the content exists, and nothing
once it is erased.
"""

from __future__ import annotations

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from moderation.text.language import Detection
from moderation.models import ContentKind, ContentReview, Decision, DecisionSource
from moderation.verdicts import match_record, rule_text
from moderation.text.rules import rule_matches as policy_rule_matches
from moderation.services import policy_active
from moderation.text.visible import Found, find, marked_html, visible_html

register = template.Library()


@register.filter
def highlight_terms(text: str, matches) -> SafeString:
    """`text` escaped, with each matched span in a <mark> naming its rules and terms."""
    return highlighted_html(text, matches, find(text or ""))


@register.filter
def visible(value) -> SafeString:
    """A content string escaped, its hidden characters shown as markers (moderation.text.visible)."""
    return visible_html(str(value) if value is not None else "")


@register.filter
def visible_terms(terms, css_class: str) -> SafeString:
    """Each term in a `<span class="{css_class}">`, escaped, its hidden characters shown; added
    terms with a "+". One call for a whole list: a term editor's diff may show 45,000 terms."""
    opening = f'<span class="{escape(css_class)}">' + ("+" if css_class == "added" else "")
    return mark_safe(" ".join([f"{opening}{visible_html(term)}</span>" for term in terms]))


def highlighted_html(text: str, matches, found: Found, parts=(), quoted=()) -> SafeString:
    """`text` (cut into `found`) escaped, with each matched span in a <mark> naming its rules and
    terms, each stored part that crossed a threshold (`parts`: Decision.parts["crossed"]) and the
    passage a model quoted (`quoted`: `quoted_spans`) in a highlighted span, and its hidden
    characters shown. The markers are drawn inside the pieces the stored spans cut, so the spans
    keep their offsets in the text as the matcher read it.

    Overlapping matches ("dasar bodoh" and "bodoh") are marked once, over their union; so are
    overlapping parts. A match that crosses a part's edge is marked on each side of it, so the
    elements nest.
    """
    spans = _merged((m["start"], m["end"], f'{m["rule"]}: {m["term"]}', m["action"])
                    for m in matches or [] if has_span(m))  # a bank's match has no span (an image has no words)
    out, pos = [], 0
    for n, (start, end, titles, levels) in enumerate(_merged([*flagged_spans(parts, len(text)), *quoted])):
        level = "reject" if "reject" in levels else ("review" if "review" in levels else "quote")
        out.append(_marked_terms(found, spans, pos, start))
        out.append(format_html('<span class="flagged-part flagged-{}" id="flagged-part-{}" title="{}">{}</span>', level, n,
                               "; ".join(dict.fromkeys(titles)), _marked_terms(found, spans, start, end)))
        pos = end
    out.append(_marked_terms(found, spans, pos, len(text)))
    return mark_safe("".join(out))  # every piece above is escaped


def _merged(spans) -> list[list]:
    """(start, end, label, kind) spans joined where they overlap: [start, end, labels, kinds]."""
    joined: list[list] = []
    for start, end, label, kind in sorted(spans, key=lambda s: (s[0], -s[1])):
        if joined and start < joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], end)
            joined[-1][2].append(label)
            joined[-1][3] |= {kind}
        else:
            joined.append([start, end, [label], {kind}])
    return joined


def _marked_terms(found: Found, spans: list[list], low: int, high: int) -> SafeString:
    """The characters low..high with the rule matches among `spans` marked (cut at low and high)."""
    out, pos = [], low
    for start, end, labels, actions in spans:
        start, end = max(start, low), min(end, high)
        if start >= end:
            continue
        action = "allow" if actions == {"allow"} else ("reject" if "reject" in actions else "manual_review")
        out.append(marked_html(found, pos, start))
        out.append(format_html('<mark class="rule-match rule-{}" title="{}">{}</mark>', action,
                               "; ".join(dict.fromkeys(labels)), marked_html(found, start, end)))
        pos = end
    out.append(marked_html(found, pos, high))
    return mark_safe("".join(out))  # every piece above is escaped


def flagged_spans(parts, length: int) -> list[tuple[int, int, str, str]]:
    """(start, end, title, level) of each stored part that crossed a threshold and lies inside a
    text of `length` characters (a damaged or foreign record is left out, never raised on)."""
    spans = []
    for part in parts if isinstance(parts, list | tuple) else ():
        if not isinstance(part, dict) or not has_span(part) or not 0 <= part["start"] < part["end"] <= length:
            continue
        scores = part.get("scores") if isinstance(part.get("scores"), dict) else {}
        title = "Crossed a threshold: " + ", ".join(
            f"{c} {s:.3f}" for c, s in sorted(scores.items()) if isinstance(s, int | float) and not isinstance(s, bool))
        spans.append((part["start"], part["end"], title, "reject" if part.get("level") == "reject" else "review"))
    return spans


def quoted_spans(rationale, length: int) -> list[tuple[int, int, str, str]]:
    """The passage a model quoted for its rationale (Decision.rationale), as a highlighted span
    (start, end, title, "quote") when it lies inside a text of `length` characters; [] for none,
    or for a damaged or foreign record (never raised on)."""
    if not isinstance(rationale, dict) or not has_span(rationale) or not 0 <= rationale["start"] < rationale["end"] <= length:
        return []
    return [(rationale["start"], rationale["end"], f"Quoted by the model for {rationale.get('category', '')}", "quote")]


def has_span(match: dict) -> bool:
    """Whether a stored match lies on words of the text (a rule's), not on an image (a bank's)."""
    return all(isinstance(match.get(key), int) and not isinstance(match.get(key), bool) for key in ("start", "end"))


RULE_ACTION_WORDS = {"reject": "Rejects", "manual_review": "Sends to a human", "allow": "An exception"}


@register.filter
def rule_in_words(match: dict) -> str:
    """What a matched rule does, in words ("Sends to a human, id only"): a moderator reads the
    rule, its name (`insult:manual_review:id`) stays in the element's title."""
    action = RULE_ACTION_WORDS.get(match.get("action"), str(match.get("action", "")))
    return f"{action}, {match['language']} only" if match.get("language") else action


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
    policy now; and the sentences of a long text that crossed a threshold (`judged_parts`)."""
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
    parts = model_kept(review, "parts") if content.kind == ContentKind.TEXT else {}
    crossed = flagged_spans(parts.get("crossed"), len(text))
    rationale = model_kept(review, "rationale")
    quoted = quoted_spans(rationale, len(text))
    return {"content": content, "text": text, "matches": matches, "source": source,
            "candidates": content.language_candidates, "hidden": hidden, "parts": parts, "crossed": crossed,
            "rationale": rationale, "quoted": quoted,
            "quote": words_in(rationale, text) if quoted else "",
            "highlighted": highlighted_html(text, matches, hidden, parts.get("crossed"), quoted)}


def model_kept(review: ContentReview, field: str) -> dict:
    """What the model's decision of `review` kept in `field` (Decision.parts, a text judged by
    parts; Decision.rationale, a model's reasons): the review's own decision's when the model made
    it, or, when a moderator (or the system) decided since, the newest one's that has it, so the
    offending passages stay highlighted (an appeal, a report). {} for none."""
    decision = review.decision
    if decision is None or decision.source == DecisionSource.PROVIDER:
        kept = getattr(decision, field) if decision is not None else {}
    else:
        kept = Decision.objects.filter(review=review).exclude(**{field: {}}).order_by("-id").values_list(
            field, flat=True).first() or {}
    return kept if isinstance(kept, dict) else {}
