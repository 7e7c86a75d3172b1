"""Applying a moderation policy to a provider result: a pure function, no database access."""

from __future__ import annotations

from dataclasses import dataclass

from moderation.models import DECISION_LABELS, ModerationPolicy, ReviewStatus
from moderation.providers import ModerationResult

REPORT_THRESHOLD_DEFAULT = 3
REPORT_THRESHOLD_MAX = 10_000

# Worst first: the strictest verdict over all categories wins.
_SEVERITY = {ReviewStatus.REJECTED: 2, ReviewStatus.MANUAL_REVIEW: 1, ReviewStatus.APPROVED: 0}


@dataclass(frozen=True)
class Verdict:
    label: str
    score: float | None
    explanation: str


# The categories every policy knows: those the providers score (the bundled model's and the
# OpenAI moderation taxonomy's). A policy adds any it names in its per-category thresholds.
BASE_CATEGORIES = (
    "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit", "illicit/violent", "profanity",
    "self-harm", "self-harm/instructions", "self-harm/intent", "sexual", "sexual/minors", "violence",
    "violence/graphic",
)


def policy_categories(policy: ModerationPolicy) -> list[str]:
    """The violation categories of a policy version (what reports and moderators may name)."""
    return sorted({*BASE_CATEGORIES, *policy.category_thresholds})


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
    return errors


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
