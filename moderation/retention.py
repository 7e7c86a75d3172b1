"""Retention: what `manage.py prune` and the daily scheduled prune delete, each kind of row by its
own setting (docs/operations.md, "Retention").

Never pruned: reviews, contents, transitions and decisions (the audit chain; partition or
archive them by month instead, as docs/operations.md describes), operations and attempts,
notifications themselves (one per decision, invariant 7), callbacks never processed (their
payload is all there is of a result still to apply) and callbacks a decision cites (invariant 9).

Deletes run in batches, each its own short transaction over rows taken with SKIP LOCKED, so
two prunes at once (a schedule firing on two clusters) share the work instead of waiting, and
nothing the pipeline does waits long behind them. The rows behind /metrics counters are
tallied in the same transaction (`PrunedTally`), so a counter never falls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, QuerySet, Sum
from django.utils import timezone
from django_q.models import Task

from audit.models import PipelineEvent
from callbacks.models import ProviderCallback
from moderation.models import Decision, NotificationAttempt, NotificationStatus
from moderation.services.idempotency import idempotency_records_expired


@dataclass(frozen=True)
class Target:
    name: str
    setting: str
    rows: Callable[[datetime], QuerySet]  # the rows due for deletion at `now`
    tally: Callable[[QuerySet], dict[str, int]] | None = None  # what /metrics counts of them


def _days(setting: str, now: datetime) -> datetime:
    return now - timedelta(days=getattr(settings, setting))


def _callbacks(now: datetime) -> QuerySet:
    return ProviderCallback.objects.filter(
        processed_at__isnull=False, received_at__lt=_days("CALLBACK_RETENTION_DAYS", now)
    ).exclude(Exists(Decision.objects.filter(callback=OuterRef("pk"))))


def _callback_tally(rows: QuerySet) -> dict[str, int]:
    tally: dict[str, int] = {}
    for provider, outcome, n, duplicates in rows.values_list("provider", "outcome").annotate(
        n=Count("id"), duplicates=Sum("duplicate_count")
    ).order_by():
        tally[f"callback:{provider}:{outcome}"] = n
        tally[f"duplicates:{provider}"] = tally.get(f"duplicates:{provider}", 0) + (duplicates or 0)
    return tally


def _event_tally(rows: QuerySet) -> dict[str, int]:
    return {f"event:{kind}": n for kind, n in rows.values_list("kind").annotate(n=Count("id")).order_by()}


TARGETS = (
    Target("processed callbacks", "CALLBACK_RETENTION_DAYS", _callbacks, _callback_tally),
    Target("django-q2 task results", "Q_RESULT_RETENTION_DAYS",
           lambda now: Task.objects.filter(stopped__lt=_days("Q_RESULT_RETENTION_DAYS", now))),
    Target("expired idempotency records", "IDEMPOTENCY_TTL_H", lambda now: idempotency_records_expired(now=now)),
    Target("delivered notifications' attempts", "NOTIFICATION_ATTEMPT_RETENTION_DAYS",
           lambda now: NotificationAttempt.objects.filter(
               notification__status=NotificationStatus.DELIVERED,
               notification__delivered_at__lt=_days("NOTIFICATION_ATTEMPT_RETENTION_DAYS", now))),
    Target("pipeline events", "PIPELINE_EVENT_RETENTION_DAYS",
           lambda now: PipelineEvent.objects.filter(created_at__lt=_days("PIPELINE_EVENT_RETENTION_DAYS", now)),
           _event_tally),
)


def prune(*, now: datetime | None = None, for_real: bool = False, batch: int | None = None,
          should_stop: Callable[[], bool] = lambda: False) -> dict[str, int]:
    """Rows deleted per target (with `for_real`), or due for deletion (without)."""
    now = now or timezone.now()
    batch = batch or settings.PRUNE_BATCH
    counts = {}
    for target in TARGETS:
        if not for_real:
            counts[target.name] = target.rows(now).count()
            continue
        counts[target.name] = 0
        while not should_stop():
            deleted = _delete_batch(target, now, batch)
            counts[target.name] += deleted
            if deleted < batch:
                break
    return counts


def _delete_batch(target: Target, now: datetime, batch: int) -> int:
    with transaction.atomic():
        due = target.rows(now)
        pks = list(due.select_for_update(skip_locked=True, of=("self",)).values_list("pk", flat=True)[:batch])
        if not pks:
            return 0
        chosen = due.model.objects.filter(pk__in=pks)
        if target.tally:
            _tally_add(target.tally(chosen))
        deleted, _ = chosen.delete()
    return deleted


def _tally_add(counts: dict[str, int]) -> None:
    if not counts:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO audit_prunedtally (key, count) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET count = audit_prunedtally.count + EXCLUDED.count",
            sorted(counts.items()),  # one order for every prune: two never deadlock on the tally rows
        )
