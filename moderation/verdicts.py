"""A moderation policy applied to a text and a provider result: the verdict. Pure functions, no
database access.

`decide` is the one decision function of the pipeline: the policy's watched-term rules
(moderation.text.rules) beside its thresholds over the model's scores (`evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from moderation.text.language import Detection
from moderation.models import Content, ContentKind, ModerationPolicy, PartRule, ReviewStatus, RuleAction
from moderation.models.definitions import NO_VIOLATION
from moderation.providers import ModerationResult, Rationale
from moderation.text.values import text_values
from moderation.text.rules import RuleMatch, rule_matches

# Worst first: the strictest verdict over all categories wins.
_SEVERITY = {ReviewStatus.REJECTED: 2, ReviewStatus.MANUAL_REVIEW: 1, ReviewStatus.APPROVED: 0}


@dataclass(frozen=True)
class Verdict:
    label: str
    score: float | None
    explanation: str
    rule_matches: tuple[RuleMatch, ...] = field(default=())
    model_used: bool | None = True
    # Hash-bank matches of an image, as the decision stores them (`bank_match_record`).
    bank_matches: tuple[dict, ...] = field(default=())
    # The category scores the policy judged by (`judged_scores`; None: the result's own), and
    # what the decision keeps of a text judged by parts (`parts_record`, Decision.parts).
    scores: dict[str, float] | None = None
    parts: dict = field(default_factory=dict)
    # Why the model judged as it did, when it says (Decision.rationale: Rationale.record()).
    rationale: dict = field(default_factory=dict)

    def stored_matches(self) -> list[dict]:
        """What `Decision.rule_matches` keeps: the rules' matches, then the banks'."""
        return [match_record(match) for match in self.rule_matches] + list(self.bank_matches)


# What a decision stores of a rule match: the policy's rule and term and the span in the text.
# Not the words as written (RuleMatch.matched): they are the user's, erasure could not find every
# quote of them, and the review page cuts them from the content while it exists.
STORED_MATCH_KEYS = ("rule", "category", "action", "language", "term", "start", "end")


def match_record(match: RuleMatch) -> dict:
    """A rule match as `Decision.rule_matches` keeps it (STORED_MATCH_KEYS)."""
    return {key: getattr(match, key) for key in STORED_MATCH_KEYS}


BANK_RULE_PREFIX = "bank:"


def bank_match_record(*, bank: dict, entry_id: int, distance: int) -> dict:
    """A hash-bank match as `Decision.rule_matches` keeps it: STORED_MATCH_KEYS (no language,
    term or span: an image has none), the distance in bits and the entry that matched."""
    return {"rule": f"{BANK_RULE_PREFIX}{bank['name']}", "category": bank["category"], "action": bank["action"], "language": "",
            "term": "", "start": None, "end": None, "distance": distance, "entry": entry_id}


def match_bank(match: dict) -> str:
    """The hash bank a stored match names; "" for a rule's match (which spans words of the text)."""
    rule = match.get("rule")
    return rule.removeprefix(BANK_RULE_PREFIX) if isinstance(rule, str) and rule.startswith(BANK_RULE_PREFIX) else ""


# The names the local model's first version gave two of its categories (docs/design.md, "Policy
# versions"): a version published then set {"harassment": ...} for what the model now scores as
# `insult`. Versions are never edited in place, so its thresholds are read under the new name.
LEGACY_CATEGORY_NAMES = {"insult": "harassment", "threat": "violence"}


def category_override(thresholds: dict, category: str) -> dict:
    """A version's own thresholds for `category`: its entry, or, when it has none, the entry of
    the category's legacy name (LEGACY_CATEGORY_NAMES); {} when neither is set."""
    if category in thresholds:
        return thresholds[category]
    return thresholds.get(LEGACY_CATEGORY_NAMES.get(category, category), {})


def thresholds_for(policy: ModerationPolicy, category: str) -> tuple[float, float]:
    """(review, reject) thresholds of one category: its own (`category_override`, which reads a
    legacy name too), else the version's general ones."""
    override = category_override(policy.category_thresholds, category)
    return (
        float(override.get("review", policy.review_threshold)),
        float(override.get("reject", policy.reject_threshold)),
    )


