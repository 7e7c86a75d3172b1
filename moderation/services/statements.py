"""Statements of reasons for the DSA Transparency Database, written with the restriction they
state (docs/transparency.md; DSA Art. 24(5)).

- `statement_after_decision_locked`: the decide path calls it in every decision's transaction.
  A rejection that restricts the content (the decision in force before it restricted nothing:
  no decision yet, an approval, a hand-off to a human) writes its statement; a rejection that
  keeps a restriction in force (an appeal upheld, a reprocessed rejection rejected again,
  erasure closing an appeal) writes none, its first statement stands; an approval that lifts a
  restriction records the correction on that statement (the database has no update).
- `statement_for_account_action`: each suspension or ban, in its action's statement.
- `statement_requeue`: a statement the database refused is built again from its facts with the
  active policy's mapping (after the mapping was fixed) and sent again.

The facts come from the audit trail, never from the content or a moderator's words:
`automated_detection` from whether a model or a rule flagged it, `automated_decision` from who
decided (FULLY the provider or a rule, PARTIALLY a moderator on a model's flag), `source_type`
from the notices the decision acted on (its open reports: the strongest kind).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from audit.models import EventKind
from moderation.errors import NotRequeueable
from moderation.models import (
    AccountAction,
    ActionCause,
    ContentReview,
    Decision,
    DecisionSource,
    ModerationPolicy,
    ReportKind,
    ReviewStatus,
    RuleAction,
    StatementStatus,
    TransparencyStatement,
)
from moderation.reasons import reasons
from moderation.services.one_statement import OneStatement
from moderation.services.policy import policy_active, policy_published
from moderation.services.transitions import record_event
from moderation.transparency import (
    AUTOMATION_FULLY,
    AUTOMATION_NOT,
    AUTOMATION_PARTIALLY,
    SOURCE_NOTICE,
    SOURCE_REPORTS,
    SOURCE_TRUSTED_FLAGGER,
    SOURCE_VOLUNTARY,
    statement_body,
)

logger = logging.getLogger(__name__)

# The strongest open report kind, as `reports_open_read` answers it (NULL: no open report).
OPEN_KIND_RANK = {ReportKind.USER: 1, ReportKind.DSA_NOTICE: 2, ReportKind.TRUSTED_FLAGGER: 3}
_SOURCE_FOR_RANK = {None: SOURCE_VOLUNTARY, 0: SOURCE_VOLUNTARY, 1: SOURCE_REPORTS, 2: SOURCE_NOTICE,
                    3: SOURCE_TRUSTED_FLAGGER}


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()


def _flagged(decision_fields: dict) -> bool:
    """Whether a provider's decision flagged the content: a model's score or a rule sent it
    somewhere other than approval (a language the model may not judge, with no rule, did not)."""
    if decision_fields["label"] == ReviewStatus.APPROVED:
        return False
    ruled = any(m.get("action") != RuleAction.ALLOW for m in decision_fields["rule_matches"] or [])
    return ruled or decision_fields["model_used"] is not False


def _automation(review: ContentReview, decision: Decision) -> tuple[bool, str]:
    """(automated_detection, automated_decision) of `decision`, from the review's trail."""
    if decision.source != DecisionSource.MODERATOR:
        return True, AUTOMATION_FULLY
    latest = (Decision.objects.filter(review=review, source=DecisionSource.PROVIDER).order_by("-id")
              .values("label", "rule_matches", "model_used").first())
    detected = latest is not None and _flagged(latest)
    return detected, AUTOMATION_PARTIALLY if detected else AUTOMATION_NOT


def decision_facts(review: ContentReview, decision: Decision, *, open_kind_rank: int | None) -> dict:
    """The facts of a rejection's statement. `open_kind_rank`: the strongest kind among the open
    reports the decision resolves (OPEN_KIND_RANK), read in the decision's statement."""
    found = reasons(decision)
    detected, automation = _automation(review, decision)
    content = review.content
    return {
        "kind": "decision",
        "category": found[0]["category"] if found else (decision.category or ""),
        "content_type": content.kind,
        "content_date": _day(content.created_at),
        "application_date": _day(decision.created_at),
        "language": content.language,
        "source": _SOURCE_FOR_RANK[open_kind_rank],
        "detection": detected,
        "automation": automation,
    }


def _policy_of(policy_id: int | None) -> ModerationPolicy:
    return policy_published(policy_id)


