"""Retention: what `manage.py prune` and the daily scheduled prune delete, each kind of row by its
own setting (docs/operations.md, "Retention").

An image's bytes are not rows: prune empties them (`ReviewMedia.data`, and the thumbnail made from them) once the review has been
final for MEDIA_RETENTION_DAYS, and keeps the row, its PDQ hash and quality.

Never pruned: reviews, contents, transitions and decisions (the audit chain; partition or
archive them by month instead, as docs/operations.md describes), operations and attempts,
notifications themselves (one per decision, invariant 7), callbacks never processed (their
payload is all there is of a result still to apply) and callbacks a decision cites (invariant 9).

Deletes run in batches, each its own short transaction over rows taken with SKIP LOCKED, so
two prunes at once (a schedule firing on two clusters) share the work instead of waiting, and
nothing the pipeline does waits long behind them. The rows behind /metrics counters are
tallied in the same transaction (`PrunedTally`), so a counter never falls.

A legal hold keeps what it names (moderation/privacy/holds.py; docs/legal-holds.md): a target
whose rows belong to a review (`review`, the path to it) skips the rows of held reviews, and
`prune_held` counts them. Preservation snapshots are pruned once their policy's period is over
(their trigger refuses an earlier DELETE), unless a hold keeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, DateTimeField, Exists, ExpressionWrapper, F, OuterRef, Q, QuerySet, Sum
from django.utils import timezone
from django_q.models import Task

from audit.models import PipelineEvent
from callbacks.models import ProviderCallback
from moderation.models import (
    Appeal,
    ContentReview,
    Decision,
    MediaRemoval,
    NotificationAttempt,
    NotificationStatus,
    PreservationSnapshot,
    ProviderAnswer,
    RateCount,
    ReviewMedia,
    ReviewStatus,
)
from moderation.privacy.holds import held_q
from moderation.services.idempotency import idempotency_records_expired


@dataclass(frozen=True)
class Target:
    name: str
    setting: str
    rows: Callable[[datetime], QuerySet]  # the rows due for deletion at `now`
    tally: Callable[[QuerySet], dict[str, int]] | None = None  # what /metrics counts of them
    # What is done to the rows chosen (given `now`): deleted unless said otherwise; the count done.
    remove: Callable[[QuerySet, datetime], int] | None = None
    age: str = "older than"  # how the summary says what is due
    # Locks the rows whose state decides that the chosen ones are due (skipping those locked
    # elsewhere) and returns the chosen still to take; they are then checked again under it.
    lock: Callable[[list], list] | None = None
    # The path from a row to its review: the rows of a review a legal hold keeps are skipped.
    review: str = ""

    def due(self, now: datetime) -> QuerySet:
        """The rows due for deletion at `now`, but those a legal hold keeps."""
        return self.rows(now).exclude(held_q(now, review=self.review)) if self.review else self.rows(now)


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


_REVIEW = "content__review__"


def _media(now: datetime) -> QuerySet:
    """Images (and audio) whose bytes are due for removal: their review final, approved or
    rejected, for more than MEDIA_RETENTION_DAYS. Not a review waiting for a human (under
    appeal, reported or with a notice, each in manual_review) nor one reprocessed (pending or
    processing). A rejection is final only once it can no longer be appealed (its policy's
    `appeal_window_days` past the decision), or if it is an appeal's own outcome: an appeal's
    moderator must still see what was rejected."""
    kept_after = _days("MEDIA_RETENTION_DAYS", now)
    appealable_until = ExpressionWrapper(
        F(f"{_REVIEW}decision__created_at") + F(f"{_REVIEW}decision__policy__appeal_window_days") * timedelta(days=1),
        output_field=DateTimeField(),
    )
    resolves_an_appeal = Exists(Appeal.objects.filter(resolution_id=OuterRef(f"{_REVIEW}decision_id")))
    return ReviewMedia.objects.filter(data__isnull=False, **{f"{_REVIEW}completed_at__lt": kept_after}).alias(
        appealable_until=appealable_until,
    ).filter(
        Q(**{f"{_REVIEW}status": ReviewStatus.APPROVED})
        | Q(Q(appealable_until__lt=kept_after) | resolves_an_appeal, **{f"{_REVIEW}status": ReviewStatus.REJECTED})
    )


def _media_lock(pks: list) -> list:
    """Lock the reviews of the media chosen, skipping those another holds (a reprocess or an
    appeal moving one out of its final state waits for the batch, or the batch leaves it)."""
    return list(ContentReview.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(content_id__in=pks).order_by("pk").values_list("content_id", flat=True))


def _media_remove(chosen: QuerySet, now: datetime) -> int:
    """The bytes and their thumbnail go; the hash, its quality, the type and size stay
    (docs/design.md, "Images and hash banks"). Erasure removes the rest of what was read of the
    bytes (moderation/privacy/erasure.py)."""
    return chosen.update(data=None, thumbnail=None, removed_at=now, removed_why=MediaRemoval.RETENTION)


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
           _event_tally, review="review"),
    Target("images' bytes", "MEDIA_RETENTION_DAYS", _media, remove=_media_remove, age="final for more than",
           lock=_media_lock, review="content__review"),
    Target("kept provider answers", "PROVIDER_ANSWER_RETENTION_DAYS", lambda now: ProviderAnswer.objects.filter(
        created_at__lt=_days("PROVIDER_ANSWER_RETENTION_DAYS", now))),
    Target("rate-limit counts", "RATE_COUNT_RETENTION_H", lambda now: RateCount.objects.filter(
        touched_at__lt=now - timedelta(hours=settings.RATE_COUNT_RETENTION_H)), age="untouched for more than"),
    # Each snapshot's own period (its policy's snapshot_retention_days, written on it as expires_at).
    Target("preservation snapshots", "", lambda now: PreservationSnapshot.objects.filter(expires_at__lte=now),
           age="past their expiry", review="review"),
)


def prune_held(*, now: datetime | None = None) -> dict[str, int]:
    """Rows due for deletion that a legal hold keeps, per target that can hold (docs/legal-holds.md)."""
    now = now or timezone.now()
    return {target.name: target.rows(now).filter(held_q(now, review=target.review)).count()
            for target in TARGETS if target.review}


def prune(*, now: datetime | None = None, for_real: bool = False, batch: int | None = None,
          should_stop: Callable[[], bool] = lambda: False) -> dict[str, int]:
    """Rows deleted per target (with `for_real`), or due for deletion (without)."""
    now = now or timezone.now()
    batch = batch or settings.PRUNE_BATCH
    counts = {}
    for target in TARGETS:
        if not for_real:
            counts[target.name] = target.due(now).count()
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
        due = target.due(now)
        pks = list(due.select_for_update(skip_locked=True, of=("self",)).values_list("pk", flat=True)[:batch])
        if not pks:
            return 0
        # (A review moved on since `due` was read is no longer due once its lock is held.)
        chosen = due.filter(pk__in=target.lock(pks)) if target.lock else due.model.objects.filter(pk__in=pks)
        if target.tally:
            _tally_add(target.tally(chosen))
        if target.remove:
            return target.remove(chosen, now)
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
