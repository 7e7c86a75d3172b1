"""A policy version's fields, validated, and the categories a version names. Pure functions, no
database access."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from django.conf import settings

from moderation.errors import InvalidCategory, ReasonRequired, UnknownReason
from moderation.transparency.canned_reasons import reasons_key, unknown_codes, validate_canned_reasons
from moderation.models import DECISION_LABELS, DEFAULT_CATEGORIES, ModerationPolicy, PartRule, ReviewStatus
from moderation.models.definitions import NO_VIOLATION
from moderation.transparency.notices import validate_appeal_window, validate_notice_templates
from moderation.transparency.statements import validate_dsa_mapping
from moderation.review_queues import validate_routing_rules
from moderation.text.rules import validate_term_lists

REPORT_THRESHOLD_DEFAULT = 3
REPORT_THRESHOLD_MAX = 10_000


def policy_categories(policy: ModerationPolicy) -> list[str]:
    """The violation categories of a policy version (what reports, rules and moderators may name):
    its list, any category it sets thresholds for, and its rules' and its hash banks' categories (importing a
    term list or a bank for a new category creates that category)."""
    return sorted({*policy.categories, *policy.category_thresholds, *(r["category"] for r in policy.term_lists),
                   *(bank["category"] for bank in policy.hash_banks or [])})


def validate_policy(fields: dict, *, queues=None) -> list[str]:
    """Every error in a policy version's fields (empty when it may be published).

    The one policy validator: `policy_publish` and the admin's policy form both call it, so a
    version that one of them accepts the other accepts too. `queues`: the review queue slugs
    its routing rules may name (moderation.services.routing.review_queue_slugs; None: unchecked).
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
    model_languages = fields.get("model_languages", [])
    if not isinstance(model_languages, list) or not all(isinstance(c, str) and c in languages for c in model_languages):
        errors.append(f"model languages must be a list of codes the detector knows: {', '.join(languages)}")
    if fields.get("unjudged_label", ReviewStatus.MANUAL_REVIEW) not in (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED):
        errors.append("unjudged_label must be manual_review or approved")
    if "categories" in fields:
        errors += validate_categories(fields["categories"])
    errors += validate_priority_weights(fields)
    errors += validate_author_rules(fields)
    errors += validate_appeal_window(fields.get("appeal_window_days", 183))
    errors += validate_notice_templates(fields.get("notice_templates", {}))
    errors += validate_report_rules(fields)
    if "dsa_mapping" in fields:
        errors += validate_dsa_mapping(fields["dsa_mapping"])
    errors += validate_media_rules(fields)
    if "canned_reasons" in fields:
        errors += validate_canned_reasons(fields["canned_reasons"])
    if not isinstance(fields.get("approval_needs_reason", False), bool):
        errors.append("approval_needs_reason must be true or false")
    if fields.get("part_rule", PartRule.MAX) not in PartRule.values:
        errors.append(f"part_rule must be one of {', '.join(PartRule.values)}")
    errors += [f"{name} must be a number from 0 to 1" for name in QA_FIELDS
               if not _is_share(fields.get(name, 0))]
    if "routing_rules" in fields:
        errors += validate_routing_rules(fields["routing_rules"], languages=languages,
                                         categories=named_categories(fields), queues=queues)
    if "category_definitions" in fields:
        errors += validate_category_definitions(fields["category_definitions"], categories=named_categories(fields))
    errors += validate_evidence_rules(fields)
    return errors


def validate_evidence_rules(fields: dict) -> list[str]:
    """The reportable and urgent categories are lists of the version's categories; the snapshot's
    period and the urgent deadline whole numbers in their ranges (left out: their defaults)."""
    errors = []
    known = set(named_categories(fields))
    for name in ("reportable_categories", "urgent_categories"):
        value = fields.get(name, [])
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            errors.append(f"{name} must be a list of category names")
        elif unknown := sorted(set(value) - known):
            errors.append(f"{name} names categories the policy does not have: {', '.join(unknown)}")
    for name, (low, high) in EVIDENCE_RANGES.items():
        value = fields.get(name, low)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors.append(f"{name} must be a whole number from {low} to {high}")
    return errors


