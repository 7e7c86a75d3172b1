"""Applying a moderation policy: to a provider result, and to a review entering a human queue.
Pure functions, no database access."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from moderation.models import DECISION_LABELS, Cause, ModerationPolicy, ReviewQueue, ReviewStatus
from moderation.providers import ModerationResult

# Worst first: the strictest verdict over all categories wins.
_SEVERITY = {ReviewStatus.REJECTED: 2, ReviewStatus.MANUAL_REVIEW: 1, ReviewStatus.APPROVED: 0}


@dataclass(frozen=True)
class Verdict:
    label: str
    score: float | None
    explanation: str


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


def policy_categories(policy: ModerationPolicy) -> list[str]:
    """The violation categories a moderator may name under `policy`: its list, and any category
    it sets thresholds for."""
    return sorted({*policy.categories, *policy.category_thresholds})


# --- the human queues ------------------------------------------------------------------------

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
    """Priority points of a review entering a human queue: the model's top category score, the
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
