"""The one decide path: a decision, its client notification (the outbox) and the status change,
all in the caller's transaction (docs/design.md, invariants 1, 7 and 9).

Every decision goes through `decide_locked`: a provider result, a provider failure handed to a
human, a moderator's override and an escalation.
"""

from __future__ import annotations

import json

from django.utils import timezone

from audit import tracing
from moderation.errors import IllegalTransition
from moderation.models import LABELLED_CAUSES, Cause, ContentReview, Decision, DecisionNotification, NotificationStatus
from moderation.queue import enqueue_on_commit
from moderation.services._audit import transition_review


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
    **decision_fields,
) -> Decision:
    """Decide `review`: record the decision (and its outbox row), then move the review to `label`.

    Call inside `transaction.atomic()` holding the review's row lock, after checking that the
    decision is the caller's to make. `decision_fields` are the Decision's own (score, policy,
    moderator, reason, category, ...). The transition must land on `label`: a cause whose
    transition goes elsewhere raises IllegalTransition and the caller's transaction rolls back.
    """
    with tracing.tracer.start_as_current_span(  # the notification's job continues this span
        "review.decide", attributes={"moderation.review_id": str(review.pk), "moderation.cause": str(cause),
                                     "moderation.label": str(label)},
    ):
        from_status = review.status
        decision = decision_record(review, label=label, source=source, **decision_fields)
        review.decision = decision
        review.completed_at = timezone.now()
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
        )
        if review.status != label:
            raise IllegalTransition(review_id=review.pk, from_status=from_status, cause=cause)
        return decision


def decision_record(review: ContentReview, **fields) -> Decision:
    """Create a decision and its outbox row; call holding the review's row lock, in the
    transaction that changes its status. Returns the decision (not yet set on the review).

    Exactly one notification per decision (a unique constraint); delivery is enqueued after
    commit, and the sweeper re-enqueues any whose job was lost.
    """
    decision = Decision.objects.create(review=review, **fields)
    client = review.client
    notification = DecisionNotification.objects.create(
        decision=decision,
        client=client,
        event_id=DecisionNotification.new_event_id(),
        url=client.webhook_url,
        payload=json.dumps(_body(review, decision), sort_keys=True),
        status=NotificationStatus.PENDING if client.webhook_url else NotificationStatus.NO_ENDPOINT,
        next_attempt_at=timezone.now() if client.webhook_url else None,
        last_enqueued_at=timezone.now() if client.webhook_url else None,  # its job is enqueued below
    )
    if client.webhook_url:
        enqueue_on_commit("moderation.tasks.deliver_notification", notification_id=notification.pk)
    return decision


def _body(review: ContentReview, decision: Decision) -> dict:
    return {
        "type": "review.decided",
        "data": {
            "review_id": str(review.pk),
            "external_id": review.content.external_id,
            "status": decision.label,
            "decision": {
                "label": decision.label,
                "source": decision.source,
                "score": decision.score,
                "category_scores": decision.category_scores,
                "policy_version": decision.policy.version if decision.policy_id else None,
                "reason": decision.reason or decision.explanation,
                "decided_at": decision.created_at.isoformat(),
            },
        },
    }