# The written definitions (the `llm` provider's prompt, moderation/providers/llm.py): a prompt of
# at most DEFINITIONS_MAX categories of DEFINITION_MAX_CHARS each stays within any model's context.
DEFINITION_FIELDS = ("category_definitions",)
DEFINITIONS_MAX = 30
DEFINITION_MAX_CHARS = 4000


def definitions_kept(definitions: dict, fields: dict) -> dict:
    """`definitions` (a version's, well-formed) of the categories a new version's `fields` name:
    what a version that leaves its definitions out keeps (the active one's, or the shipped ones),
    so that narrowing the categories does not refuse it for definitions nobody wrote into it."""
    named = set(named_categories(fields))
    return {category: text for category, text in definitions.items() if category in named}


def validate_category_definitions(value: object, *, categories: list[str]) -> list[str]:
    """Errors in a version's written category definitions ({category: text}): each a category
    the version names (`categories`), each text non-empty and at most DEFINITION_MAX_CHARS."""
    if not isinstance(value, dict):
        return ['category_definitions must be an object: {"category": "what it covers, in words"}']
    if len(value) > DEFINITIONS_MAX:
        return [f"category_definitions: at most {DEFINITIONS_MAX} categories, got {len(value)}"]
    errors = []
    for category, text in value.items():
        if category == NO_VIOLATION:
            errors.append(f"category_definitions: {NO_VIOLATION!r} is the answer for no violation, not a category")
        elif category not in categories:
            errors.append(f"category_definitions: {category!r} is not one of the version's categories")
        if not isinstance(text, str) or not text.strip():
            errors.append(f"category_definitions: {category!r} needs a definition in words")
        elif len(text) > DEFINITION_MAX_CHARS:
            errors.append(f"category_definitions: {category!r} is longer than {DEFINITION_MAX_CHARS} characters")
    return errors


def _is_share(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def named_categories(fields: dict) -> list[str]:
    """The categories a version's fields name (`policy_categories` of fields not yet a version,
    each part read only when well-formed: its own errors are reported apart)."""
    listed = fields.get("categories", DEFAULT_CATEGORIES)
    thresholds = fields.get("category_thresholds") or {}
    rules = fields.get("term_lists") or []
    banks = fields.get("hash_banks") or []
    return sorted({*(c for c in (listed if isinstance(listed, list) else []) if isinstance(c, str)),
                   *(thresholds if isinstance(thresholds, dict) else {}),
                   *(r.get("category") for r in (rules if isinstance(rules, list) else [])
                     if isinstance(r, dict) and isinstance(r.get("category"), str)),
                   *(b.get("category") for b in (banks if isinstance(banks, list) else [])
                     if isinstance(b, dict) and isinstance(b.get("category"), str))})


def validate_report_rules(fields: dict) -> list[str]:
    """Each of REPORT_FIELDS given is a whole number in its range (left out: its default)."""
    errors = []
    for name, (low, high) in REPORT_FIELD_RANGES.items():
        value = fields.get(name, low)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors.append(f"{name} must be a whole number from {low} to {high}")
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
                    "priority_age_points_per_hour", "priority_strike_weight")
