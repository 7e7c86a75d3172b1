"""Statements of reasons: what a client is told about a decision (docs/design.md, "Reports,
appeals and statements of reasons").

One builder, a pure function of a decision, used by the API, the timeline API and the webhooks,
so the three never disagree. It names no moderator and quotes no internal error text (a failed
provider call, a moderator's name): operators read those in the admin and on the command-line
timeline.

Each reason comes from one source function in REASON_SOURCES; a decision field that records
why a policy rule decided (its matches) adds its own source there, whose reasons may carry more
keys (the rule, the matched term) beside `category` and `score`.

A restrictive decision (a rejection) and every account action also carry `appealable_until` and
the `notice` for the affected user (moderation.transparency.notices); a decision that restricts nothing (an
approval, or `manual_review`: the content waits for a human, nothing is taken down) has both
null, so a client reads one shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moderation.transparency.canned_reasons import canned_texts, reasons_key
from moderation.models import (
    STANDING_FOR_ACTION,
    AccountAction,
    ActionCause,
    Decision,
    DecisionSource,
    ReviewStatus,
    RuleAction,
)
from moderation.transparency.notices import appealable_until, notice
from moderation.verdicts import thresholds_for

Reason = dict[str, Any]

# What a client reads instead of an internal error when the provider could not decide.
SYSTEM_EXPLANATION = "The automated check could not be completed, so a moderator will review this content."


def _rule_reasons(decision: Decision) -> list[Reason]:
    """The watched-term rules that decided (moderation.text.rules): each names its rule and the term
    of the policy's list that matched. An `allow` match is an exception, not a reason. A hash
    bank's match names the bank and the distance (docs/design.md, "Images and hash banks").

    Rejecting matches come first, then the others in text order: a rejection's first reason (the
    category its statement of reasons and notice name, moderation/services/statements.py) is the
    category of a term that rejected it, not of an earlier one that only asked for a human."""
    found = []
    matches = sorted(decision.rule_matches or [], key=lambda m: m["action"] != RuleAction.REJECT)
    for match in matches:
        if "distance" in match:  # a hash bank's entry (moderation.verdicts.bank_match_record)
            found.append({"category": match["category"], "score": None, "rule": match["rule"],
                          "distance": match["distance"]})
        elif match["action"] != RuleAction.ALLOW:
            found.append({"category": match["category"], "score": None, "rule": match["rule"], "term": match["term"]})
    return found


def _moderator_reasons(decision: Decision) -> list[Reason]:
    """A moderator's violation category (or the one a system decision keeps of the rejection it
    stands by: erasure closing an appeal)."""
    if decision.source not in (DecisionSource.MODERATOR, DecisionSource.SYSTEM) or not decision.category:
        return []
    return [{"category": decision.category, "score": None}]


def _score_reasons(decision: Decision) -> list[Reason]:
    """The categories whose scores the policy acted on (at or above a threshold), worst first;
    for content the provider flagged below every threshold, the categories it flagged."""
    if decision.source != DecisionSource.PROVIDER or decision.label == ReviewStatus.APPROVED:
        return []
    if decision.model_used is False:  # a language the model may not judge: its scores decided nothing
        return []
    scores = decision.category_scores or {}
    if decision.policy_id is not None:
        acted_on = [c for c, s in scores.items() if s >= thresholds_for(decision.policy, c)[0]]
    else:
        acted_on = []
    if not acted_on:
        acted_on = [c for c, flagged in (decision.categories or {}).items() if flagged]
    return sorted(({"category": c, "score": scores.get(c)} for c in acted_on),
                  key=lambda r: (-(r["score"] or 0), r["category"]))


REASON_SOURCES: tuple[Callable[[Decision], list[Reason]], ...] = (_rule_reasons, _moderator_reasons, _score_reasons)


def reasons(decision: Decision) -> list[Reason]:
    """Each category once, from the first source that names it."""
    found: dict[str, Reason] = {}
    for source in REASON_SOURCES:
        for reason in source(decision):
            found.setdefault(reason["category"], reason)
    return list(found.values())


def explanation(decision: Decision) -> str:
    if decision.source == DecisionSource.SYSTEM:
        # Its explanation, when it has one, is the platform's own text for the client (erasure's);
        # a provider's failure is kept in `reason`, internal, and the client reads SYSTEM_EXPLANATION.
        return decision.explanation or SYSTEM_EXPLANATION
    if decision.source == DecisionSource.MODERATOR:
        verb = "sent this content to human review" if decision.label == ReviewStatus.MANUAL_REVIEW else "reviewed this content"
        stated = " ".join(moderator_reason_texts(decision))
        return f"A moderator {verb}: {stated}" if stated else f"A moderator {verb}."
    return decision.explanation


def moderator_reason_texts(decision: Decision) -> list[str]:
    """What a client reads of a moderator's reasons (docs/workplace.md, "Canned reasons"): the
    texts of the canned reasons picked, in the content's language when the policy has it (else
    English), then the free text only if the moderator ticked "send to the user" (a decision from
    before the tick existed, `reason_shared` NULL, always sent it)."""
    texts = []
    if decision.reason_codes and decision.policy_id:
        language = decision.review.content.language  # read only when there is something to translate
        texts = canned_texts(decision.policy.canned_reasons, reasons_key(decision.label, decision.category),
                             decision.reason_codes, language)
    if decision.reason and decision.reason_shared is not False:
        texts.append(decision.reason)
    return texts


def timestamp(value) -> str:
    return value.isoformat().replace("+00:00", "Z")  # as DRF renders datetimes


def statement_of_reasons(decision: Decision) -> dict[str, Any]:
    """The decision as a client sees it, in the API, on the timeline and in webhooks."""
    found = reasons(decision)
    return {
        "label": decision.label,
        "decided_by": decision.source,  # "moderator", "provider" or "system": never who
        "source": decision.source,
        "automated": decision.source != DecisionSource.MODERATOR,
        "reasons": found,
        "policy_version": decision.policy.version if decision.policy_id else None,
        "explanation": explanation(decision),
        "score": decision.score,
        "flagged": decision.flagged,
        "categories": decision.categories or {},
        "category_scores": decision.category_scores or {},
        "model": decision.model,
        "model_used": decision.model_used,
        "rules": [{key: m[key] for key in ("rule", "category", "action", "term")} for m in decision.rule_matches or []],
        "created_at": timestamp(decision.created_at),
        **_decision_notice(decision, found),
    }


def _decision_notice(decision: Decision, found: list[Reason]) -> dict[str, Any]:
    """A rejection's appeal window and notice, in the content's language (for an unsure one, its
    likeliest candidate with a template; English when the policy has none for it). It reads
    `decision.review.content`:
    a caller rendering many decisions selects them with it (the API's review serializer)."""
    if decision.label != ReviewStatus.REJECTED:
        return {"appealable_until": None, "notice": None}
    policy = decision.policy if decision.policy_id else None
    content = decision.review.content
    until, stated = decision_notice(decision, found, policy=policy, language=content.language,
                                    candidates=content.language_candidates or ())
    return {"appealable_until": timestamp(until), "notice": stated}


def decision_notice(decision: Decision, found: list[Reason], *, policy, language: str,
                    candidates: list | tuple = ()) -> tuple[Any, dict[str, str]]:
    """(appealable_until, notice) of a rejection `decision` with reasons `found` under `policy`, in
    `language`: the one rendering of a review's notice, which the statement of reasons sends and the
    policy admin's template editor previews with a draft policy (moderation/admin/notice_templates.py)."""
    until = appealable_until(decision.created_at, policy)
    return until, notice(policy, language, categories=[r["category"] for r in found], until=until,
                         appeal_route=f"/api/v1/reviews/{decision.review_id}/appeals/", candidates=candidates)


def _strike_reasons(strikes: list[dict]) -> list[dict[str, Any]]:
    """The strikes an action rests on, by category: their points and how many, most points first."""
    by_category: dict[str, dict[str, Any]] = {}
    for strike in strikes:
        reason = by_category.setdefault(strike["category"], {"category": strike["category"], "points": 0, "strikes": 0})
        reason["points"] += strike["points"]
        reason["strikes"] += 1
    return sorted(by_category.values(), key=lambda r: (-r["points"], r["category"]))


def account_statement(action: AccountAction) -> dict[str, Any]:
    """An account action as the client (and the affected user) sees it: the standing it leads to,
    the strikes it rests on, whether it was automated and under which policy version. It names no
    moderator (docs/design.md, "Authors, strikes and account actions")."""
    automated = action.cause == ActionCause.STRIKES
    if automated:
        explained = (f"Automated: {action.strike_points} active strike points reached the {action.action} step "
                     "of the enforcement ladder.")
    else:
        explained = f"A moderator took this action: {action.reason}" if action.reason else "A moderator took this action."
    policy = action.policy if action.policy_id else None
    until = appealable_until(action.created_at, policy)
    strike_reasons = _strike_reasons(action.strikes or [])
    return {
        "action": action.action,
        "standing": STANDING_FOR_ACTION[action.action],
        "until": timestamp(action.until) if action.until else None,
        "reasons": strike_reasons,
        "strike_points": action.strike_points,
        "automated": automated,
        "policy_version": action.policy.version if action.policy_id else None,
        "explanation": explained,
        # Every action, a warning too, may be appealed and is noticed; in English: an author has
        # no language of their own, and an action rests on strikes of content in any language.
        "appealable_until": timestamp(until),
        "notice": notice(policy, "en", categories=[r["category"] for r in strike_reasons], until=until,
                         appeal_route=f"/api/v1/authors/{action.author.author_id}/appeals/"),
    }
