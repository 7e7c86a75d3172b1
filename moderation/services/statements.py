"""Statements of reasons for the DSA Transparency Database, written with the restriction they
state (docs/transparency.md; DSA Art. 24(5)).

- `statement_after_decision_locked`: the decide path calls it in every decision's transaction.
  A rejection that restricts the content (none is in force: no rejection yet, or the last one
  was lifted by an approval) writes its statement; a rejection while a restriction is in force
  (an appeal upheld, a reprocessed rejection rejected again, after a hand-off to a human too,
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
from moderation.errors import NotRequeueable, NotUndoable
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
from moderation.transparency.canned_reasons import FALLBACK_LANGUAGE, canned_texts, reasons_key
from moderation.transparency.reasons import reasons
from moderation.db.one_statement import OneStatement
from moderation.services.policy import policy_active, policy_published
from moderation.services.report_outcomes import OPEN_KIND_RANK
from moderation.services.transitions import record_event
from moderation.transparency.statements import (
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

# The source of a decision from the strongest open report it resolved (reports_open_read; None: none).
_SOURCE_FOR_RANK = {None: SOURCE_VOLUNTARY, OPEN_KIND_RANK[ReportKind.USER]: SOURCE_REPORTS,
                    OPEN_KIND_RANK[ReportKind.DSA_NOTICE]: SOURCE_NOTICE,
                    OPEN_KIND_RANK[ReportKind.TRUSTED_FLAGGER]: SOURCE_TRUSTED_FLAGGER}


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()


def _flagged(decision_fields: dict) -> bool:
    """Whether a provider's decision flagged the content: a rule matched it, or the model flagged
    it where the policy lets the model judge (a language it may not judge flags nothing). Not its
    label: a restricted author's or a noticed review's goes to a human whatever the model said."""
    ruled = any(m.get("action") != RuleAction.ALLOW for m in decision_fields["rule_matches"] or [])
    return ruled or (decision_fields["flagged"] is True and decision_fields["model_used"] is not False)


def _automation(review: ContentReview, decision: Decision) -> tuple[bool, str]:
    """(automated_detection, automated_decision) of `decision`, from the review's trail: a
    provider's or a rule's decision is automated, and detected automatically if it flagged the
    content; a moderator's is partially automated when the review's last provider decision
    flagged it."""
    if decision.source != DecisionSource.MODERATOR:
        return _flagged({"rule_matches": decision.rule_matches, "flagged": decision.flagged,
                         "model_used": decision.model_used}), AUTOMATION_FULLY
    latest = (Decision.objects.filter(review=review, source=DecisionSource.PROVIDER).order_by("-id")
              .values("flagged", "rule_matches", "model_used").first())
    detected = latest is not None and _flagged(latest)
    return detected, AUTOMATION_PARTIALLY if detected else AUTOMATION_NOT


def decision_facts(review: ContentReview, decision: Decision, *, open_kind_rank: int | None,
                   judged: bool = True) -> dict:
    """The facts of a rejection's statement. `open_kind_rank`: the strongest kind among the open
    reports the decision resolves (report_outcomes.OPEN_KIND_RANK), read in the decision's statement. `judged`:
    False for a rejection that judges no violation (a restricted author's new content)."""
    found = reasons(decision) if judged else []
    detected, automation = _automation(review, decision)
    content = review.content
    return {
        "kind": "decision",
        "category": found[0]["category"] if found else "",
        "content_type": content.kind,
        "content_date": _day(content.created_at),
        "application_date": _day(decision.created_at),
        "language": content.language,
        "source": _SOURCE_FOR_RANK[open_kind_rank],
        "detection": detected,
        "automation": automation,
        **({} if judged else {"restricted_author": True}),
        **_canned_facts(decision),
    }


def _canned_facts(decision: Decision) -> dict:
    """The English texts of a moderator's canned reasons: the policy's own wording, stated with
    the mapping's explanation (never the moderator's free text: DSA Art. 24(5))."""
    if decision.source != DecisionSource.MODERATOR or not decision.reason_codes or decision.policy_id is None:
        return {}
    texts = canned_texts(decision.policy.canned_reasons, reasons_key(decision.label, decision.category),
                         decision.reason_codes, FALLBACK_LANGUAGE)
    return {"canned_reasons": texts} if texts else {}


def _statement(*, facts: dict, puid: str, policy: ModerationPolicy, **row) -> TransparencyStatement:
    body = statement_body(puid=puid, facts=facts, mapping=policy.dsa_mapping)
    return TransparencyStatement(facts=facts, body=body, policy=policy, dsa_category=body["category"],
                                 automated_decision=body["automated_decision"], source_type=body["source_type"], **row)


def statement_in_force(review: ContentReview) -> int | None:
    """The id of the statement of the restriction in force on `review` (None: nothing restricts
    it): the newest one no approval has lifted."""
    return (TransparencyStatement.objects.filter(review=review, overturned_at__isnull=True)
            .order_by("-id").values_list("pk", flat=True).first())


def statement_after_decision_locked(review: ContentReview, decision: Decision, *, open_kind_rank: int | None,
                                    judged: bool = True, decided_before: bool = True,
                                    writes: OneStatement | None = None) -> TransparencyStatement | None:
    """Write the statement a decision calls for, or record the correction it makes.

    Call holding the review's row lock, in the decision's transaction, after the decision is
    inserted. `decided_before`: the review had a decision before this one (a first decision has no
    restriction in force, and pays no query for it). A restriction
    stays in force from its rejection until an approval lifts it, whatever happens between (a
    reprocess, a hand-off to a human, an appeal), so a rejection under one in force writes none,
    and the approval that lifts it records the correction. `judged`: decide_locked's
    `counts_strike`. `writes`: the statement its write joins (decide_locked's, which the caller
    runs: the statement returned has its key once it has); without one it is written here.
    """
    if decision.label not in (ReviewStatus.REJECTED, ReviewStatus.APPROVED):
        return None
    in_force = statement_in_force(review) if decided_before else None
    own = writes is None
    writes = OneStatement() if own else writes
    statement = None
    if decision.label == ReviewStatus.REJECTED and in_force is None:
        statement = _statement(facts=decision_facts(review, decision, open_kind_rank=open_kind_rank, judged=judged),
                               puid=str(decision.pk), policy=policy_published(decision.policy_id),
                               decision=decision, review=review)
        writes.insert(statement)
    elif decision.label == ReviewStatus.APPROVED and in_force is not None:
        # The restriction is lifted (an appeal overturned, an override, a reprocess approved): the
        # statement of the decision that imposed it records it.
        writes.update(TransparencyStatement.objects.filter(pk=in_force), overturned_at=decision.created_at,
                      overturned_by=decision)
    if own:
        writes.execute()
    return statement


def statement_withdraw_locked(decision: Decision) -> None:
    """Withdraw the statement `decision` wrote, for review_undo (holding the review's lock, in its
    transaction): deleted while no sender has taken it, under its row lock, so a sender either
    took it first (and the undo is refused) or never sees it. Refused (NotUndoable) once a send
    began, and for a decision that corrected an earlier statement (an approval lifting a
    restriction: the correction may be out already)."""
    if TransparencyStatement.objects.filter(overturned_by=decision).exists():
        raise NotUndoable("it lifted a restriction whose statement of reasons records it: decide again instead")
    statement = TransparencyStatement.objects.select_for_update(of=("self",)).filter(decision=decision).first()
    if statement is None:
        return
    if statement.status != StatementStatus.PENDING or statement.attempts or statement.locked_until:
        raise NotUndoable("its statement of reasons was already sent to the Transparency Database")
    statement.delete()


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
    writes.insert(_statement(facts=facts, puid=str(action.pk), policy=policy_published(action.policy_id),
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
