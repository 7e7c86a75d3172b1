"""Writing client notifications to the outbox (docs/design.md, invariant 7).

A notification row is written in the transaction of what it announces (a decision, a
report-threshold crossing, an author's standing change...), by the one writer (`outbox_write`),
so nothing goes unannounced and nothing rolled back is announced;
`notifications.py` delivers it after commit, at least once, with a stable webhook-id. Every body
that carries a decision carries its statement of reasons (moderation.transparency.reasons), never more.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from moderation.models import (
    AccountAction,
    AccountAppeal,
    Appeal,
    Author,
    ContentReview,
    Decision,
    DecisionNotification,
    NotificationKind,
    NotificationStatus,
    ReportEscalation,
    ReportOutcome,
    RestrictionEnd,
    appeal_outcome,
)
from moderation.jobs import enqueue_on_commit
from moderation.transparency.reasons import account_statement, statement_of_reasons, timestamp

if TYPE_CHECKING:
    from moderation.db.one_statement import OneStatement


def outbox_row(
    review: ContentReview,
    *,
    kind: NotificationKind,
    body: dict,
    decision: Decision | None = None,
    escalation: ReportEscalation | None = None,
) -> DecisionNotification:
    """A notification for `review`'s client, unsaved: the caller sets what it announces (unless
    `decision` or `escalation` names it) and writes it with `outbox_write`."""
    return _notification(review.client, kind=kind, body=body, review=review, decision=decision, escalation=escalation)


def outbox_author_row(author: Author, *, body: dict) -> DecisionNotification:
    """A notification about an author (a change of standing, an account appeal's resolution),
    unsaved: the caller sets what it announces and writes it with `outbox_write`."""
    return _notification(author.client, kind=body["type"], body=body)


def outbox_payload(body: dict) -> str:
    """A notification's body as stored and sent: every attempt (and an erasure's rewrite) the same bytes."""
    return json.dumps(body, sort_keys=True)


def _notification(client, *, kind: NotificationKind, body: dict, **announces) -> DecisionNotification:
    now = timezone.now()
    return DecisionNotification(
        kind=kind,
        client=client,
        event_id=DecisionNotification.new_event_id(),
        url=client.webhook_url,
        payload=outbox_payload(body),
        status=NotificationStatus.PENDING if client.webhook_url else NotificationStatus.NO_ENDPOINT,
        next_attempt_at=now if client.webhook_url else None,
        last_enqueued_at=now if client.webhook_url else None,  # its job is enqueued on commit
        **announces,
    )


def outbox_write(notifications: Sequence[DecisionNotification], *, writes: OneStatement | None = None) -> None:
    """Write `notifications` (built by `outbox_row`, `outbox_author_row`) and deliver them after
    commit: the one writer of the outbox. Call in the transaction of what they announce (one row
    per decision, threshold crossing, standing change, account appeal or report: unique
    constraints).

    `writes`: the statement that inserts what they announce, which inserts them too (a row it
    inserts may be named by `key_of`); they are enqueued once the caller has run it. Without it
    they are inserted here, in one statement.

    Of each client's notifications written together, the first NOTIFY_CLIENT_CONCURRENCY are
    enqueued after commit; the others wait in the client's backlog, not enqueued
    (`last_enqueued_at` NULL), for the attempts that end to hand them on, and the sweep to take
    them: thousands of report resolutions cost the shared job queue a few jobs, not one each."""
    enqueued: Counter = Counter()
    for notification in notifications:
        if notification.url:
            enqueued[notification.client_id] += 1
            if enqueued[notification.client_id] > settings.NOTIFY_CLIENT_CONCURRENCY:
                notification.last_enqueued_at = None
    if writes is None:
        DecisionNotification.objects.bulk_create(notifications, batch_size=500)
        _enqueue(notifications)
    else:
        for notification in notifications:
            writes.insert(notification)
        writes.on_executed(lambda: _enqueue(notifications))


def _enqueue(notifications: Sequence[DecisionNotification]) -> None:
    """Deliver written notifications once their transaction commits: those with an endpoint, and
    not left in their client's backlog."""
    for notification in notifications:
        if notification.url and notification.last_enqueued_at is not None:
            enqueue_on_commit("moderation.tasks.deliver_notification", notification_id=notification.pk)


def decided_body(review: ContentReview, decision: Decision) -> dict:
    return {
        "type": NotificationKind.REVIEW_DECIDED,
        "data": {
            "review_id": str(review.pk),
            "external_id": review.content.external_id,
            "status": decision.label,
            "decision": statement_of_reasons(decision),
        },
    }


def appeal_resolved_body(review: ContentReview, appeal: Appeal, decision: Decision) -> dict:
    return {
        "type": NotificationKind.APPEAL_RESOLVED,
        "data": {
            "review_id": str(review.pk),
            "external_id": review.content.external_id,
            "appeal_id": str(appeal.pk),
            "outcome": appeal_outcome(decision.label),
            "decision": statement_of_reasons(decision),
        },
    }


def report_resolved_body(review: ContentReview, *, report_id, reporter_id: str, outcome: ReportOutcome) -> dict:
    """What became of one report, told once (docs/design.md, "Reports"): no decision's reasons,
    which the review's own notification carries to the client already."""
    return {
        "type": NotificationKind.REPORT_RESOLVED,
        "data": {"report_id": str(report_id), "review_id": str(review.pk), "external_id": review.content.external_id,
                 "reporter_id": reporter_id, "outcome": outcome},
    }


def reported_body(review: ContentReview, report_count: int) -> dict:
    return {
        "type": NotificationKind.REVIEW_REPORTED,
        "data": {"review_id": str(review.pk), "external_id": review.content.external_id, "report_count": report_count},
    }


def author_actioned_body(author: Author, action: AccountAction) -> dict:
    return {
        "type": NotificationKind.AUTHOR_ACTIONED,
        "data": {
            "author_id": author.author_id, "action_id": str(action.pk), "action": action.action,
            "until": timestamp(action.until) if action.until else None, "cause": action.cause,
            "reason": action.reason, "statement": account_statement(action),
        },
    }


def author_restored_body(author: Author, action: AccountAction, end: RestrictionEnd) -> dict:
    return {
        "type": NotificationKind.AUTHOR_RESTORED,
        "data": {"author_id": author.author_id, "action_id": str(action.pk), "why": end},
    }


def account_appeal_resolved_body(author: Author, appeal: AccountAppeal) -> dict:
    return {
        "type": NotificationKind.ACCOUNT_APPEAL_RESOLVED,
        "data": {"author_id": author.author_id, "action_id": str(appeal.action_id), "appeal_id": str(appeal.pk),
                 "outcome": appeal.status},
    }
