"""The one decide path: a decision, its client notification (the outbox) and the status change,
all in the caller's transaction (docs/design.md, invariants 1, 7 and 9).

Every decision goes through `decide_locked`: a provider result, a provider failure handed to a
human, a moderator's override and an escalation; and so does every strike against the review's
author (moderation/services/strikes.py) and every resolution of its reports by a decision
(moderation/services/report_outcomes.py), and every statement of reasons for the DSA Transparency
Database (moderation/services/statements.py), and every preservation snapshot of a decision in a
reportable category (moderation/services/preservation.py).
"""

from __future__ import annotations

from django.utils import timezone

from audit import tracing
from moderation.errors import IllegalTransition
from moderation.models import (
    LABELLED_CAUSES, Appeal, Author, Cause, ContentReview, Decision, DecisionSource, NotificationKind, ReviewStatus,
)
from moderation.services.transitions import transition_review
from moderation.services.appeals import appeal_resolve_locked
from moderation.services.strikes import strike_open_read, strikes_after_decision_locked
from moderation.db.one_statement import OneStatement
from moderation.services.policy import policy_active
from moderation.services.preservation import snapshot_after_decision_locked
from moderation.services.report_outcomes import reports_open_read, reports_resolve_locked
from moderation.services.statements import statement_after_decision_locked
from moderation.services.outbox import appeal_resolved_body, decided_body, outbox_row, outbox_write


def decide_locked(
    review: ContentReview,
    *,
    cause: Cause,
    label: str,
    source: str,
    actor: str,
    actor_id: str = "",
    transition_reason: str = "",
    idempotency_key=None,
    job_id: str = "",
    attempt_no: int | None = None,
    history_user=None,
    update_fields: tuple[str, ...] = (),
    appeal: Appeal | None = None,
    writes: OneStatement | None = None,
    counts_strike: bool = True,
    author: Author | None = None,
    **decision_fields,
) -> Decision:
    """Decide `review`: record the decision (and its outbox row), then move the review to `label`.

    Call inside `transaction.atomic()` holding the review's row lock, after checking that the
    decision is the caller's to make. `decision_fields` are the Decision's own (score, policy,
    moderator, reason, category, ...). The transition must land on `label`: a cause whose
    transition goes elsewhere raises IllegalTransition and the caller's transaction rolls back.
    With `appeal` (open, the review's, checked by the caller), the decision resolves it.
    `writes`: the caller's own writes, sent in the statement that inserts the decision.
    `counts_strike`: False for a rejection that judges no violation (a restricted author's
    content rejected by the policy's `while_restricted`): it writes no strike. `author`: the
    review's author when the caller holds its row lock already (a finalize locks its reviews'
    authors up front, after the reviews: docs/design.md, "Authors", the locking rule); its queue
    entry reads its points and standing, and its strike is written under that lock. None: the
    strike locks the author, when it has one to write.

    Every decision names the policy version in force (docs/design.md, invariant 9): the caller's
    `policy` when it judged under one (a provider result, the version a moderator's category was
    checked against), else the newest, read here.
    """
    with tracing.tracer.start_as_current_span(  # the notification's job continues this span
        "review.decide", attributes={"moderation.review_id": str(review.pk), "moderation.cause": str(cause),
                                     "moderation.label": str(label)},
    ):
        from_status = review.status
        decided_before = review.decision_id is not None  # (a first decision has no restriction to look for)
        writes = writes or OneStatement()
        if decision_fields.get("policy") is None:
            decision_fields["policy"] = policy_active()
        reported = reports_open_read(writes, review)  # asked in the decision's statement: no round trip
        struck = strike_open_read(writes, review) if review.author_id and label == ReviewStatus.APPROVED else None
        decision = decision_record(review, appeal=appeal, writes=writes, label=label, source=source, **decision_fields)
        review.decision = decision
        review.completed_at = timezone.now()
        if label in (ReviewStatus.APPROVED, ReviewStatus.REJECTED) and review.pile_on:
            # The decision resolves the open reports the pile-on mark describes (docs/design.md,
            # "Reporters"): the reports after it are judged afresh.
            review.pile_on = ""
            update_fields = (*update_fields, "pile_on")
        transition_review(
            review,
            cause,
            label=label if cause in LABELLED_CAUSES else None,
            actor=actor,
            actor_id=actor_id,
            idempotency_key=idempotency_key,
            job_id=job_id,
            attempt_no=attempt_no,
            reason=transition_reason,
            history_user=history_user,
            update_fields=["decision", "completed_at", *update_fields],
            author=author,
        )
        if review.status != label:
            raise IllegalTransition(review_id=review.pk, from_status=from_status, cause=cause)
        if appeal is not None:
            appeal_resolve_locked(appeal, decision)
        # What the decision writes after it goes in one more statement (`after`): the author's
        # strike and points, and its statement of reasons or the correction it records.
        after = OneStatement()
        # The author's strike follows the decision, in its transaction (docs/design.md, "Authors").
        strikes_after_decision_locked(review, decision, actor=actor, actor_id=actor_id, counts_strike=counts_strike,
                                      struck=struck.value if struck else None, writes=after, author=author)
        # The review's open reports are judged by it (docs/design.md, "Reports"); last, so that
        # every decision takes its locks in one order: review, author, then reporters.
        if reported.value:
            reports_resolve_locked(review, decision, by_moderator=source == DecisionSource.MODERATOR)
        # Its statement of reasons for the DSA Transparency Database, or the correction it makes
        # (docs/transparency.md), from the trail above: the decision, the notices it acted on.
        statement_after_decision_locked(review, decision, open_kind_rank=reported.value, judged=counts_strike,
                                        decided_before=decided_before, writes=after)
        after.execute()
        # Evidence, in the decision's transaction, when its category is reportable (no query
        # otherwise); not of a decision erasure makes: there is no content left to keep.
        if cause != Cause.CONTENT_ERASED:
            snapshot_after_decision_locked(review, decision)
        return decision


def decision_record(
    review: ContentReview, *, appeal: Appeal | None = None, writes: OneStatement | None = None, **fields
) -> Decision:
    """Create a decision and its outbox row; call holding the review's row lock, in the
    transaction that changes its status. Returns the decision (not yet set on the review).

    Exactly one notification per decision (a unique constraint): `review.decided`, or
    `appeal.resolved` for the decision that resolves `appeal`. Delivery is enqueued after
    commit, and the sweeper re-enqueues any whose job was lost. Both rows are inserted in one
    statement, with whatever the caller added to `writes`.
    """
    writes = writes or OneStatement()
    decision = Decision(review=review, **fields)
    writes.insert(decision)  # its created_at is set now: the notification's body states it
    if appeal is None:
        kind, body = NotificationKind.REVIEW_DECIDED, decided_body(review, decision)
    else:
        kind, body = NotificationKind.APPEAL_RESOLVED, appeal_resolved_body(review, appeal, decision)
    notification = outbox_row(review, kind=kind, body=body)
    notification.decision_id = writes.key_of(decision)
    outbox_write([notification], writes=writes)
    writes.execute()
    return decision
