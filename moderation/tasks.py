"""django-q2 tasks: thin wrappers that take ids, bind log context and call services, each of
which owns its transaction and re-checks state under its lock; no task writes anything itself.
`moderate_review` asks the breaker, then claims and dispatches a batch (of one, or more);
`sweep` runs the callback, idempotency and review sweeps, resumes bulk jobs whose worker died,
and beats its heartbeat; `bulk_job_run` works one slice of a bulk action; `authors_sweep`
ends suspensions and lapses strikes that are due; `reports_expire` tells
the reporters of reports left open too long; `statements_submit` sends statements of reasons to
the DSA Transparency Database; `prune` runs retention (docs/design.md,
invariant 11) and the erasures legal holds deferred; `erasures_deferred_run` runs those after a
hold is lifted.

The broker delivers at least once, so each task is safe to run twice: a second claim loses,
a second dispatch finds the attempt in flight or the request closed, a second sweep finds
nothing due.

Each task continues the trace of the work that enqueued it (`trace_parent`, audit/tracing.py),
as it continues its correlation ids (`web_request_id`).
"""

from __future__ import annotations

import time
from collections import Counter

from django.conf import settings

from audit import context, tracing
from callbacks.services import callbacks_sweep
from moderation import services
from moderation.quality import alarms, backtests, shadows
from moderation.privacy import erasure, retention
from moderation.jobs import new_job_id, worker_id