def _statement(*, facts: dict, puid: str, policy: ModerationPolicy, **row) -> TransparencyStatement:
    body = statement_body(puid=puid, facts=facts, mapping=policy.dsa_mapping)
    return TransparencyStatement(facts=facts, body=body, policy=policy, dsa_category=body["category"],
                                 automated_decision=body["automated_decision"], source_type=body["source_type"], **row)


def statement_after_decision_locked(review: ContentReview, decision: Decision, *, previous_label: str | None,
                                    open_kind_rank: int | None) -> TransparencyStatement | None:
    """Write the statement a decision calls for, or record the correction it makes.

    Call holding the review's row lock, in the decision's transaction, after the decision is
    inserted. `previous_label`: the label of the decision in force before it (None: none).
    """
    restricted_before = previous_label == ReviewStatus.REJECTED
    if decision.label == ReviewStatus.REJECTED and not restricted_before:
        statement = _statement(facts=decision_facts(review, decision, open_kind_rank=open_kind_rank),
                               puid=str(decision.pk), policy=_policy_of(decision.policy_id),
                               decision=decision, review=review)
        statement.save(force_insert=True)
        return statement
    if decision.label == ReviewStatus.APPROVED and restricted_before:
        # The restriction is lifted (an appeal overturned, an override, a reprocess approved): the
        # statement of the decision that imposed it records it.
        in_force = (TransparencyStatement.objects.filter(review=review, overturned_at__isnull=True)
                    .order_by("-id").values_list("pk", flat=True).first())
        if in_force is not None:
            TransparencyStatement.objects.filter(pk=in_force).update(overturned_at=decision.created_at,
                                                                     overturned_by=decision)
    return None


def statement_for_account_action(action: AccountAction, writes: OneStatement, *, now: datetime) -> None:
    """Add a suspension's or a ban's statement to `writes`, the statement inserting `action`
    (holding the author's lock, in the action's transaction)."""
    strikes: dict[str, int] = {}
    for strike in action.strikes or []:
        strikes[strike["category"]] = strikes.get(strike["category"], 0) + strike["points"]
    ranked = sorted(strikes.items(), key=lambda s: (-s[1], s[0]))
    review_ids = [strike["review_id"] for strike in action.strikes or []]
    contents = list(ContentReview.objects.filter(pk__in=review_ids).order_by("-content__created_at")
                    .values_list("content__kind", "content__created_at")[:1])
    kind, created = contents[0] if contents else ("account", now)
    automated = action.cause == ActionCause.STRIKES
    facts = {
        "kind": "account",
        "action": action.action,
        "until": _day(action.until) if action.until else None,
        "category": ranked[0][0] if ranked else "",
        "strikes": [list(pair) for pair in ranked],
        "content_type": kind,
        "content_date": _day(created),
        "application_date": _day(now),
        "language": "",
        "source": SOURCE_VOLUNTARY,
        "detection": automated,
        "automation": AUTOMATION_FULLY if automated else AUTOMATION_NOT,
    }
    writes.insert(_statement(facts=facts, puid=str(action.pk), policy=_policy_of(action.policy_id),
                             account_action=action))


def statement_account_overturned(action: AccountAction, *, now: datetime) -> None:
    """An account action overturned on appeal: recorded against its statement."""
    TransparencyStatement.objects.filter(account_action=action, overturned_at__isnull=True).update(overturned_at=now)


@transaction.atomic
def statement_requeue(*, statement_id: int, by) -> TransparencyStatement:
    """Build a refused statement again from its facts with the active policy's mapping, and send
    it again (the same puid). Raises NotRequeueable for one that is not refused."""
    statement = TransparencyStatement.objects.select_for_update().filter(pk=statement_id).first()
    if statement is None or statement.status != StatementStatus.REJECTED:
        raise NotRequeueable(f"statement {statement_id} is not one the database refused")
    policy = policy_active()
    rebuilt = _statement(facts=statement.facts, puid=statement.puid, policy=policy)
    TransparencyStatement.objects.filter(pk=statement.pk).update(
        body=rebuilt.body, policy=policy, dsa_category=rebuilt.dsa_category,
        automated_decision=rebuilt.automated_decision, source_type=rebuilt.source_type,
        status=StatementStatus.PENDING, attempts=0, next_attempt_at=None, locked_until=None, errors={},
        last_error="", requeued_at=timezone.now(),
    )
    record_event(EventKind.STATEMENT_REQUEUED, review_id=statement.review_id, statement=statement.puid,
                 policy_version=policy.version, by=getattr(by, "username", str(by)))
    logger.info("statement %s re-queued with policy v%s", statement.puid, policy.version)
    statement.refresh_from_db()
    return statement
