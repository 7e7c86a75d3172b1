"""django-q2 tasks: thin wrappers that take ids, bind log context and call one service.

The broker delivers at least once, so each task is safe to run twice: a second claim loses,
a second dispatch finds the attempt in flight or the request closed, a second sweep finds
nothing due.
"""

from __future__ import annotations

from django.conf import settings

from audit import context
from callbacks.services import callbacks_sweep
from moderation import services
from moderation.queue import new_job_id, worker_id


def moderate_review(review_id, job_id: str = "", web_request_id: str = "") -> str:
    job_id = job_id or new_job_id()
    with context.bind(review_id=review_id, job_id=job_id, worker_id=worker_id(), request_id=web_request_id or None):
        # Work is started only while the provider's circuit lets it through: a review waits in
        # pending otherwise. Past the cooldown, one caller alone takes the trial call.
        admission = services.breaker_admit(provider=settings.MODERATION_PROVIDER)
        if admission is None:
            services.review_wait_for_provider(review_id=review_id)
            return "waiting: provider circuit open"
        request = services.review_claim(review_id=review_id, worker_id=worker_id(), job_id=job_id)
        if request is None:
            return "claim lost"
        report = services.request_dispatch(
            request_id=request.pk, worker_id=worker_id(), job_id=job_id, trial=admission == services.TRIAL
        )
        return f"{report.action} {report.detail}".strip()


def dispatch_request(request_id: int, job_id: str = "", web_request_id: str = "") -> str:
    # (`request_id` is the moderation request's id; `web_request_id` the web request that caused it.)
    job_id = job_id or new_job_id()
    with context.bind(job_id=job_id, worker_id=worker_id(), request_id=web_request_id or None):
        report = services.request_dispatch(request_id=request_id, worker_id=worker_id(), job_id=job_id)
        return f"{report.action} {report.detail}".strip()


def deliver_notification(notification_id: int, job_id: str = "", web_request_id: str = "") -> str:
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id(), request_id=web_request_id or None):
        return services.notification_deliver(notification_id=notification_id)


def sweep(job_id: str = "", web_request_id: str = "") -> str:
    """The scheduled sweeper: unprocessed callbacks first (they may finish reviews), then reviews."""
    with context.bind(job_id=job_id or new_job_id(), worker_id=worker_id()):
        callbacks = callbacks_sweep()
        expired = services.idempotency_records_expire()
        return f"{len(callbacks)} callbacks processed, {expired} idempotency records expired, " + (
            services.reviews_sweep().summary()
        )