def evaluate(policy: ModerationPolicy, result: ModerationResult) -> Verdict:
    label, reasons = ReviewStatus.APPROVED, []
    scores = judged_scores(policy, result)
    for category, score in sorted(scores.items()):
        review_at, reject_at = thresholds_for(policy, category)
        if score >= reject_at:
            verdict = ReviewStatus.REJECTED
            reasons.append(f"{category}={score:.3f} >= reject {reject_at}")
        elif score >= review_at:
            verdict = ReviewStatus.MANUAL_REVIEW
            reasons.append(f"{category}={score:.3f} >= review {review_at}")
        else:
            continue
        if _SEVERITY[verdict] > _SEVERITY[label]:
            label = verdict
    if label == ReviewStatus.APPROVED and result.flagged and policy.flagged_label != ReviewStatus.APPROVED:
        label = ReviewStatus(policy.flagged_label)
        reasons.append("flagged by the provider below every threshold")
    top = max(scores.values(), default=None)
    explanation = f"{policy}: " + ("; ".join(reasons) if reasons else "every category below its thresholds")
    if scores != result.category_scores:
        whole = ", ".join(f"{c}={v:.3f}" for c, v in sorted(result.category_scores.items()))
        explanation += f" (judged by parts, {PartRule(policy.part_rule).label.lower()} of {len(result.parts)}; the whole text: {whole})"
    if result.rationale is not None:
        explanation += f"; {rationale_words(result.rationale)}"
    return Verdict(label=label, score=top, explanation=explanation, scores=scores, parts=parts_record(policy, result),
                   rationale=result.rationale.record() if result.rationale is not None else {})


# What an explanation quotes of a model's rationale (Decision.rationale keeps it whole).
RATIONALE_EXPLAINED_CHARS = 500


def rationale_words(rationale: Rationale) -> str:
    """A model's rationale as its decision's explanation says it: the category it named, its
    score, where the passage it quoted lies (offsets into the text the rules read), its words."""
    words = " ".join(rationale.text.split())
    if len(words) > RATIONALE_EXPLAINED_CHARS:
        words = words[:RATIONALE_EXPLAINED_CHARS - 1].rstrip() + "…"
    if rationale.category == NO_VIOLATION:
        return f"the model found no violation: {words}" if words else "the model found no violation"
    where = f", quoting {rationale.start}-{rationale.end}" if rationale.start is not None else ""
    return f"the model's rationale ({rationale.category} {rationale.score:.3f}{where}): {words}"


# --- long texts judged by parts (docs/workplace.md, "Long texts") -------------------------------

_WORST_PARTS = {PartRule.MAX: 1, PartRule.TOP2_MEAN: 2, PartRule.TOP3_MEAN: 3}
MAX_STORED_PARTS = 50


def judged_scores(policy: ModerationPolicy, result: ModerationResult) -> dict[str, float]:
    """The category scores a text is judged by: the whole text's, or, when the provider scored
    its parts, each category's worst part (or the mean of its worst two or three) under the
    policy's `part_rule`. Never below the whole text's own score: a rule only adds what the
    whole diluted."""
    if policy.part_rule == PartRule.WHOLE or not result.parts:
        return dict(result.category_scores)
    worst = _WORST_PARTS[PartRule(policy.part_rule)]
    categories = dict.fromkeys([*result.category_scores, *(c for part in result.parts for c in part.scores)])
    scores = {}
    for category in categories:
        whole = float(result.category_scores.get(category, 0.0))
        found = sorted((float(p.scores[category]) for p in result.parts if category in p.scores), reverse=True)[:worst]
        scores[category] = round(max(whole, sum(found) / len(found)), 6) if found else whole
    return scores


def parts_record(policy: ModerationPolicy, result: ModerationResult) -> dict:
    """What `Decision.parts` keeps of a text judged by parts: the rule, how many parts were
    scored, the whole text's scores and the parts that crossed a review or reject threshold
    (their offsets and the scores over it, the first MAX_STORED_PARTS in text order). {} when
    the provider scored no parts."""
    if not result.parts:
        return {}
    crossed = []
    for part in result.parts:
        over = {c: s for c, s in part.scores.items() if s >= thresholds_for(policy, c)[0]}
        if over:
            level = "reject" if any(s >= thresholds_for(policy, c)[1] for c, s in over.items()) else "review"
            crossed.append({"start": part.start, "end": part.end, "scores": over, "level": level})
    return {"rule": policy.part_rule, "count": len(result.parts), "whole": dict(result.category_scores),
            "crossed": crossed[:MAX_STORED_PARTS], "more": max(0, len(crossed) - MAX_STORED_PARTS)}


