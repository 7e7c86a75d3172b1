"""Backtests: a policy version replayed over what moderators decided, as a background job
(docs/quality.md, "Backtests"; the judging itself: moderation/quality/replay.py).

A backtest freezes its examples when it starts (`backtest_start`): the reviews a moderator
decided, or the rows of a labelled file, one item each. A worker then judges the pending items a
chunk at a time, under a lease on the chunk's items (no lock or transaction is held while the
provider judges), each chunk's outcomes committed with the chunk, and enqueues the rest as a new
slice; the figures are computed once every item is judged. It writes to its own rows and the
kept provider answers only: never a review, a decision, a notification or a statement.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from moderation.errors import NotApplicable
from moderation.jobs import enqueue_on_commit
from moderation.models import (
    BACKTEST_LIVE_STATUSES,
    Backtest,
    BacktestItem,
    BacktestStatus,
    ContentReview,
    ModerationPolicy,
    ReviewStatus,
)
from moderation.quality.replay import (
    CHANGES_KEPT,
    CHUNK,
    QUALITY_LEASE,
    AnswerCount,
    HumanExample,
    changes_of,
    human_examples,
    judge_chunk,
)
from moderation.observability.evaluation import (
    EvaluationError,
    Example,
    Judged,
    evaluation_figures,
    examples_read,
    figures_json,
    inline_provider,
)
from moderation.services.policy import policy_active
from moderation.verdicts import rule_text

logger = logging.getLogger(__name__)

BACKTEST_TASK = "moderation.tasks.backtest_run"
BACKTEST_SLICE_S = 20.0  # one task's share of a worker: the pipeline's own jobs run between slices


def backtest_start(*, candidate: ModerationPolicy, user=None, since: datetime | None = None, limit: int | None = None,
                   data: str = "", provider_name: str | None = None, enqueue: bool = True) -> Backtest:
    """Freeze the examples and queue the backtest (after commit, unless `enqueue` is False: the
    command runs it in its own process). EvaluationError for a labelled file that cannot be read
    or a provider that cannot judge here; nothing is written then."""
    provider_name = provider_name or settings.MODERATION_PROVIDER
    inline_provider(provider_name)  # one that answers by callback cannot judge a backtest
    if limit is not None and limit < 1:
        raise EvaluationError("the limit must be at least 1")
    if data:
        rows = [HumanExample(example, None) for example in examples_read(Path(data))]
    else:
        rows = human_examples(since=since, limit=limit)
    now = timezone.now()
    with transaction.atomic():
        backtest = Backtest.objects.create(
            candidate=candidate, baseline=policy_active(), provider=provider_name, since=since, limit=limit,
            data=data, total=len(rows), created_by=user, beat_at=now)
        BacktestItem.objects.bulk_create(
            [BacktestItem(backtest=backtest, position=row.example.row, review_id=row.review_id,
                          text=row.example.text if row.review_id is None else "", label=row.example.label,
                          language=row.example.language or "", category=row.example.category or "")
             for row in rows], batch_size=2000)
        if enqueue:
            enqueue_on_commit(BACKTEST_TASK, backtest_id=backtest.pk)
    logger.info("backtest %s of %s over %s examples started by %s", backtest.pk, candidate, len(rows), user)
    return backtest


def backtest_cancel(*, backtest_id: int, user) -> Backtest:
    """Ask a live backtest to stop: its worker stops between two chunks."""
    with transaction.atomic():
        backtest = Backtest.objects.select_for_update().get(pk=backtest_id)
        if backtest.status not in BACKTEST_LIVE_STATUSES:
            raise NotApplicable(f"this backtest is {backtest.get_status_display().lower()}")
        if backtest.cancel_requested_at is None:
            backtest.cancel_requested_at = timezone.now()
            backtest.save(update_fields=["cancel_requested_at"])
    logger.info("backtest %s: cancellation asked by %s", backtest_id, user)
    return backtest


def backtest_run(*, backtest_id: int, deadline: float, enqueue_rest: bool = True) -> str:
    """Judge pending items until `deadline` (time.monotonic()), then enqueue the rest as a new
    slice (or, with `enqueue_rest` False, return and let the caller call again). Safe to run
    twice at once: chunks are taken with SKIP LOCKED, and the figures are written once."""
    backtest = Backtest.objects.select_related("candidate", "baseline").get(pk=backtest_id)
    if backtest.status not in BACKTEST_LIVE_STATUSES:
        return f"nothing to do: {backtest.get_status_display().lower()}"
    Backtest.objects.filter(pk=backtest.pk, status=BacktestStatus.QUEUED).update(
        status=BacktestStatus.RUNNING, started_at=timezone.now(), beat_at=timezone.now())
    try:
        provider = inline_provider(backtest.provider)
        while time.monotonic() < deadline:
            if Backtest.objects.filter(pk=backtest.pk, cancel_requested_at__isnull=False).exists():
                return _finish(backtest, BacktestStatus.CANCELLED, why="cancelled")
            if not _judge_next_chunk(backtest, provider):
                if BacktestItem.objects.filter(backtest=backtest, done=False).exists():
                    return "the rest is being judged by another worker"  # it finishes the backtest
                return _complete(backtest)
    except EvaluationError as exc:
        return _finish(backtest, BacktestStatus.FAILED, why=str(exc))
    if enqueue_rest:
        with transaction.atomic():
            Backtest.objects.filter(pk=backtest.pk).update(beat_at=timezone.now())
            enqueue_on_commit(BACKTEST_TASK, backtest_id=backtest.pk)
    return f"{backtest.judged} of {backtest.total} judged; the rest in the next slice"


def _judge_next_chunk(backtest: Backtest, provider) -> bool:
    """Judge the next pending chunk, in three steps, as dispatch does (docs/design.md, invariant
    6): lease the chunk's items (a transaction; SKIP LOCKED, and past other workers' live leases),
    judge them (none: the provider may be a server across the network), and record the outcomes
    of the items still leased to this worker (a transaction). False when no item is left to take."""
    lease, now = uuid.uuid4(), timezone.now()
    with transaction.atomic():
        items = list(BacktestItem.objects.select_for_update(skip_locked=True)
                     .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now), backtest=backtest, done=False)
                     .order_by("position")[:CHUNK])
        if not items:
            return False
        BacktestItem.objects.filter(pk__in=[item.pk for item in items]).update(
            lease=lease, leased_until=now + QUALITY_LEASE)
    count = AnswerCount()
    candidate, baseline = judge_chunk(_rows(items), candidate=backtest.candidate, baseline=backtest.baseline,
                                      provider_name=backtest.provider, provider=provider, count=count)
    with transaction.atomic():
        # Items whose lease ran out meanwhile were taken over by another worker: theirs count.
        still_mine = set(BacktestItem.objects.select_for_update()
                         .filter(pk__in=[item.pk for item in items], lease=lease, done=False)
                         .values_list("pk", flat=True))
        judged = []
        for item, c, b in zip(items, candidate, baseline, strict=True):
            if item.pk in still_mine:
                item.done, item.candidate, item.baseline = True, _outcome(c), _outcome(b)
                item.lease, item.leased_until = None, None
                judged.append(item)
        BacktestItem.objects.bulk_update(judged, ["done", "candidate", "baseline", "lease", "leased_until"],
                                         batch_size=1000)
        backtest.judged += len(judged)
        Backtest.objects.filter(pk=backtest.pk).update(
            judged=F("judged") + len(judged), cached=F("cached") + count.cached,
            provider_seconds=F("provider_seconds") + count.seconds, beat_at=timezone.now())
    return True


def _rows(items: list[BacktestItem]) -> list[HumanExample]:
    """The items as examples: a review's text read from its content now (an erased one is empty)."""
    contents = {review.pk: review.content for review in
                ContentReview.objects.filter(pk__in=[i.review_id for i in items if i.review_id])
                .select_related("content")}
    rows = []
    for item in items:
        text = item.text
        if item.review_id is not None:
            content = contents.get(item.review_id)
            text = rule_text(content) if content is not None and content.erased_at is None else ""
        rows.append(HumanExample(Example(row=item.position, line=item.position, text=text, label=item.label,
                                         language=item.language or None, category=item.category or None),
                                 item.review_id))
    return rows


