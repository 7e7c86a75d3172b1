"""Which human review queue a review waits in, and how urgently: decided once, when it enters
(docs/workplace.md). Pure functions, no database access. (The job queue is moderation/jobs.py.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from moderation.models import QUEUE_SLUG_MAX, Cause, ContentKind, ModerationPolicy, ReportKind, ReviewQueue, Standing

# Which queue a review waits in, by the cause that sent it to manual_review.
QUEUE_FOR_CAUSE = {
    Cause.PROVIDER_RESULT: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_CALLBACK: ReviewQueue.LOW_CONFIDENCE,
    Cause.PROVIDER_FAILED: ReviewQueue.PROVIDER_FAILURES,
    Cause.MANUAL_ESCALATION: ReviewQueue.ESCALATIONS,
    Cause.USER_REPORTS: ReviewQueue.REPORTS,
    Cause.APPEAL: ReviewQueue.APPEALS,
    Cause.NOTICE: ReviewQueue.NOTICES,
}


_MAX_HOURS_AHEAD = 24 * 365 * 10
# A trusted flagger's review goes ahead of every other notice (DSA Art. 22): its order key moves
# earlier by more than any priority can move one (the cap above), so it comes before every DSA
# notice queued in the last ten years, whatever their priorities.
TRUSTED_FLAGGER_LEAD = timedelta(hours=_MAX_HOURS_AHEAD + 1)
# A threat to life or safety (DSA Art. 18) goes ahead of everything, trusted flaggers included.
URGENT_LEAD = 2 * TRUSTED_FLAGGER_LEAD


# The order "Review next" takes a queue's reviews in, in words, for the queue page (queue_entry
# computes it). Most urgent first, in every queue: the weights are the active policy's.
_BY_PRIORITY = ("most urgent first: the model's top score, user reports, an appeal and the author's strike points "
                "add priority, and every hour waited adds more, so nothing waits forever (weights in the active policy)")
QUEUE_ORDER_WORDS = {
    ReviewQueue.URGENT: "Threats to life or safety (DSA Art. 18) come before every other queue's reviews; among "
                        f"them, {_BY_PRIORITY}.",
    ReviewQueue.NOTICES: "Trusted flaggers' notices (DSA Art. 22) first, whatever their priority, then DSA notices "
                         f"(Art. 16); within each, {_BY_PRIORITY}.",
}


def queue_order_words(queue: str) -> str:
    """How `queue` is ordered, as the queue page says it (QUEUE_ORDER_WORDS, else by priority)."""
    return QUEUE_ORDER_WORDS.get(queue, _BY_PRIORITY[0].upper() + _BY_PRIORITY[1:] + ".")


@dataclass(frozen=True)
class QueueEntry:
    queue: str
    priority: float
    queued_at: datetime
    # The order key: the entry time moved earlier by the priority, at the policy's exchange rate
    # of points per hour waited. Ordering by it serves the most urgent first, and a review that
    # has waited long enough overtakes newer, more urgent ones (no starvation).
    order_at: datetime


def priority(policy: ModerationPolicy, *, category_scores: dict, report_count: float = 0, appealed: bool = False,
             author_points: int = 0) -> float:
    """Priority points of a review entering a review queue: the model's top category score, the
    distinct users who reported it, each counted by its weight (docs/design.md, "Reporters": 1
    for a reporter not yet rated, 0 muted), whether its owner appealed, and its author's active
    strike points (a repeat offender's content ranks higher in every queue), weighted by the
    policy.

    An appeal's priority leaves the model's score out: the score is the appealed decision's (a
    moderator's rejection has none), so counting it would rank appeals of confident model
    rejections far ahead of appeals of human decisions. An appeal ranks by its own weight, its
    author's strike points and, through the order key, how long it has waited."""
    top = 0.0 if appealed else max((float(v) for v in (category_scores or {}).values()), default=0.0)
    return round(
        policy.priority_score_weight * top
        + policy.priority_report_weight * max(report_count, 0)
        + policy.priority_appeal_weight * (1 if appealed else 0)
        + policy.priority_strike_weight * max(author_points, 0),
        4,
    )


# Causes whose review waits in "Restricted authors" when its author was restricted at submission.
PROVIDER_CAUSES = (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK, Cause.PROVIDER_FAILED)


def queue_entry(policy: ModerationPolicy, *, cause: Cause, category_scores: dict, report_count: float = 0,
                now: datetime, author_restricted: bool = False, author_points: int = 0,
                notice_kind: str = "", media: bool = False, facts: RouteFacts | None = None,
                urgent: bool = False) -> QueueEntry:
    """Where and how urgently a review waits when `cause` sends it to manual_review. The policy's
    routing rules choose first (`route`, with what `facts` says of the review); when none
    matches: a review with a notice (`notice_kind`) that a notice or its provider result sends
    waits in "DSA notices and trusted flaggers", a trusted flagger's ahead of every DSA notice;
    other content submitted while its author was suspended or banned waits in "Restricted
    authors"; an image or audio (`media`) its job sent to a human waits in "Images", not with the
    model's doubts. The priority and order key do not depend on the queue chosen, but for `urgent`
    (its decision names a category the policy marks as a threat to life or safety): it waits in
    the urgent queue, whatever the rules say, ahead of every other review."""
    noticed = bool(notice_kind) and (cause == Cause.NOTICE or cause in PROVIDER_CAUSES)
    routed = route(policy.routing_rules, cause=cause, category_scores=category_scores, facts=facts or RouteFacts())
    if urgent:
        queue = ReviewQueue.URGENT
    elif routed is not None:
        queue = routed
    elif noticed:
        queue = ReviewQueue.NOTICES
    elif author_restricted and cause in PROVIDER_CAUSES:
        queue = ReviewQueue.RESTRICTED_AUTHORS
    elif media and cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK):
        queue = ReviewQueue.IMAGES
    else:
        queue = QUEUE_FOR_CAUSE.get(cause, ReviewQueue.LOW_CONFIDENCE)
    points = priority(policy, category_scores=category_scores, report_count=report_count,
                      appealed=cause == Cause.APPEAL, author_points=author_points)
    # Capped at ten years ahead: any priority beyond that is "first", and the date stays valid.
    ahead = timedelta(hours=min(points / policy.priority_age_points_per_hour, _MAX_HOURS_AHEAD))
    if noticed and notice_kind == ReportKind.TRUSTED_FLAGGER:
        ahead += TRUSTED_FLAGGER_LEAD
    if urgent:
        ahead += URGENT_LEAD
    return QueueEntry(queue=queue, priority=points, queued_at=now, order_at=now - ahead)


