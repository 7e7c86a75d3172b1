"""Delivering decision notifications from the outbox: at least once, each attempt recorded,
signed per Standard Webhooks with the client's secret, the same webhook-id every time."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from audit import context
from moderation.signing import sign
from moderation.errors import NotUndoable
from moderation.models import Decision, DecisionNotification, NotificationAttempt, NotificationStatus
from moderation.netguard import guarded_transport
from moderation.jobs import enqueue_batch
from moderation.services.webhook_gate import (
    Vacancies,
    attempt_lease,
    attempts_in_flight,
    gate_admit,
    gate_record,
    lock_client,
)

logger = logging.getLogger(__name__)


def notification_backoff(attempt_no: int) -> timedelta:
    return timedelta(seconds=min(settings.NOTIFY_BACKOFF_S * 2 ** (attempt_no - 1), settings.NOTIFY_BACKOFF_MAX_S))


def notification_deliver(*, notification_id: int, now: datetime | None = None) -> str:
    """Make one delivery attempt if one is due. Safe to run twice: a delivered, failed, not-due
    or in-flight notification is left alone. No transaction is open during the POST."""
    now = now or timezone.now()
    started = delivery_begin(notification_id, now)
    if isinstance(started, str):
        return started
    notification, attempt = started
    with context.bind(review_id=notification.review_id):
        return _post(notification, attempt)


def notification_cancel_locked(decision: Decision) -> None:
    """Cancel the notification of `decision` before it leaves (review_undo; holding the review's
    lock, in its transaction), or refuse (NotUndoable) once it left or is leaving.

    The notification's row lock is the guard against the sender: `delivery_begin` takes the row FOR
    UPDATE SKIP LOCKED and commits the attempt (attempts + 1, `locked_until`) before it posts. So
    either the sender committed first, and this lock waits for that and then sees the attempt
    (refused), or this holds the row first: the sender skips it ("busy") and, once this commits,
    finds it cancelled ("already cancelled"). Nothing is posted for a cancelled one."""
    notification = DecisionNotification.objects.select_for_update(of=("self",)).filter(decision=decision).first()
    if notification is None or notification.status == NotificationStatus.CANCELLED:
        return
    if notification.status == NotificationStatus.DELIVERED:
        raise NotUndoable(f"the client was already notified at {notification.delivered_at:%H:%M} UTC")
    if notification.attempts or notification.locked_until or notification.status == NotificationStatus.FAILED:
        started = notification.attempt_log.order_by("-id").values_list("started_at", flat=True).first()
        when = f" at {started:%H:%M} UTC" if started else ""
        raise NotUndoable(f"the client was already notified{when} (its notification was sent)")
    notification.status, notification.next_attempt_at = NotificationStatus.CANCELLED, None
    notification.save(update_fields=["status", "next_attempt_at"])


def _post(notification: DecisionNotification, attempt: NotificationAttempt) -> str:
    body = notification.payload.encode()
    headers = {"Content-Type": "application/json", "User-Agent": "moderation-notifier/1",
               **sign(notification.client.webhook_secret, event_id=notification.event_id, body=body)}
    clock = time.monotonic()
    try:
        # Only the status matters: the answer's body is never read (a receiver cannot make us
        # buffer it). NOTIFY_TIMEOUT_S bounds each connect, write and read; the transport bounds
        # the attempt as a whole (NOTIFY_DEADLINE_S), so a receiver dribbling its status line a
        # byte at a time is cut off too. It connects only to addresses netguard allows.
        transport = guarded_transport(deadline=clock + settings.NOTIFY_DEADLINE_S)
        with httpx.Client(transport=transport, timeout=settings.NOTIFY_TIMEOUT_S, follow_redirects=False) as http:
            with http.stream("POST", notification.url, content=body, headers=headers) as response:
                status, error = response.status_code, ""
    except httpx.HTTPError as exc:
        status, error = None, f"{type(exc).__name__}: {exc}"[:2000]
    return delivery_finish(notification, attempt, status, error, int((time.monotonic() - clock) * 1000))


def delivery_begin(notification_id: int, now: datetime):
    client_id = DecisionNotification.objects.filter(pk=notification_id).values_list("client_id", flat=True).first()
    if client_id is None:
        return "gone"
    with transaction.atomic():
        # The client's lock first, then the row: every path takes them in this order.
        lock_client(client_id)
        notification = (
            DecisionNotification.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("client")
            .filter(pk=notification_id)
            .first()
        )
        if notification is None:
            return "busy"
        if notification.status != NotificationStatus.PENDING:
            return f"already {notification.status}"
        if notification.next_attempt_at and notification.next_attempt_at > now:
            return "not due"
        if notification.locked_until and notification.locked_until > now:
            return "in flight"
        if notification.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
            # The last attempt's worker died before recording its answer: that was the last.
            notification.status = NotificationStatus.FAILED
            notification.save(update_fields=["status"])
            return "failed"
        deferred = gate_admit(client_id=client_id, now=now)
        if deferred:
            # Not an attempt, and no job is out for it any more: it waits in its client's backlog
            # for a slot (an ending attempt hands it on, _hand_on), or until `retry_at`. Either
            # way the sweeper enqueues it again once it is due and still waiting.
            notification.next_attempt_at = deferred.retry_at or notification.next_attempt_at
            notification.last_enqueued_at = None
            notification.save(update_fields=["next_attempt_at", "last_enqueued_at"])
            return f"deferred: {deferred.reason}"
        notification.attempts += 1
        # The lease outlives the attempt: its transport gives up at NOTIFY_DEADLINE_S.
        notification.locked_until = now + attempt_lease()
        notification.last_enqueued_at = None
        notification.save(update_fields=["attempts", "locked_until", "last_enqueued_at"])
        # attempt_no numbers every attempt ever made (a resend starts a new budget, not a new log).
        attempt = NotificationAttempt.objects.create(
            notification=notification, attempt_no=notification.attempt_log.count() + 1, started_at=now
        )
    return notification, attempt


def delivery_finish(notification: DecisionNotification, attempt: NotificationAttempt, status: int | None, error: str, latency_ms: int) -> str:
    now = timezone.now()
    delivered = status is not None and 200 <= status < 300
    NotificationAttempt.objects.filter(pk=attempt.pk).update(
        status_code=status, error=error or ("" if delivered else f"HTTP {status}"), latency_ms=latency_ms
    )
    fields = {"locked_until": None, "last_error": "" if delivered else (error or f"HTTP {status}")}
    if delivered:
        fields.update(status=NotificationStatus.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif notification.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
        fields.update(status=NotificationStatus.FAILED, next_attempt_at=None)
        logger.warning("notification %s failed after %d attempts", notification.event_id, notification.attempts)
    else:
        fields.update(next_attempt_at=now + notification_backoff(notification.attempts))
    with transaction.atomic():
        # The client's lock before the slot is freed: a notification of this client refused for
        # want of a slot meanwhile is then either refused before (and seen waiting below) or
        # decided after (and finds the slot). Nothing waits for a slot that nobody hands on.
        lock_client(notification.client_id)
        # Only the attempt that holds the row may settle it: a stale attempt (its lease expired, a
        # newer one started) must not undo what the newer one recorded.
        settled = DecisionNotification.objects.filter(
            pk=notification.pk, attempts=notification.attempts, status=NotificationStatus.PENDING
        ).update(**fields)
        if not settled:
            return "superseded by a later attempt"
        vacancies = gate_record(client_id=notification.client_id, delivered=delivered, took_s=latency_ms / 1000, now=now)
        _hand_on(notification.client_id, vacancies, now)
    return str(fields.get("status", "retry_scheduled"))


def _hand_on(client_id: int, vacancies: Vacancies, now: datetime) -> None:
    """Enqueue the notifications waiting for the slots an ended attempt left: those of the slow
    clients that have waited longest (webhook_gate), then the client's own, oldest first. Each
    is marked enqueued, so the sweep leaves it be; its job meets the gate like any other. Call
    in the transaction that freed the slots, holding the locks gate_record took."""
    waiting = notifications_due(now).filter(last_enqueued_at__isnull=True)
    # A slow client has one attempt in flight at a time: the share goes to those with none, the
    # oldest of each, longest waiting first.
    slow_and_idle = oldest_of_each_client(
        waiting.exclude(client_id=client_id).filter(client__webhook_circuit__fast=False)
        .exclude(Exists(attempts_in_flight(now).filter(client_id=OuterRef("client_id")))),
        1,
    )
    for rows, limit in ((slow_and_idle, vacancies.slow_share), (waiting.filter(client_id=client_id), vacancies.client)):
        enqueue_batch(rows, order_by="next_attempt_at", enqueued_before=None, now=now, limit=limit,
                      task="moderation.tasks.deliver_notification", id_kwarg="notification_id", review_field="review_id")


def notifications_due(now: datetime):
    """Pending notifications whose next attempt is due and none is in flight."""
    return DecisionNotification.objects.filter(status=NotificationStatus.PENDING, next_attempt_at__lte=now).filter(
        Q(locked_until__isnull=True) | Q(locked_until__lt=now)
    )


def notifications_to_sweep(now: datetime):
    """The due notifications the sweep enqueues: each client's oldest NOTIFY_CLIENT_CONCURRENCY,
    as many as could start at once. The others wait in their clients' queues and are handed on
    as attempts end (_hand_on): a client's backlog costs the shared job queue a few jobs a
    sweep, not one each ahead of every other client's."""
    return oldest_of_each_client(notifications_due(now), settings.NOTIFY_CLIENT_CONCURRENCY)


