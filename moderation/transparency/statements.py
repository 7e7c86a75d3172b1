"""Statements of reasons for the EU DSA Transparency Database (docs/transparency.md): the
database's vocabulary, the policy's mapping onto it, and the one builder of a statement.

Pure functions, no database access. A statement is built from two parts:

- its *facts*, fixed when the decision or the account action is written (what kind of content,
  when, in which language, how it was detected and decided, on whose notice), read from the audit
  trail by moderation/services/statements.py;
- the *mapping* of a policy version (`ModerationPolicy.dsa_mapping`): each policy category to a
  DSA category, keywords, a decision ground with its text and reference URL, and a visibility
  restriction; the territorial scope; account actions to `decision_account`.

So re-queueing a refused statement after the policy's mapping was fixed rebuilds it from the
same facts with the new mapping. Nothing in either part is the content, an author's or a
reporter's id, or a moderator's free text (DSA Art. 24(5)): `decision_facts` is the policy's
wording and this module's fixed sentences.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from moderation.models import INCOMPATIBLE, vocabulary

# The database's limits (its StatementStoreRequest; tests/fixtures/dsa_tdb_rules.json).
GROUND_TEXT_MAX = 500
EXPLANATION_MAX = 2000
URL_MAX = 500
FACTS_MAX = 5000
DATE_MAX = "2038-01-01"  # the latest date the database takes (its before_or_equal rules)
RESTRICTED_AUTHOR_SENTENCE = ("The content was submitted while its author's account was suspended or terminated, "
                              "and the platform's rules do not publish new content of such an account.")

ILLEGAL = "DECISION_GROUND_ILLEGAL_CONTENT"
VISIBILITY_OTHER = "DECISION_VISIBILITY_OTHER"

# A statement's facts: how the restriction came about (fixed with the decision).
SOURCE_VOLUNTARY = "voluntary"
SOURCE_REPORTS = "reports"  # user reports: notices under Art. 16 too
SOURCE_NOTICE = "dsa_notice"
SOURCE_TRUSTED_FLAGGER = "trusted_flagger"
SOURCE_TYPE = {
    SOURCE_VOLUNTARY: "SOURCE_VOLUNTARY",
    SOURCE_REPORTS: "SOURCE_ARTICLE_16",
    SOURCE_NOTICE: "SOURCE_ARTICLE_16",
    SOURCE_TRUSTED_FLAGGER: "SOURCE_TRUSTED_FLAGGER",
}
AUTOMATION_FULLY = "fully"
AUTOMATION_PARTIALLY = "partially"
AUTOMATION_NOT = "not_automated"
AUTOMATED_DECISION = {
    AUTOMATION_FULLY: "AUTOMATED_DECISION_FULLY",
    AUTOMATION_PARTIALLY: "AUTOMATED_DECISION_PARTIALLY",
    AUTOMATION_NOT: "AUTOMATED_DECISION_NOT_AUTOMATED",
}
CONTENT_TYPE = {"text": "CONTENT_TYPE_TEXT", "image": "CONTENT_TYPE_IMAGE", "audio": "CONTENT_TYPE_AUDIO"}
# Content kinds the database has no type for: CONTENT_TYPE_OTHER with this text.
CONTENT_TYPE_OTHER_TEXT = {"metadata": "Metadata", "account": "User account"}

_SOURCE_SENTENCE = {
    SOURCE_VOLUNTARY: "The platform acted on its own initiative.",
    SOURCE_REPORTS: "The platform acted on notices from users.",
    SOURCE_NOTICE: "The platform acted on a notice of illegal content (DSA Art. 16).",
    SOURCE_TRUSTED_FLAGGER: "The platform acted on a notice from a trusted flagger (DSA Art. 22).",
}
_DETECTION_SENTENCE = {True: "It was detected by automated means.", False: "It was not detected by automated means."}
_DECISION_SENTENCE = {
    AUTOMATION_FULLY: "The decision was taken by automated means.",
    AUTOMATION_PARTIALLY: "A moderator took the decision on an automated detection.",
    AUTOMATION_NOT: "A moderator took the decision.",
}


def fixed_wording() -> tuple[str, ...]:
    """Every text a statement may hold besides its policy's mapping: this module's sentences and
    the database's own names and labels (the invariant checker tells a quote from them)."""
    words = vocabulary()
    labels = [text for values in words.values() if isinstance(values, dict) for pair in values.items() for text in pair]
    labels += [code for values in words.values() if isinstance(values, list) for code in values] + ["Yes", "No"]
    return (*_SOURCE_SENTENCE.values(), *_DETECTION_SENTENCE.values(), *_DECISION_SENTENCE.values(),
            *CONTENT_TYPE_OTHER_TEXT.values(), *ACCOUNT_WORDING, RESTRICTED_AUTHOR_SENTENCE, *labels)