# --- routing rules (docs/workplace.md, "Routing rules and queue access") ---------------------------


@dataclass(frozen=True)
class RouteFacts:
    """What routing rules may ask of a review beyond its cause and scores, read by the caller
    (moderation.services.routing.route_facts). "" where unknown: it matches no listed value."""

    language: str = ""  # the detected language (moderation.text.language), "" when unsure
    client: str = ""  # the API client's name
    report_kind: str = ""  # the strongest report filed on it: a notice kind, "user", or ""
    author_standing: str = ""  # its author's standing (Standing), "" without an author
    media_kind: str = ""  # the content's kind (ContentKind)


# Each condition a rule's "when" may hold: a list of values (any of them matches) or a bound.
LIST_CONDITIONS = ("category", "language", "client", "report_kind", "author_standing", "media_kind", "cause")
SCORE_CONDITIONS = ("score_gte", "score_lte")
ROUTING_RULES_MAX = 100
_VALUES_MAX = 100
_NAME_MAX = 100
_QUEUE_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_CATEGORY = re.compile(r"^[a-z0-9][a-z0-9_/-]{0,63}$")
# What each list condition may name; categories, languages and clients are checked by the caller.
_CHOICES = {
    "report_kind": tuple(ReportKind.values),
    "author_standing": tuple(Standing.values),
    "media_kind": tuple(ContentKind.values),
    "cause": tuple(QUEUE_FOR_CAUSE),
}


def top_category(category_scores: dict | None) -> tuple[str, float]:
    """The category the model scored highest and its score (ties: the first name); ("", 0.0)
    without scores (a moderator's decision, a provider failure)."""
    scored = [(k, float(v)) for k, v in (category_scores or {}).items()
              if isinstance(v, int | float) and not isinstance(v, bool)]
    return min(scored, key=lambda pair: (-pair[1], pair[0]), default=("", 0.0))


def rule_matches(when: dict, *, cause: str, category_scores: dict | None, facts: RouteFacts) -> bool:
    """Whether every condition of a rule's `when` holds: a list condition when the review's value
    is one listed; `score_gte` / `score_lte` bound the top category's score."""
    return _holds(when, *_review_values(cause, category_scores, facts))


def route(rules: list | None, *, cause: str, category_scores: dict | None, facts: RouteFacts) -> str | None:
    """The queue of the first rule whose conditions all hold, or None (the cause's queue). The
    review's values are read once for every rule."""
    values, score = _review_values(cause, category_scores, facts)
    for rule in rules or ():
        if _holds(rule["when"], values, score):
            return rule["queue"]
    return None


