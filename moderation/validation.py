"""A policy version's fields, validated, and the categories a version names. Pure functions, no
database access."""

from __future__ import annotations

import re

from django.conf import settings

from moderation.models import DECISION_LABELS, ModerationPolicy, ReviewStatus
from moderation.rules import validate_term_lists

REPORT_THRESHOLD_DEFAULT = 3
REPORT_THRESHOLD_MAX = 10_000


def policy_categories(policy: ModerationPolicy) -> list[str]:
    """The violation categories of a policy version (what reports, rules and moderators may name):
    its list, any category it sets thresholds for, and its rules' categories (importing a term list
    for a new category creates that category)."""
    return sorted({*policy.categories, *policy.category_thresholds, *(r["category"] for r in policy.term_lists)})


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