# --- rules beside the model -------------------------------------------------------------------

_ACTION_LABEL = {RuleAction.REJECT: ReviewStatus.REJECTED, RuleAction.MANUAL_REVIEW: ReviewStatus.MANUAL_REVIEW}
# A hostile text can match hundreds of times: the explanation names the first few (rule, term)
# pairs, the decision keeps the first matches for highlighting.
MAX_REASONS = 10
MAX_STORED_MATCHES = 100


def model_judges(policy: ModerationPolicy, detection: Detection) -> bool:
    """May the model's score be used for this text? Yes, unless the text surely reads as a
    language the policy says the model cannot judge (no languages listed: it judges them all).
    An unsure detection (short texts often are) leaves the judgement to the model."""
    if not policy.model_languages or not detection.sure:
        return True
    return any(code in policy.model_languages for code, _ in detection.candidates)


def decide(policy: ModerationPolicy, result: ModerationResult, *, text: str, detection: Detection) -> Verdict:
    """The decision for a text: the policy's rules and its thresholds over the model's result.

    The strictest wins, so a `reject` rule rejects even when the model approves; an `allow`
    match only cancels the rule matches inside it. In a language the model cannot judge its
    score is not used: rules decide, else the policy's `unjudged_label`.
    """
    matches = tuple(rule_matches(policy, text, detection))
    label = ReviewStatus.APPROVED
    for match in matches:
        if match.action != RuleAction.ALLOW:
            label = _stricter(label, _ACTION_LABEL[match.action])
    reasons = _rule_reasons(matches)
    if any(m.past_budget for m in matches):
        reasons.append("more rule matches than the match budget: past it, each term's first match counts and "
                       "no allow rule cancels it")
    used = model_judges(policy, detection)
    model = None
    if used:
        model = evaluate(policy, result)
        label = _stricter(label, ReviewStatus(model.label))
        reasons.append(model.explanation.removeprefix(f"{policy}: "))
    else:
        reasons.append(
            f"the model judges only {', '.join(policy.model_languages)} and this text reads as "
            f"{detection.language} ({', '.join(f'{c} {v:.2f}' for c, v in detection.candidates)}): "
            "its score is not used"
        )
        if not any(m.action != RuleAction.ALLOW for m in matches):
            label = ReviewStatus(policy.unjudged_label)
            reasons.append(f"no rule matched: {label.label.lower()}, the policy's choice for unjudged languages")
    return Verdict(
        label=label,
        score=model.score if model is not None else None,
        explanation=f"{policy}: " + "; ".join(reasons),
        rule_matches=matches[:MAX_STORED_MATCHES],
        model_used=used,
        scores=model.scores if model is not None else None,
        parts=model.parts if model is not None else {},
        rationale=model.rationale if model is not None else {},
    )


def _rule_reasons(matches: tuple[RuleMatch, ...]) -> list[str]:
    """One reason per (rule, term), strictest rules first, at most MAX_REASONS of them."""
    seen: dict[tuple[str, str], list[RuleMatch]] = {}
    for match in sorted(matches, key=lambda m: -_SEVERITY.get(_ACTION_LABEL.get(m.action), -1)):
        seen.setdefault((match.rule, match.term), []).append(match)
    reasons = []
    for (rule, term), found in list(seen.items())[:MAX_REASONS]:
        # Named by the policy's own term and the span (start-end) in the text, never by the
        # words as written: those are the user's, and erasure could not find every quote of
        # them (a pattern can match anywhere, at any length). The review page shows the words,
        # cut from the content while it exists (docs/design.md, invariant 16).
        first, times = found[0], f" ({len(found)} times)" if len(found) > 1 else ""
        where = f'term "{term}" at {first.start}-{first.end}'
        if first.action == RuleAction.ALLOW:
            reasons.append(f"rule {rule} allows {where}{times}")
        else:
            reasons.append(f"rule {rule} matched {where} (category {first.category}){times}")
    if len(seen) > MAX_REASONS:
        reasons.append(f"{len(seen) - MAX_REASONS} more rule terms matched")
    return reasons