def moderate_review(review_id, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """Claim this review and up to MODERATION_BATCH_SIZE - 1 other pending ones, then dispatch
    them all (moderation/services/batch.py); a batch of one reads as the one-review path."""
    job_id = job_id or new_job_id()
    with context.bind(review_id=review_id, job_id=job_id, worker_id=worker_id(), request_id=web_request_id or None), \
            _job_span(trace_parent, "moderate_review", review_id=review_id):
        size = settings.MODERATION_BATCH_SIZE
        if size > 1:
            claimed = services.review_claimed_by_batch(review_id=review_id, job_id=job_id)
            if claimed:  # another job's batch took this review: nothing to do, nothing to write
                return claimed
        # Work is started only while the provider's circuit lets it through: a review waits in
        # pending otherwise. Past the cooldown, one caller alone takes the trial call.
        admission = services.breaker_admit(provider=settings.MODERATION_PROVIDER)
        if admission is None:
            services.review_wait_for_provider(review_id=review_id)
            return "waiting: provider circuit open"
        trial = admission == services.TRIAL  # a trial is one call: its job takes its own review only
        deadline = time.monotonic() + settings.Q_TASK_TIMEOUT_S
        claim = services.reviews_claim(review_id=review_id, worker_id=worker_id(), job_id=job_id,
                                       size=1 if trial else size)
        if not claim.requests:
            return claim.lost
        reports = services.requests_dispatch_batch(
            requests=claim.requests, worker_id=worker_id(), job_id=job_id, deadline=deadline, trial=trial
        )
        if len(reports) == 1:
            return f"{reports[0].action} {reports[0].detail}".strip()
        actions = Counter(report.action for report in reports)
        return f"batch of {len(claim.requests)}: " + ", ".join(f"{n} {action}" for action, n in sorted(actions.items()))


def dispatch_request(request_id: int, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    # (`request_id` is the moderation request's id; `web_request_id` the web request that caused it.)
    job_id = job_id or new_job_id()
    with context.bind(job_id=job_id, worker_id=worker_id(), request_id=web_request_id or None), \
            _job_span(trace_parent, "dispatch_request", moderation_request_id=request_id):
        report = services.request_dispatch(request_id=request_id, worker_id=worker_id(), job_id=job_id)
        return f"{report.action} {report.detail}".strip()


def deliver_notification(notification_id: int, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id(), request_id=web_request_id or None), \
            _job_span(trace_parent, "deliver_notification", notification_id=notification_id):
        return services.notification_deliver(notification_id=notification_id)


def sweep(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """The scheduled sweeper: unprocessed callbacks first (they may finish reviews), then reviews."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), _job_span(trace_parent, "sweep"):
        callbacks = callbacks_sweep()
        expired = services.idempotency_records_expire()
        summary = f"{len(callbacks)} callbacks processed, {expired} idempotency records expired, " + (
            services.reviews_sweep().summary()
        ) + f", {len(services.bulk_jobs_resume())} bulk jobs resumed, {len(backtests.backtests_resume())} backtests resumed"
        # django-q2 stores no successful results (settings.Q_CLUSTER["save_limit"]): /readyz
        # reads this instead. Written once the sweep completed; a failing sweep is stored as a
        # failed task and beats nothing.
        services.heartbeat_beat(name=services.SWEEPER, detail=summary)
        services.notifier_schedule_ensure()
        return summary


def reviews_worker_lost(worker_ids: list, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """Enqueued by a cluster that rebuilt itself after a process died (moderation/management/cluster.py):
    the reviews its killed workers had claimed are taken over now, not at the silence deadline."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), \
            _job_span(trace_parent, "reviews_worker_lost"):
        taken = services.reviews_worker_lost(worker_ids=worker_ids)
        return f"{len(taken)} reviews of dead workers dispatched again"


def bulk_job_run(bulk_job_id: int, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """One slice of a bulk action (moderation/services/bulk.py): at most BULK_SLICE_S, within the
    task's timeout, then the rest is enqueued behind the pipeline's own jobs."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id(), request_id=web_request_id or None), \
            _job_span(trace_parent, "bulk_job_run", bulk_job_id=bulk_job_id):
        slice_s = min(services.BULK_SLICE_S, settings.Q_TASK_TIMEOUT_S / 2)
        return services.bulk_job_run(job_id=bulk_job_id, deadline=time.monotonic() + slice_s)


def backtest_run(backtest_id: int, job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """One slice of a backtest (moderation/quality/backtests.py): at most BACKTEST_SLICE_S, within
    the task's timeout, then the rest is enqueued behind the pipeline's own jobs."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id(), request_id=web_request_id or None), \
            _job_span(trace_parent, "backtest_run", backtest_id=backtest_id):
        slice_s = min(backtests.BACKTEST_SLICE_S, settings.Q_TASK_TIMEOUT_S / 2)
        return backtests.backtest_run(backtest_id=backtest_id, deadline=time.monotonic() + slice_s)


def quality_minute(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """Scheduled every minute on the notification cluster (services.notifier_schedule_ensure),
    never on the moderation cluster that makes the live decisions: the automatic decisions are
    counted per hour for the anomaly alarms (moderation/quality/alarms.py), and every live shadow
    judges what was decided since its last run (moderation/quality/shadows.py)."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), _job_span(trace_parent, "quality_minute"):
        counted = alarms.decisions_roll_up()
        slice_s = min(shadows.SHADOW_SLICE_S, settings.Q_TASK_TIMEOUT_S / 2)
        judged = shadows.shadows_run(deadline=time.monotonic() + slice_s)
        return f"{counted} decisions counted, {judged} judged in shadow"


def notifier_heartbeat(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """Scheduled on the notification cluster only (services.notifier_schedule_ensure): /readyz
    reads its beat to know that this deployment's notifications are being delivered."""
    services.heartbeat_beat(name=services.notifier(), detail=worker_id())
    return "beat"


def authors_sweep(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """The authors' schedule (moderation.authors_sweep): suspensions whose `until` passed end
    (`author.restored`), strikes older than their window lapse. Safe on several clusters at once:
    each author changes under its lock, and a suspension ends only while it is still in force."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), _job_span(trace_parent, "authors_sweep"):
        # Half the task's time: the batch under way when it runs out still ends before the timeout.
        done = services.authors_sweep(deadline=time.monotonic() + settings.Q_TASK_TIMEOUT_S / 2)
        return f"{done['restored']} suspensions ended, {done['lapsed']} strikes lapsed"


def reports_expire(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """The reports' schedule (moderation.reports_expire): user reports still open after the active
    policy's report_expiry_days are told `expired`. Safe on several clusters at once: each batch
    takes its reports with SKIP LOCKED and expires only those still open."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), _job_span(trace_parent, "reports_expire"):
        # Half the task's time, as authors_sweep: the batch under way still ends before the timeout.
        expired = services.reports_expire_due(deadline=time.monotonic() + settings.Q_TASK_TIMEOUT_S / 2)
        return f"{expired} reports expired"


def statements_submit(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """The statements' schedule (on the notification cluster only: services.notifier_schedule_ensure):
    statements of reasons due are sent to the DSA Transparency Database. Safe on several clusters
    at once: each batch is leased (SKIP LOCKED, then locked_until) by one sender."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()), \
            _job_span(trace_parent, "statements_submit"):
        # Within the notification cluster's task timeout (it outlives one batch's POST: settings).
        timeout = settings.Q_CLUSTER["ALT_CLUSTERS"][settings.NOTIFY_CLUSTER]["timeout"]
        sent = services.statements_submit(deadline=time.monotonic() + timeout - 10)
        return sent.line() + (f" ({sent.error})" if sent.error else "")


def prune(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """The daily retention run (moderation/privacy/retention.py): safe to overlap, each batch SKIP LOCKED."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()):
        counts = retention.prune(for_real=True)
        held = retention.prune_held()
        erased, still_held = erasure.erasures_deferred_run()  # a hold that expired since yesterday's run
        return (", ".join(f"{n} {name}" for name, n in counts.items()) + " deleted; "
                + ", ".join(f"{n} {name}" for name, n in held.items()) + " held, kept; "
                + f"{erased} deferred erasures run, {still_held} still held")


def erasures_deferred_run(job_id: str = "", web_request_id: str = "", trace_parent: str = "") -> str:
    """After a legal hold is lifted (moderation/privacy/holds.py): the erasures it deferred run.
    Safe twice: each asks again under the review's lock, and an erased content is erased once."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()):
        erased, still_held = erasure.erasures_deferred_run()
        return f"{erased} deferred erasures run, {still_held} still held"


def _job_span(trace_parent: str, name: str, **attributes):
    return tracing.continued(trace_parent, f"job {name}", kind=tracing.SpanKind.CONSUMER,
                             job_id=context.current().get("job_id"), **attributes)