def _outcome(judged: Judged) -> list:
    return [judged.outcome.value, judged.score, judged.category, list(judged.rules), judged.error]


def _judged(example: Example, outcome: list) -> Judged:
    label, score, category, rules, error = outcome
    return Judged(example, ReviewStatus(label), score, tuple(rules), error=error, category=category)


def _complete(backtest: Backtest) -> str:
    """Every item is judged: the figures of both versions, and the changed reviews."""
    items = list(BacktestItem.objects.filter(backtest=backtest).order_by("position"))
    rows = _rows(items)
    candidate = [_judged(row.example, item.candidate) for row, item in zip(rows, items, strict=True)]
    baseline = [_judged(row.example, item.baseline) for row, item in zip(rows, items, strict=True)]
    changes = changes_of(rows, candidate, baseline)
    source = backtest.data or "decisions by moderators"
    with transaction.atomic():
        updated = Backtest.objects.filter(pk=backtest.pk, status__in=BACKTEST_LIVE_STATUSES).update(
            status=BacktestStatus.DONE, finished_at=timezone.now(),
            figures=figures_json(evaluation_figures(candidate), policy=backtest.candidate,
                                 provider_name=backtest.provider, data=source) if items else {},
            baseline_figures=figures_json(evaluation_figures(baseline), policy=backtest.baseline,
                                          provider_name=backtest.provider, data=source) if items else {},
            changes=[change.as_json() for change in changes[:CHANGES_KEPT]], changed=len(changes))
    if updated:
        logger.info("backtest %s done: %s examples, %s decisions changed", backtest.pk, len(items), len(changes))
    return f"done: {len(items)} judged, {len(changes)} decisions changed"


