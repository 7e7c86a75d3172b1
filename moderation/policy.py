"""Applying a moderation policy: to a text and a provider result, and to a review entering a human
queue. Pure functions, no database access.

`decide` is the one decision function of the pipeline: the policy's watched-term rules
(moderation.rules) beside its thresholds over the model's scores (`evaluate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from moderation.language import Detection
from moderation.models import (
    DECISION_LABELS,
    Cause,
    Content,
    ContentKind,
    ModerationPolicy,
    ReviewQueue,
    ReviewStatus,
    RuleAction,
)
from moderation.providers import ModerationResult
from moderation.providers.base import text_values
from moderation.rules import RuleMatch, rule_matches, validate_term_lists

REPORT_THRESHOLD_DEFAULT = 3
REPORT_THRESHOLD_MAX = 10_000

# Worst first: the strictest verdict over all categories wins.
_SEVERITY = {ReviewStatus.REJECTED: 2, ReviewStatus.MANUAL_REVIEW: 1, ReviewStatus.APPROVED: 0}


@dataclass(frozen=True)
class Verdict:
    label: str
    score: float | None
    explanation: str
    rule_matches: tuple[RuleMatch, ...] = field(default=())
    model_used: bool = True


# What a decision stores of a rule match: the policy's rule and term and the span in the text.
# Not the words as written (RuleMatch.matched): they are the user's, erasure could not find every
# quote of them, and the review page cuts them from the content while it exists.
STORED_MATCH_KEYS = ("rule", "category", "action", "language", "term", "start", "end")


def match_record(match: RuleMatch) -> dict:
    """A rule match as `Decision.rule_matches` keeps it (STORED_MATCH_KEYS)."""
    return {key: getattr(match, key) for key in STORED_MATCH_KEYS}


def policy_categories(policy: ModerationPolicy) -> list[str]:
    """The violation categories of a policy version (what reports, rules and moderators may name):
    its list, any category it sets thresholds for, and its rules' categories (importing a term list
    for a new category creates that category)."""
    return sorted({*policy.categories, *policy.category_thresholds, *(r["category"] for r in policy.term_lists)})


def thresholds_for(policy: ModerationPolicy, category: str) -> tuple[float, float]:
    """(review, reject) thresholds of one category."""
    override = policy.category_thresholds.get(category, {})
    return (
        float(override.get("review", policy.review_threshold)),
        float(override.get("reject", policy.reject_threshold)),
    )


def evaluate(policy: ModerationPolicy, result: ModerationResult) -> Verdict:
    label, reasons = ReviewStatus.APPROVED, []
    for category, score in sorted(result.category_scores.items()):
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
    top = max(result.category_scores.values(), default=None)
    explanation = f"{policy}: " + ("; ".join(reasons) if reasons else "every category below its thresholds")
    return Verdict(label=label, score=top, explanation=explanation)


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
        score=max(result.category_scores.values(), default=None) if used else None,
        explanation=f"{policy}: " + "; ".join(reasons),
        rule_matches=matches[:MAX_STORED_MATCHES],
        model_used=used,
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


def rule_text(content: Content) -> str:
    """The text rules read: a text's own, or the string values of metadata, one per line."""
    if content.kind == ContentKind.TEXT:
        return content.text
    if content.kind == ContentKind.METADATA:
        return "\n".join(text_values(content.metadata))
    return ""


# --- validation ---------------------------------------------------------------------------------


def validate_policy(fields: dict) -> list[str]:
    """Every error in a policy version's fields (empty when it may be published).

    The one policy validator: `policy_publish` and the admin's policy form both call it, so a
    version that one of them accepts the other accepts too.
    """
    errors = validate_category_thresholds(fields.get("category_thresholds") or {})
    review, reject = fields.get("review_threshold"), fields.get("reject_threshold")
    if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in (review, reject)):
        errors.append("review and reject thresholds must be numbers")
    elif not 0 <= review <= reject <= 1:
        errors.append("thresholds must satisfy 0 <= review <= reject <= 1")
    if fields.get("flagged_label", ReviewStatus.MANUAL_REVIEW) not in DECISION_LABELS:
        errors.append(f"flagged_label must be one of {', '.join(DECISION_LABELS)}")
    threshold = fields.get("report_threshold", REPORT_THRESHOLD_DEFAULT)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 1 <= threshold <= REPORT_THRESHOLD_MAX:
        errors.append(f"report_threshold must be a whole number from 1 to {REPORT_THRESHOLD_MAX}")
    languages = tuple(settings.MODERATION_LANGUAGES)
    errors += validate_term_lists(fields.get("term_lists", []), languages=languages)
    model_languages = fields.get("model_languages", ["en"])
    if not isinstance(model_languages, list) or not all(isinstance(c, str) and c in languages for c in model_languages):
        errors.append(f"model languages must be a list of codes the detector knows: {', '.join(languages)}")
    if fields.get("unjudged_label", ReviewStatus.MANUAL_REVIEW) not in (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED):
        errors.append("unjudged_label must be manual_review or approved")
    if "categories" in fields:
        errors += validate_categories(fields["categories"])
    errors += validate_priority_weights(fields)
    return errors