def _stricter(a: ReviewStatus, b: ReviewStatus) -> ReviewStatus:
    return a if _SEVERITY[a] >= _SEVERITY[b] else b


MEDIA_KINDS = (ContentKind.IMAGE, ContentKind.AUDIO)


def media_decide(policy: ModerationPolicy, result: ModerationResult | None, *, kind: str, media: dict) -> Verdict:
    """The decision for an image or audio: its hash-bank matches (`media["matches"]`, made under
    this very version: moderation/services/media.py) beside a provider's verdict when one judged
    it (`result`). The strictest wins, as for text. With no match and no provider, an image takes
    the policy's `image_fallback` (audio always waits for a human); media that could not be read
    (`media["error"]`) waits for a human, saying why."""
    label, reasons = ReviewStatus.APPROVED, []
    matches = tuple(media.get("matches") or ())
    for match in matches:
        label = _stricter(label, _ACTION_LABEL[match["action"]])
        reasons.append(f"hash bank {match_bank(match)} matched at distance {match['distance']} "
                       f"(category {match['category']})")
    if media.get("error"):
        label = _stricter(label, ReviewStatus.MANUAL_REVIEW)
        reasons.append(f"the {kind} could not be read: {media['error']}")
    elif kind == ContentKind.IMAGE and media.get("quality") is not None and media["quality"] < media.get("min_quality", 0):
        reasons.append(f"its PDQ quality is {media['quality']} (under {media['min_quality']}): no bank can match it")
    if result is not None:
        model = evaluate(policy, result)
        label = _stricter(label, ReviewStatus(model.label))
        reasons.append(model.explanation.removeprefix(f"{policy}: "))
    elif not matches and not media.get("error"):
        fallback = ReviewStatus(policy.image_fallback) if kind == ContentKind.IMAGE else ReviewStatus.MANUAL_REVIEW
        label = _stricter(label, fallback)
        what = "the policy's image_fallback" if kind == ContentKind.IMAGE else "audio always waits for a human"
        reasons.append(f"no hash bank matched and no provider here judges {kind}: {fallback.label.lower()}, {what}")
    return Verdict(
        label=label,
        score=max(result.category_scores.values(), default=None) if result is not None else None,
        explanation=f"{policy}: " + "; ".join(reasons),
        model_used=True if result is not None else None,
        bank_matches=matches,
    )


def rule_text(content: Content) -> str:
    """The text rules read: a text's own, or the string values of metadata, one per line. As
    written: the rules and the local model read it in its normal form (docs/design.md, "The
    normal form") and report their spans in it, so a stored span always points at this text."""
    if content.kind == ContentKind.TEXT:
        return content.text
    if content.kind == ContentKind.METADATA:
        return "\n".join(text_values(content.metadata))
    return ""


RESTRICTED_EXPLANATION = ("Its author is suspended or banned: new content of a restricted author is never "
                          "approved automatically.")


def restricted_verdict(policy: ModerationPolicy, verdict: Verdict) -> Verdict:
    """The verdict for content submitted while its author was suspended or banned: a rejection
    stands; anything else takes the policy's `while_restricted` (a human looks, in the
    "Restricted authors" queue, or it is rejected) and says why (docs/design.md, "Authors")."""
    if verdict.label == ReviewStatus.REJECTED:
        return verdict
    label = ReviewStatus.REJECTED if policy.while_restricted == "reject" else ReviewStatus.MANUAL_REVIEW
    return replace(verdict, label=label,
                   explanation=f"{RESTRICTED_EXPLANATION} {verdict.explanation}".strip())


NOTICE_EXPLANATION = "A DSA notice or a trusted flagger reported it: a human decides."


def notice_verdict(verdict: Verdict) -> Verdict:
    """The verdict for content a notice was filed on before its result landed: whatever the
    result says, a human decides (never approved automatically), the model's verdict shown
    beside why (docs/design.md, "Reports")."""
    return replace(verdict, label=ReviewStatus.MANUAL_REVIEW,
                   explanation=f"{NOTICE_EXPLANATION} {verdict.explanation}".strip())
