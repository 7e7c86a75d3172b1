"""Statements of reasons of each kind the platform sends (issue 26's acceptance list), built as a
sender would put them in the JSON body, for the fake Transparency Database's tests."""

from __future__ import annotations

import itertools

_serial = itertools.count(1)


def puid(prefix: str = "decision") -> str:
    return f"{prefix}-{next(_serial):06d}"


def _base(**fields) -> dict:
    statement = {
        "decision_visibility": ["DECISION_VISIBILITY_CONTENT_REMOVED"],
        "decision_ground": "DECISION_GROUND_INCOMPATIBLE_CONTENT",
        "decision_ground_reference_url": "https://example.org/community-rules#harassment",
        "incompatible_content_ground": "Community rules, section 3 (harassment)",
        "incompatible_content_explanation": "The content insults another user, which section 3 forbids.",
        "category": "STATEMENT_CATEGORY_CYBER_VIOLENCE",
        "category_specification": ["KEYWORD_CYBER_HARASSMENT"],
        "content_type": ["CONTENT_TYPE_TEXT"],
        "territorial_scope": ["AT", "BE", "DE", "FR"],
        "content_language": "EN",
        "content_date": "2025-07-02",
        "application_date": "2025-07-03",
        "decision_facts": "The text was found to break section 3 of the community rules (harassment).",
        "source_type": "SOURCE_VOLUNTARY",
        "automated_detection": "Yes",
        "automated_decision": "AUTOMATED_DECISION_FULLY",
        "puid": puid(),
    }
    statement.update(fields)
    return statement


def removal_by_provider() -> dict:
    """A rejection decided by the moderation provider alone: detected and decided automatically."""
    return _base()


def removal_by_moderator_on_model_flag() -> dict:
    return _base(automated_decision="AUTOMATED_DECISION_PARTIALLY")


def removal_on_dsa_notice() -> dict:
    """A notice under Art. 16 that a moderator upheld, on the ground of illegality."""
    return _base(
        decision_ground="DECISION_GROUND_ILLEGAL_CONTENT",
        incompatible_content_ground=None, incompatible_content_explanation=None,
        illegal_content_legal_ground="Criminal Code, section 185 (insult)",
        illegal_content_explanation="The notice showed the text insults a named person.",
        category="STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH",
        category_specification=["KEYWORD_DEFAMATION"],
        source_type="SOURCE_ARTICLE_16", automated_detection="No", automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED",
    )


def removal_on_trusted_flagger_notice() -> dict:
    return _base(
        decision_visibility=["DECISION_VISIBILITY_CONTENT_DISABLED"],
        source_type="SOURCE_TRUSTED_FLAGGER", source_identity="A trusted flagger designated under Art. 22",
        automated_detection="No", automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED",
        category="STATEMENT_CATEGORY_SCAMS_AND_FRAUD", category_specification=["KEYWORD_PHISHING"],
    )


def account_suspension(end: str = "2025-08-03") -> dict:
    return _base(
        decision_visibility=None, decision_account="DECISION_ACCOUNT_SUSPENDED", account_type="ACCOUNT_TYPE_PRIVATE",
        end_date_account_restriction=end, automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED", automated_detection="No",
        puid=puid("suspension"),
    )


def account_termination() -> dict:
    return _base(
        decision_visibility=None, decision_account="DECISION_ACCOUNT_TERMINATED", account_type="ACCOUNT_TYPE_PRIVATE",
        automated_decision="AUTOMATED_DECISION_NOT_AUTOMATED", automated_detection="No", puid=puid("ban"),
    )


KINDS = {
    "content removed by the provider (fully automated)": removal_by_provider,
    "content removed by a moderator on a model's flag (partially automated)": removal_by_moderator_on_model_flag,
    "content removed on a DSA notice (Art. 16)": removal_on_dsa_notice,
    "access disabled on a trusted flagger's notice": removal_on_trusted_flagger_notice,
    "account suspended until an end date": account_suspension,
    "account terminated": account_termination,
}