_CATEGORY_NAME = re.compile(r"^[a-z0-9][a-z0-9_/-]{0,63}$")


def validate_categories(value: object) -> list[str]:
    """Errors in a policy's list of violation categories (empty when valid)."""
    if not isinstance(value, list) or not value:
        return ["categories must be a non-empty list of names"]
    errors = [f"category {name!r}: lowercase letters, digits, '_', '-' or '/', at most 64"
              for name in value if not isinstance(name, str) or not _CATEGORY_NAME.match(name)]
    if len(set(map(str, value))) != len(value):
        errors.append("categories must not repeat")
    return errors


PRIORITY_WEIGHTS = ("priority_score_weight", "priority_report_weight", "priority_appeal_weight",
                    "priority_age_points_per_hour")


def validate_priority_weights(fields: dict) -> list[str]:
    """Weights are finite numbers >= 0; waiting must earn points (> 0), or an old review could
    wait behind new urgent ones forever."""
    errors = []
    for name in PRIORITY_WEIGHTS:
        if name not in fields:
            continue
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1e6:
            errors.append(f"{name} must be a number between 0 and 1000000")
    age = fields.get("priority_age_points_per_hour")
    if isinstance(age, int | float) and not isinstance(age, bool) and age == 0:
        errors.append("priority_age_points_per_hour must be above 0 (waiting must count)")
    return errors


# --- the review queues -----------------------------------------------------------------------

# Which queue a review waits in, by the cause that sent it to manual_review.
QUEUE_FOR_CAUSE = {
    Cause.PROVIDER_RESULT: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_CALLBACK: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_FAILED: ReviewQueue.PROVIDER_FAILURES,
    Cause.MANUAL_ESCALATION: ReviewQueue.ESCALATIONS,
    Cause.USER_REPORTS: ReviewQueue.REPORTS,
    Cause.APPEAL: ReviewQueue.APPEALS,
}


_MAX_HOURS_AHEAD = 24 * 365 * 10


@dataclass(frozen=True)
class QueueEntry:
    queue: str
    priority: float
    queued_at: datetime
    # The order key: the entry time moved earlier by the priority, at the policy's exchange rate
    # of points per hour waited. Ordering by it serves the most urgent first, and a review that
    # has waited long enough overtakes newer, more urgent ones (no starvation).
    order_at: datetime


def priority(policy: ModerationPolicy, *, category_scores: dict, report_count: int = 0, appealed: bool = False) -> float:
    """Priority points of a review entering a review queue: the model's top category score, the
    distinct users who reported it, and whether its owner appealed, weighted by the policy."""
    top = max((float(v) for v in (category_scores or {}).values()), default=0.0)
    return round(
        policy.priority_score_weight * top
        + policy.priority_report_weight * max(report_count, 0)
        + policy.priority_appeal_weight * (1 if appealed else 0),
        4,
    )


def queue_entry(policy: ModerationPolicy, *, cause: Cause, category_scores: dict, report_count: int = 0,
                now: datetime) -> QueueEntry:
    """Where and how urgently a review waits when `cause` sends it to manual_review."""
    queue = QUEUE_FOR_CAUSE.get(cause, ReviewQueue.LOW_CONFIDENCE)
    points = priority(policy, category_scores=category_scores, report_count=report_count,
                      appealed=cause == Cause.APPEAL)
    # Capped at ten years ahead: any priority beyond that is "first", and the date stays valid.
    ahead = timedelta(hours=min(points / policy.priority_age_points_per_hour, _MAX_HOURS_AHEAD))
    return QueueEntry(queue=queue, priority=points, queued_at=now, order_at=now - ahead)


def validate_category_thresholds(value: object) -> list[str]:
    """Errors in a per-category thresholds mapping (empty when valid)."""
    if not isinstance(value, dict):
        return ["category thresholds must be an object of {category: {review, reject}}"]
    errors = []
    for category, limits in value.items():
        if not isinstance(limits, dict) or not set(limits) <= {"review", "reject"} or not limits:
            errors.append(f"{category}: expected an object with 'review' and/or 'reject'")
            continue
        for key, number in limits.items():
            if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number <= 1:
                errors.append(f"{category}.{key}: expected a number between 0 and 1")
        if not errors and limits.get("review", 0) > limits.get("reject", 1):
            errors.append(f"{category}: review threshold above the reject threshold")
    return errors