# A version's rules for authors (docs/design.md, "Authors, strikes and account actions").
AUTHOR_FIELDS = ("strike_points", "strike_window_days", "enforcement_ladder", "while_restricted")
# What the affected user is told, and for how long they may appeal (moderation.transparency.notices).
NOTICE_FIELDS = ("appeal_window_days", "notice_templates")
# How long a user report waits for a decision, and what marks a pile-on (docs/design.md, "Reporters").
REPORT_FIELDS = ("report_expiry_days", "pile_on_reports", "pile_on_minutes")
# The statements of reasons for the DSA Transparency Database (moderation.transparency.statements).
DSA_FIELDS = ("dsa_mapping",)
# Images (docs/design.md, "Images and hash banks"): the banks a version matches, how near a hash
# must be, and what an image nothing judged becomes.
MEDIA_FIELDS = ("hash_banks", "pdq_distance", "image_fallback")
# The moderators' canned reasons and whether an approval needs a reason (moderation.transparency.canned_reasons).
REASON_FIELDS = ("canned_reasons", "approval_needs_reason")
# Long texts (docs/workplace.md, "Long texts"): how the scores of a text's parts count.
PART_FIELDS = ("part_rule",)
# Which review queue a review entering manual_review waits in (moderation.review_queues.route).
ROUTING_FIELDS = ("routing_rules",)
# Moderator QA (docs/qa.md): how often a golden item is handed out, how many decisions are reviewed twice.
QA_FIELDS = ("qa_golden_rate", "qa_double_review_rate")
# Evidence (docs/legal-holds.md): the categories whose decisions freeze a snapshot and how long it
# is kept; the categories that threaten life or safety, and the urgent queue's deadline.
EVIDENCE_FIELDS = ("reportable_categories", "snapshot_retention_days", "urgent_categories", "urgent_deadline_minutes")
EVIDENCE_RANGES = {"snapshot_retention_days": (1, 3650), "urgent_deadline_minutes": (1, 24 * 60)}
PDQ_DISTANCE_MAX = 64  # of 256 bits; PDQ's authors suggest 31, and past 64 unrelated images meet
_BANK_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_BANK_KEYS = {"name", "category", "action", "never_display", "through"}


def validate_media_rules(fields: dict) -> list[str]:
    """Errors in a version's image fields (MEDIA_FIELDS; each left out takes its default)."""
    errors = []
    distance = fields.get("pdq_distance", 31)
    if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance <= PDQ_DISTANCE_MAX:
        errors.append(f"pdq_distance must be a whole number from 0 to {PDQ_DISTANCE_MAX}")
    if fields.get("image_fallback", ReviewStatus.MANUAL_REVIEW) not in (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED):
        errors.append("image_fallback must be manual_review or approved")
    banks = fields.get("hash_banks", [])
    if not isinstance(banks, list):
        return [*errors, "hash_banks must be a list"]
    seen = set()
    for n, bank in enumerate(banks):
        where = f"hash bank {n + 1}"
        if not isinstance(bank, dict) or set(bank) != _BANK_KEYS:
            errors.append(f"{where}: an object with exactly {', '.join(sorted(_BANK_KEYS))}")
            continue
        name = bank["name"]
        if not isinstance(name, str) or not _BANK_NAME.match(name):
            errors.append(f"{where}: the name is lower-case letters, digits, '_', '.' and '-', at most 64")
        elif name in seen:
            errors.append(f"{where}: bank {name} is listed twice")
        seen.add(name if isinstance(name, str) else None)
        if not isinstance(bank["category"], str) or not _CATEGORY_NAME.match(bank["category"]):
            errors.append(f"{where}: category {bank['category']!r}: lowercase letters, digits, '_', '-' or '/'")
        if bank["action"] not in ("reject", "manual_review"):
            errors.append(f"{where}: action must be reject or manual_review")
        if not isinstance(bank["never_display"], bool):
            errors.append(f"{where}: never_display must be true or false")
        through = bank["through"]
        if isinstance(through, bool) or not isinstance(through, int) or through < 0:
            errors.append(f"{where}: through must be an entry id (a whole number, 0 or more)")
    return errors
REPORT_FIELD_RANGES = {"report_expiry_days": (1, 3650), "pile_on_reports": (2, 10_000), "pile_on_minutes": (1, 10_080)}
STRIKE_POINTS_MAX = 1000
STRIKE_WINDOW_DAYS_MAX = 3650
LADDER_ACTIONS = ("warn", "suspend", "ban")


def validate_author_rules(fields: dict) -> list[str]:
    """Errors in a version's strike points, strike window, enforcement ladder and
    `while_restricted` (each one left out is not checked: it takes its default)."""
    errors = []
    points = fields.get("strike_points", {})
    if not isinstance(points, dict) or not all(
        isinstance(c, str) and _CATEGORY_NAME.match(c) and isinstance(n, int) and not isinstance(n, bool)
        and 0 <= n <= STRIKE_POINTS_MAX for c, n in points.items()
    ):
        errors.append(f"strike_points must be an object of {{category: whole number from 0 to {STRIKE_POINTS_MAX}}}")
    window = fields.get("strike_window_days", 90)
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= STRIKE_WINDOW_DAYS_MAX:
        errors.append(f"strike_window_days must be a whole number from 1 to {STRIKE_WINDOW_DAYS_MAX}")
    errors += validate_ladder(fields.get("enforcement_ladder", []))
    if fields.get("while_restricted", ReviewStatus.MANUAL_REVIEW) not in (ReviewStatus.MANUAL_REVIEW, "reject"):
        errors.append("while_restricted must be manual_review or reject")
    return errors