def oldest_of_each_client(rows, count: int):
    """`rows` (notifications) cut to the `count` oldest of each client. (A subquery: PostgreSQL
    locks no rows of a query with a window, and the callers lock these.)"""
    oldest_first = Window(RowNumber(), partition_by=F("client_id"), order_by=[F("next_attempt_at").asc(), F("pk").asc()])
    return rows.filter(pk__in=rows.annotate(place=oldest_first).filter(place__lte=count).values("pk"))


def notifications_resendable(*, ids=None, failed: bool = False):
    """What `notifications_resend` would send again: the given ids, or else (`failed`) every
    notification that gave up; never a delivered or cancelled one, nor one whose client has no webhook URL."""
    rows = (DecisionNotification.objects.exclude(status__in=(NotificationStatus.DELIVERED, NotificationStatus.CANCELLED))
            .exclude(client__webhook_url=""))
    if ids:
        return rows.filter(pk__in=ids)
    return rows.filter(status=NotificationStatus.FAILED) if failed else rows.none()


def notifications_resend(*, ids=None, failed: bool = False, now: datetime | None = None) -> list[int]:
    """Send failed (or never-sendable) notifications again, to the client's current webhook URL,
    with their original webhook-id and bytes. Returns the ids queued."""
    from moderation.jobs import enqueue_on_commit

    now = now or timezone.now()
    queued = []
    with transaction.atomic():
        rows = notifications_resendable(ids=ids, failed=failed).select_related("client")
        for notification in rows.select_for_update(of=("self",)):
            DecisionNotification.objects.filter(pk=notification.pk).update(
                status=NotificationStatus.PENDING, url=notification.client.webhook_url, attempts=0,
                next_attempt_at=now, locked_until=None, last_enqueued_at=now,
            )
            enqueue_on_commit("moderation.tasks.deliver_notification", notification_id=notification.pk)
            queued.append(notification.pk)
    return queued