# --- validation (policy_publish and the policy form: moderation.validation) -------------------

def _one_of(value: object, allowed) -> bool:
    """`value` is one of the database's names (a JSON object or list is none: never looked up)."""
    return isinstance(value, str) and value in allowed


def _entry_errors(where: str, entry: object) -> list[str]:
    if not isinstance(entry, dict):
        return [f"dsa_mapping {where}: an object with category, ground, ground_text and explanation"]
    words = vocabulary()
    errors = []
    unknown = set(entry) - {"category", "keywords", "ground", "ground_text", "explanation", "reference_url",
                            "visibility"}
    if unknown:
        errors.append(f"dsa_mapping {where}: unknown keys {', '.join(sorted(map(str, unknown)))}")
    if not _one_of(entry.get("category"), words["STATEMENT_CATEGORIES"]):
        errors.append(f"dsa_mapping {where}: category {entry.get('category')!r} is not a DSA statement category")
    keywords = entry.get("keywords", [])
    if not (isinstance(keywords, list) and all(_one_of(k, words["KEYWORDS"]) for k in keywords)
            and len(set(keywords)) == len(keywords)):
        errors.append(f"dsa_mapping {where}: keywords must be distinct DSA category specification keywords")
    if not _one_of(entry.get("ground", INCOMPATIBLE), words["DECISION_GROUNDS"]):
        errors.append(f"dsa_mapping {where}: ground {entry.get('ground')!r} is not a DSA decision ground")
    for name, limit in (("ground_text", GROUND_TEXT_MAX), ("explanation", EXPLANATION_MAX)):
        text = entry.get(name)
        if not isinstance(text, str) or not text.strip() or len(text.strip()) > limit:
            errors.append(f"dsa_mapping {where}: {name} is required, at most {limit} characters")
    url = entry.get("reference_url")
    if url is not None:
        try:
            if not isinstance(url, str) or len(url) > URL_MAX:
                raise ValidationError("too long")
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            errors.append(f"dsa_mapping {where}: reference_url must be an http(s) URL of at most {URL_MAX} characters")
    visibility = entry.get("visibility", "DECISION_VISIBILITY_CONTENT_REMOVED")
    if not _one_of(visibility, words["DECISION_VISIBILITIES"]) or visibility == VISIBILITY_OTHER:
        errors.append(f"dsa_mapping {where}: visibility {visibility!r} is not a DSA visibility restriction "
                      "(other than DECISION_VISIBILITY_OTHER)")
    return errors


def validate_dsa_mapping(mapping: object) -> list[str]:
    """Every error in a policy's DSA mapping (empty when valid): unknown DSA values are refused.
    A category the policy does not have maps nothing (the default mapping names the default
    categories, which a policy may leave out); one it has and the mapping does not list takes
    `default`."""
    if not isinstance(mapping, dict):
        return ["dsa_mapping must be an object"]
    errors = []
    unknown = set(mapping) - {"territorial_scope", "categories", "default", "accounts"}
    if unknown:
        errors.append(f"dsa_mapping: unknown keys {', '.join(sorted(map(str, unknown)))}")
    scope = mapping.get("territorial_scope", [])
    countries = vocabulary()["EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES"]
    if not isinstance(scope, list) or not scope or not all(_one_of(c, countries) for c in scope):
        errors.append("dsa_mapping territorial_scope must be a non-empty list of EEA country codes (AT, ..., NO)")
    by_category = mapping.get("categories", {})
    if not isinstance(by_category, dict):
        errors.append("dsa_mapping categories must be an object: policy category -> DSA entry")
        by_category = {}
    for name, entry in by_category.items():
        errors += _entry_errors(f"category {name!r}", entry)
    if "default" not in mapping:
        errors.append("dsa_mapping default is required (for categories it does not list)")
    else:
        errors += _entry_errors("default", mapping["default"])
    accounts = mapping.get("accounts", {})
    if not isinstance(accounts, dict) or set(accounts) != {"suspend", "ban"} \
            or not all(_one_of(value, vocabulary()["DECISION_ACCOUNTS"]) for value in accounts.values()):
        errors.append("dsa_mapping accounts must map suspend and ban to DSA decision_account values")
    return errors