def validate_ladder(ladder: object) -> list[str]:
    """A ladder is a list of rungs {"points": n >= 1, "action": warn|suspend|ban, "days": n (a
    suspension's, 1 to 3650)}, at most one rung per action, more severe rungs needing more points."""
    if not isinstance(ladder, list) or len(ladder) > len(LADDER_ACTIONS):
        return ["enforcement_ladder must be a list of at most three rungs"]
    errors = []
    for rung in ladder:
        expected = {"points", "action", "days"} if isinstance(rung, dict) and rung.get("action") == "suspend" \
            else {"points", "action"}
        if not isinstance(rung, dict) or set(rung) != expected or rung["action"] not in LADDER_ACTIONS:
            errors.append('each rung is {"points": n, "action": "warn"|"ban"} or {"points": n, "action": "suspend", "days": n}')
            continue
        if isinstance(rung["points"], bool) or not isinstance(rung["points"], int) or not 1 <= rung["points"] <= 1_000_000:
            errors.append(f"rung {rung['action']}: points must be a whole number from 1 to 1000000")
        days = rung.get("days", 1)
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= STRIKE_WINDOW_DAYS_MAX:
            errors.append(f"rung suspend: days must be a whole number from 1 to {STRIKE_WINDOW_DAYS_MAX}")
    if errors:
        return errors
    actions = [rung["action"] for rung in ladder]
    if len(set(actions)) != len(actions):
        errors.append("enforcement_ladder: at most one rung per action")
    ordered = sorted(ladder, key=lambda rung: LADDER_ACTIONS.index(rung["action"]))
    if any(a["points"] >= b["points"] for a, b in itertools.pairwise(ordered)):
        errors.append("enforcement_ladder: a more severe rung needs more points (warn < suspend < ban)")
    return errors


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


def required_reason(reason: str, *, limit: int, what: str = "a reason is required") -> str:
    """A moderator's required reason, stripped: ReasonRequired when empty (`what` says so) or
    longer than `limit` characters. One check for every action that needs a reason in words."""
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired(what)
    if len(reason) > limit:
        raise ReasonRequired(f"a reason is at most {limit} characters (this one has {len(reason)})")
    return reason


def decision_category(label: str, category: str, policy: ModerationPolicy) -> str:
    """A decision's violation category, checked against `policy`: one of its categories for a
    rejection (InvalidCategory without), none for an approval."""
    category = (category or "").strip()
    if label != ReviewStatus.REJECTED:
        return ""
    if not category:
        raise InvalidCategory("a rejection needs a violation category")
    allowed = policy_categories(policy)
    if category not in allowed:
        raise InvalidCategory(f"{category!r} is not a category of the active policy ({', '.join(allowed)})")
    return category


def decision_reason(label: str, category: str, reason: str, codes: Sequence[str],
                    policy: ModerationPolicy) -> tuple[str, list[str]]:
    """(free text, canned codes) of a decision, checked against `policy`: codes it lists for the
    decision (each once, in the order picked), and a reason wherever one is needed."""
    reason, codes = (reason or "").strip(), list(dict.fromkeys(codes or ()))
    key = reasons_key(label, category)
    unknown = unknown_codes(policy.canned_reasons, key, codes)
    if unknown:
        where = f"the category {category}" if label == ReviewStatus.REJECTED else "an approval"
        raise UnknownReason(f"{', '.join(map(repr, unknown))}: not a canned reason of {where} in {policy}")
    needed = label == ReviewStatus.REJECTED or (label == ReviewStatus.APPROVED and policy.approval_needs_reason)
    if needed and not reason and not codes:
        what = "a rejection" if label == ReviewStatus.REJECTED else "an approval (the policy asks for one)"
        raise ReasonRequired(f"{what} needs a canned reason or a reason in your words")
    return reason, codes