def _review_values(cause: str, category_scores: dict | None, facts: RouteFacts) -> tuple[dict, float]:
    category, score = top_category(category_scores)
    return {"category": category, "cause": str(cause), "language": facts.language, "client": facts.client,
            "report_kind": facts.report_kind, "author_standing": facts.author_standing,
            "media_kind": facts.media_kind}, score


def _holds(when: dict, values: dict, score: float) -> bool:
    for name, wanted in when.items():
        if name == "score_gte":
            if not score >= wanted:
                return False
        elif name == "score_lte":
            if not score <= wanted:
                return False
        elif values[name] not in wanted:  # "" (unknown) is never listed
            return False
    return True


def routing_conditions_used(rules: list | None) -> set[str]:
    """The conditions some rule asks: the caller reads only those facts (a client's name, an
    author's standing: one query each, saved when no rule asks)."""
    return {name for rule in rules or () for name in rule["when"]}


def validate_routing_rules(rules: object, *, languages=None, categories=None, queues=None) -> list[str]:
    """Every error in a version's routing rules: a list of at most ROUTING_RULES_MAX objects
    {"name", "queue", "when"}, each "when" a non-empty object of known conditions. `languages`,
    `categories` and `queues` (slugs), when given, are what the rules may name."""
    if not isinstance(rules, list):
        return ["routing_rules must be a list of rules"]
    if len(rules) > ROUTING_RULES_MAX:
        return [f"routing_rules: at most {ROUTING_RULES_MAX} rules"]
    errors, names = [], set()
    for n, rule in enumerate(rules, start=1):
        where = f"routing rule {n}"
        if not isinstance(rule, dict) or set(rule) != {"name", "queue", "when"}:
            errors.append(f'{where}: an object with exactly "name", "queue" and "when"')
            continue
        name = rule["name"]
        if not isinstance(name, str) or not name.strip() or len(name) > _NAME_MAX:
            errors.append(f"{where}: the name is a text of 1 to {_NAME_MAX} characters")
        else:
            if name in names:
                errors.append(f"{where}: the name {name!r} is used twice")
            names.add(name)
            where = f"routing rule {n} ({name})"
        queue = rule["queue"]
        if not isinstance(queue, str) or len(queue) > QUEUE_SLUG_MAX or not _QUEUE_SLUG.match(queue):
            errors.append(f"{where}: the queue is a queue slug (lower-case letters, digits, '_', '-'; "
                          f"at most {QUEUE_SLUG_MAX})")
        elif queues is not None and queue not in queues:
            errors.append(f"{where}: there is no queue {queue!r} (one of {', '.join(sorted(queues))})")
        errors += _when_errors(rule["when"], where, languages=languages, categories=categories)
    return errors


def _when_errors(when: object, where: str, *, languages, categories) -> list[str]:
    if not isinstance(when, dict) or not when:
        return [f"{where}: \"when\" is an object of one condition or more "
                f"({', '.join((*LIST_CONDITIONS, *SCORE_CONDITIONS))})"]
    errors = []
    allowed = {**_CHOICES, "language": languages, "category": categories}
    for name, wanted in when.items():
        if name in SCORE_CONDITIONS:
            if isinstance(wanted, bool) or not isinstance(wanted, int | float) or not 0 <= wanted <= 1:
                errors.append(f"{where}: {name} is a number from 0 to 1")
            continue
        if name not in LIST_CONDITIONS:
            errors.append(f"{where}: unknown condition {name!r} (one of "
                          f"{', '.join((*LIST_CONDITIONS, *SCORE_CONDITIONS))})")
            continue
        if (not isinstance(wanted, list) or not wanted or len(wanted) > _VALUES_MAX
                or not all(isinstance(v, str) and v.strip() and len(v) <= _NAME_MAX for v in wanted)):
            errors.append(f"{where}: {name} is a list of 1 to {_VALUES_MAX} non-empty texts")
            continue
        choices = allowed.get(name)
        unknown = [v for v in wanted if choices is not None and v not in choices] if name != "client" else []
        if name == "category":
            unknown = [v for v in wanted if not _CATEGORY.match(v) or (choices is not None and v not in choices)]
        if unknown:
            known = f" (one of {', '.join(choices)})" if choices is not None else ""
            errors.append(f"{where}: {name} {', '.join(map(repr, unknown))} unknown{known}")
    low, high = when.get("score_gte"), when.get("score_lte")
    if all(isinstance(b, int | float) and not isinstance(b, bool) for b in (low, high)) and low > high:
        errors.append(f"{where}: score_gte is above score_lte: no score matches")
    return errors
