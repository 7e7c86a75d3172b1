"""Bulk actions by query: one action over every review a search of the review list matched, as a
background job (docs/workplace.md, "Bulk actions by query").

`bulk_job_draft` freezes the targets (each review and its version, at most BULK_MAX_REVIEWS);
the confirm page shows that draft; `bulk_job_start` hands it to a worker. `bulk_job_run` works
one slice of it (BULK_SLICE_S) and enqueues the next, so a job of 10,000 reviews holds a worker
of the moderation cluster a few seconds at a time and the pipeline's own jobs run in between.

Each review goes through the same guarded service as a single decision (`review_override`,
`review_escalate`, `review_reprocess`) with the version frozen for it, under the policy version
frozen for the job (one published since: the rest is skipped, saying so): a review that changed since
(another moderator decided it, it was reprocessed, another moderator holds its lease) is skipped
with the refusal's reason, never overwritten. The item's outcome is written in the decision's own
transaction, after taking the item's row lock (SKIP LOCKED), so a rerun, a redelivered task or a
second worker on the same job never decides a review twice, and a crash mid-way loses nothing:
`bulk_jobs_resume` (run by every sweep) enqueues a live job no worker has touched for a task's
lease, and the job goes on from its first pending item.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from audit.models import Actor
from moderation.errors import BulkTooLarge, ContentErased, ModerationError, NotApplicable
from moderation.jobs import enqueue_on_commit
from moderation.words import STATUS_NOW, refusal_words
from moderation.models import (
    BULK_LIVE_STATUSES,
    BulkAction,
    BulkItemOutcome,
    BulkJob,
    BulkJobItem,
    BulkJobStatus,
    ContentReview,
    ReviewStatus,
)
from moderation.services.moderator import review_escalate, review_override, review_reprocess
from moderation.services.policy import policy_active

logger = logging.getLogger(__name__)

BULK_MAX_REVIEWS = 10_000
BULK_SLICE_S = 5.0  # one task's share of a worker: the moderation pipeline's jobs run between slices
BULK_TASK = "moderation.tasks.bulk_job_run"
PERMISSION = {
    BulkAction.OVERRIDE: "moderation.override_review",
    BulkAction.ESCALATE: "moderation.escalate_review",
    BulkAction.REPROCESS: "moderation.reprocess_review",
}
# The statuses each action applies to; the others are skipped ("not decided yet", ...).
APPLIES_TO = {
    BulkAction.OVERRIDE: (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED, ReviewStatus.REJECTED),
    BulkAction.ESCALATE: (ReviewStatus.PENDING, ReviewStatus.PROCESSING),
    BulkAction.REPROCESS: (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED, ReviewStatus.REJECTED),
}


@dataclass(frozen=True)
class BulkProgress:
    total: int
    done: int
    skipped: int

    @property
    def handled(self) -> int:
        return self.done + self.skipped

    @property
    def remaining(self) -> int:
        return self.total - self.handled


def bulk_job_draft(*, reviews, moderator, action: str, reason: str, label: str = "", category: str = "",
                   query: str = "", query_words: list | None = None, reason_codes: list | tuple = (),
                   share_reason: bool = False) -> BulkJob:
    """Freeze `reviews` (a queryset: the review list's, with its filters and search) as the
    targets of a job waiting for confirmation, each with its version now. Refuses more than
    BULK_MAX_REVIEWS (BulkTooLarge) before writing anything. The form validated label, category
    and reason; the decision's service checks them again for each review. An override carries
    its canned reasons (`reason_codes`) and `share_reason` to each review's decision, as a single
    decision does."""
    action = BulkAction(action)
    rows = list(reviews.order_by().values_list("pk", "version", "status", "created_at")[:BULK_MAX_REVIEWS + 1])
    if len(rows) > BULK_MAX_REVIEWS:
        raise BulkTooLarge(count=len(rows), limit=BULK_MAX_REVIEWS)
    rows.sort(key=lambda row: (row[3], str(row[0])))  # oldest first, as the single-id bulk actions go
    with transaction.atomic():
        job = BulkJob.objects.create(created_by=moderator, action=action, reason=reason.strip(), query=query,
                                     policy=policy_active(),
                                     query_words=query_words or [],
                                     label=label if action == BulkAction.OVERRIDE else "",
                                     category=category if label == ReviewStatus.REJECTED else "", total=len(rows),
                                     reason_codes=list(reason_codes) if action == BulkAction.OVERRIDE else [],
                                     share_reason=bool(share_reason and reason.strip() and action == BulkAction.OVERRIDE))
        BulkJobItem.objects.bulk_create(
            [BulkJobItem(job=job, position=i, review_id=pk, version=version, status_seen=status)
             for i, (pk, version, status, _) in enumerate(rows)], batch_size=2000)
    return job


def bulk_job_start(*, job_id, moderator, now: datetime | None = None) -> BulkJob:
    """The moderator confirmed the draft they were shown: it is queued for a worker (after commit)."""
    now = now or timezone.now()
    with transaction.atomic():
        job = BulkJob.objects.select_for_update().get(pk=job_id)
        if job.status != BulkJobStatus.DRAFT:
            raise NotApplicable(f"this job is {job.get_status_display().lower()}: only a draft is started")
        if job.created_by_id != moderator.pk:
            raise NotApplicable(f"this job was drafted by {job.created_by}: they start it")
        job.status, job.beat_at = BulkJobStatus.QUEUED, now
        job.save(update_fields=["status", "beat_at"])
        enqueue_on_commit(BULK_TASK, bulk_job_id=job.pk)
    return job


def bulk_job_cancel(*, job_id, moderator, now: datetime | None = None) -> BulkJob:
    """Ask the job to stop: the worker stops between two reviews (what it did stays done). A draft
    is discarded at once."""
    now = now or timezone.now()
    with transaction.atomic():
        job = BulkJob.objects.select_for_update().get(pk=job_id)
        if job.status == BulkJobStatus.DRAFT:
            job.status, job.finished_at = BulkJobStatus.DISCARDED, now
            job.save(update_fields=["status", "finished_at"])
        elif job.status in BULK_LIVE_STATUSES and job.cancel_requested_at is None:
            job.cancel_requested_at = now
            job.save(update_fields=["cancel_requested_at"])
    return job


def bulk_job_progress(job: BulkJob) -> BulkProgress:
    """Done, skipped and remaining, counted from the items (one grouped query on their index)."""
    counts = dict(job.items.values_list("outcome").annotate(n=Count("pk")).values_list("outcome", "n"))
    return BulkProgress(total=job.total, done=counts.get(BulkItemOutcome.DONE, 0),
                        skipped=counts.get(BulkItemOutcome.SKIPPED, 0))


def bulk_job_run(*, job_id, deadline: float) -> str:
    """Work on the job until `deadline` (time.monotonic()), then enqueue the rest as a new slice.

    Safe to run twice at once and again after a crash: items are taken one at a time with SKIP
    LOCKED and only while pending, and each one's outcome commits with its decision.
    """
    job = BulkJob.objects.select_related("created_by").get(pk=job_id)
    if job.status not in BULK_LIVE_STATUSES:
        return f"nothing to do: {job.get_status_display().lower()}"
    BulkJob.objects.filter(pk=job.pk, status=BulkJobStatus.QUEUED).update(
        status=BulkJobStatus.RUNNING, started_at=timezone.now(), beat_at=timezone.now())
    moderator = job.created_by
    if not (moderator.is_active and moderator.has_perm(PERMISSION[job.action])):
        return _finish(job, BulkJobStatus.CANCELLED, why=f"{moderator} may no longer {job.action} reviews")
    worked = 0
    while time.monotonic() < deadline:
        if BulkJob.objects.filter(pk=job.pk, cancel_requested_at__isnull=False).exists():
            return _finish(job, BulkJobStatus.CANCELLED, why="cancelled")
        if not _run_next_item(job):
            if job.items.filter(outcome=BulkItemOutcome.PENDING).exists():
                return "the rest is being done by another worker"  # it finishes the job
            return _finish(job, BulkJobStatus.DONE, why="done")
        worked += 1
    with transaction.atomic():
        BulkJob.objects.filter(pk=job.pk).update(beat_at=timezone.now())
        enqueue_on_commit(BULK_TASK, bulk_job_id=job.pk)
    return f"{worked} reviews handled; the rest in the next slice"


def _run_next_item(job: BulkJob) -> bool:
    """Take the first pending item nobody else holds and act on its review, in one transaction
    with its outcome. False when none is left to take."""
    now = timezone.now()
    with transaction.atomic():
        item = (BulkJobItem.objects.select_for_update(skip_locked=True)
                .filter(job=job, outcome=BulkItemOutcome.PENDING).order_by("position").first())
        if item is None:
            return False
        try:
            with transaction.atomic():  # a savepoint: a refused decision leaves nothing behind
                _act(job, item)
            item.outcome, item.reason = BulkItemOutcome.DONE, ""
        except ModerationError as exc:
            # In words, as the job page shows it; the log and the review's timeline keep the codes.
            logger.info("bulk job %s: review %s skipped: %s", job.pk, item.review_id, exc)
            item.outcome, item.reason = BulkItemOutcome.SKIPPED, refusal_words(exc)
        except ContentReview.DoesNotExist:
            item.outcome, item.reason = BulkItemOutcome.SKIPPED, "the review no longer exists (retention)"
        item.finished_at = now
        item.save(update_fields=["outcome", "reason", "finished_at"])
        BulkJob.objects.filter(pk=job.pk).update(beat_at=now)
    return True


def _act(job: BulkJob, item: BulkJobItem) -> None:
    """One review, through its single-decision service, against the version frozen for it (the
    guard the race tests prove: tests/moderation/test_bulk_races.py). Call inside the item's transaction."""
    expected_version = item.version
    moderator = job.created_by
    review = ContentReview.objects.select_for_update(of=("self",)).select_related("content").get(pk=item.review_id)
    if review.content.erased_at is not None:
        raise ContentErased("its content was erased: nothing is left to judge")
    if job.action == BulkAction.OVERRIDE:
        if review.status == job.label and review.version == item.version:
            raise NotApplicable(f"already {STATUS_NOW[review.status]}")
        # The decision's own read of the policy is checked against the frozen version.
        review_override(review_id=review.pk, label=job.label, reason=job.reason, category=job.category,
                        reason_codes=job.reason_codes, share_reason=job.share_reason,
                        moderator=moderator, expected_version=expected_version, expected_policy_id=job.policy_id)
        return
    if job.policy_id is not None and policy_active().pk != job.policy_id:
        raise NotApplicable("the policy changed since the job was confirmed")
    if job.action == BulkAction.ESCALATE:
        review_escalate(review_id=review.pk, reason=job.reason, moderator=moderator, expected_version=expected_version)
    else:
        review_reprocess(review_id=review.pk, actor=Actor.ADMIN, actor_id=str(moderator), reason=job.reason,
                         user=moderator, expected_version=expected_version)


def _finish(job: BulkJob, status: str, *, why: str) -> str:
    BulkJob.objects.filter(pk=job.pk, status__in=BULK_LIVE_STATUSES).update(status=status, finished_at=timezone.now())
    progress = bulk_job_progress(job)
    return f"{why}: {progress.done} done, {progress.skipped} skipped, {progress.remaining} not done"


def bulk_jobs_resume(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Enqueue again each live job whose worker went silent for longer than a task's lease (a
    killed worker, a task lost between commit and enqueue). Called by every sweep; overlapping
    sweeps split the jobs (SKIP LOCKED), and a job enqueued twice is still done once per review."""
    now = now or timezone.now()
    silent_since = now - timedelta(seconds=settings.Q_CLUSTER["retry"])
    with transaction.atomic():
        ids = list(BulkJob.objects.select_for_update(skip_locked=True)
                   .filter(status__in=BULK_LIVE_STATUSES, beat_at__lt=silent_since)
                   .order_by("beat_at").values_list("pk", flat=True)[:limit])
        BulkJob.objects.filter(pk__in=ids).update(beat_at=now)
        for pk in ids:
            logger.warning("bulk job %s: no worker for %ss, enqueued again", pk, settings.Q_CLUSTER["retry"])
            enqueue_on_commit(BULK_TASK, bulk_job_id=pk)
    return ids
