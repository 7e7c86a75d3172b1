"""Recording a decision, and its notification to the client in the same transaction (the outbox)."""

from __future__ import annotations

import json

from django.utils import timezone

from moderation.models import ContentReview, Decision, DecisionNotification, NotificationStatus
from moderation.queue import enqueue_on_commit


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