# --- the builder ------------------------------------------------------------------------------

def mapping_entry(mapping: dict, category: str) -> dict[str, Any]:
    return mapping.get("categories", {}).get(category) or mapping["default"]


def statement_body(*, puid: str, facts: dict[str, Any], mapping: dict[str, Any]) -> dict[str, Any]:
    """The statement the database is sent for `facts` under `mapping` (its StatementStoreRequest's
    fields: docs/transparency.md, "The fields"). `facts` come from moderation/services/statements.py."""
    if facts["kind"] == "account":
        entry = mapping_entry(mapping, facts["category"])
        body: dict[str, Any] = {"decision_account": mapping["accounts"][facts["action"]]}
        if facts.get("until"):
            # The database takes no date past DATE_MAX: a longer suspension is stated as lasting
            # at least that long (its facts keep the real end).
            body["end_date_account_restriction"] = min(facts["until"], DATE_MAX)
        decided = _account_facts(facts, mapping)
    else:
        entry = mapping_entry(mapping, facts["category"])
        body = {"decision_visibility": [entry.get("visibility", "DECISION_VISIBILITY_CONTENT_REMOVED")]}
        # A restricted author's new content is rejected for the restriction, not for a violation.
        decided = RESTRICTED_AUTHOR_SENTENCE if facts.get("restricted_author") else entry["explanation"].strip()
        # A moderator's canned reasons: the policy's sentences (moderation.transparency.canned_reasons), in English.
        decided = " ".join([decided, *(text.strip() for text in facts.get("canned_reasons", []))])
    ground = entry.get("ground", INCOMPATIBLE)
    prefix = "illegal_content" if ground == ILLEGAL else "incompatible_content"
    body |= {
        "decision_ground": ground,
        f"{prefix}_legal_ground" if ground == ILLEGAL else f"{prefix}_ground": entry["ground_text"].strip(),
        f"{prefix}_explanation": entry["explanation"].strip(),
        "category": entry["category"],
        "territorial_scope": list(mapping["territorial_scope"]),
        "content_date": facts["content_date"],
        "application_date": facts["application_date"],
        "decision_facts": " ".join([
            decided, _SOURCE_SENTENCE[facts["source"]], _DETECTION_SENTENCE[facts["detection"]],
            _DECISION_SENTENCE[facts["automation"]],
        ])[:FACTS_MAX],
        "source_type": SOURCE_TYPE[facts["source"]],
        "automated_detection": "Yes" if facts["detection"] else "No",
        "automated_decision": AUTOMATED_DECISION[facts["automation"]],
        "puid": puid,
    }
    if entry.get("keywords"):
        body["category_specification"] = list(entry["keywords"])
    if entry.get("reference_url"):
        body["decision_ground_reference_url"] = entry["reference_url"]
    kind = facts["content_type"]
    body["content_type"] = [CONTENT_TYPE.get(kind, "CONTENT_TYPE_OTHER")]
    if kind not in CONTENT_TYPE:
        body["content_type_other"] = CONTENT_TYPE_OTHER_TEXT.get(kind, "Other")
    language = (facts.get("language") or "").upper()
    if language in vocabulary()["ALL_LANGUAGES"]:
        body["content_language"] = language
    return body


ACCOUNT_WORDING = ("The account was terminated", "The account was suspended until",
                   "under the platform's terms of service.",
                   "for repeated violations of the platform's terms of service:", "points")


def _account_facts(facts: dict[str, Any], mapping: dict[str, Any]) -> str:
    """What an account action rests on, in the database's own words: its category labels, never
    the policy's category names as a provider may have keyed them."""
    labels = vocabulary()["STATEMENT_CATEGORIES"]
    if facts["action"] == "ban":
        done = ACCOUNT_WORDING[0]
    else:
        done = f"{ACCOUNT_WORDING[1]} {facts['until']}"
    strikes = facts.get("strikes") or []
    if not strikes:
        return f"{done} {ACCOUNT_WORDING[2]}"
    points: dict[str, int] = {}
    for category, count in strikes:
        label = labels[mapping_entry(mapping, category)["category"]]
        points[label] = points.get(label, 0) + count
    listed = ", ".join(f"{label} ({count} points)" for label, count in sorted(points.items(), key=lambda p: (-p[1], p[0])))
    return f"{done} {ACCOUNT_WORDING[3]} {listed}."