def _finish(backtest: Backtest, status: str, *, why: str) -> str:
    Backtest.objects.filter(pk=backtest.pk, status__in=BACKTEST_LIVE_STATUSES).update(
        status=status, finished_at=timezone.now(), error="" if status == BacktestStatus.CANCELLED else why)
    logger.info("backtest %s %s: %s", backtest.pk, status, why)
    return f"{status}: {why}"


def backtests_resume(*, now: datetime | None = None, limit: int = 20) -> list[int]:
    """Enqueue again each live backtest whose worker went silent for longer than a task's lease
    (called by every sweep; overlapping sweeps split them with SKIP LOCKED)."""
    now = now or timezone.now()
    silent_since = now - timedelta(seconds=settings.Q_CLUSTER["retry"])
    with transaction.atomic():
        ids = list(Backtest.objects.select_for_update(skip_locked=True)
                   .filter(status__in=BACKTEST_LIVE_STATUSES, beat_at__lt=silent_since)
                   .order_by("beat_at").values_list("pk", flat=True)[:limit])
        Backtest.objects.filter(pk__in=ids).update(beat_at=now)
        for pk in ids:
            logger.warning("backtest %s: no worker for %ss, enqueued again", pk, settings.Q_CLUSTER["retry"])
            enqueue_on_commit(BACKTEST_TASK, backtest_id=pk)
    return ids


def backtest_latest(policy: ModerationPolicy) -> Backtest | None:
    """The newest finished backtest of `policy` (what its activation shows)."""
    return policy.backtests.filter(status=BacktestStatus.DONE).order_by("-finished_at").first()
