"""Storing callbacks in the inbox and processing them, exactly once in effect."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from audit import context, tracing
from callbacks.models import ProviderCallback
from moderation.models import ResultOutcome
from callbacks.payload import COMPLETED, CallbackEvent, parse, redacted
from moderation.models import Cause, ModerationRequest
from moderation.db.compiled import CompiledUpdate
from moderation.validation import policy_categories
from moderation.services.policy import policy_active
from moderation.services.pipeline import request_fail_reported, review_id_for_key
from moderation.services.results import review_finalize

logger = logging.getLogger(__name__)

# The reason kept for an invalid callback that arrived after its content was erased: the parser's
# own reason may quote a value of the body.
ERASED_REASON = "invalid; its body and reason were not kept: the content it names was erased"
# Callbacks younger than this are left to the request that stored them (the fast path).
SWEEP_GRACE = timedelta(seconds=10)
# After this many failed processings the sweeper leaves a callback to an operator
# (`replay_callbacks --id`), so it cannot crowd out the others.
MAX_PROCESS_FAILURES = 5

_UPSERT = """
INSERT INTO callbacks_providercallback
    (provider, provider_event_id, event_type, idempotency_key, provider_request_id, payload_json,
     headers, received_at, processed_at, outcome, outcome_detail, duplicate_count, process_failures, process_error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0, 0, '')
ON CONFLICT (provider, provider_event_id) DO UPDATE
    SET duplicate_count = callbacks_providercallback.duplicate_count + 1,
        last_duplicate_at = EXCLUDED.received_at
RETURNING id, (xmax = 0) AS inserted, outcome,
    -- the review, for the log context: found here rather than by one more round trip
    (SELECT review_id FROM moderation_moderationrequest
     WHERE idempotency_key = callbacks_providercallback.idempotency_key) AS review_id
"""


@dataclass(frozen=True)
class Stored:
    id: int
    created: bool
    outcome: str
    review_id: object = None  # the review whose operation the callback names, if known


def callback_store(
    *,
    provider: str,
    event_id: str,
    body: str,
    headers: dict[str, str],
    event: CallbackEvent | None,
    invalid_reason: str = "",
    named_key=None,
) -> Stored:
    """Store a callback before anything acts on it (docs/design.md, invariant 5), in one statement.

    `INSERT ... ON CONFLICT DO UPDATE` makes concurrent deliveries of one event queue up on the
    unique index: one inserts the row, every other only increments its duplicate_count.
    A body that failed validation (`event` None) is stored already processed, as invalid, with
    the key it names (`named_key`, callbacks.payload.named_key) so that erasure finds it; when
    that key's content was erased already, it is stored redacted, its reason too (either may
    quote what was erased: invariant 16).
    """
    now = timezone.now()
    key = event.idempotency_key if event else named_key
    if event is None and key is not None and _content_erased(key):
        body, invalid_reason = redacted(body, known=known_categories()), ERASED_REASON
    values = [
        provider,
        event_id,
        event.type if event else "",
        key,
        event.provider_request_id if event else "",
        body,
        json.dumps(headers),
        now,
        None if event else now,
        "" if event else ResultOutcome.INVALID,
        invalid_reason,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT, values)
        row_id, inserted, outcome, review_id = cursor.fetchone()
    if not inserted:
        with context.bind(review_id=review_id):
            logger.info("duplicate delivery of %s event %s", provider, event_id)
    return Stored(id=row_id, created=inserted, outcome=outcome, review_id=review_id)


# Every callback's processing locks its inbox row with this one statement, which takes the lock of
# the review the callback names first (the scalar subquery runs once, before the row is read and
# locked): the review's row lock comes before every other lock (docs/design.md, invariant 5).
# Erasure holds it while it redacts the callbacks stored for the review, so a callback that locked
# its inbox row first and then waited for the review deadlocked with it.
_INBOX_LOCK = """
SELECT * FROM callbacks_providercallback
WHERE id = %(id)s AND processed_at IS NULL AND (
    SELECT count(*) FROM (
        SELECT FROM moderation_contentreview WHERE id = (
            SELECT request.review_id FROM moderation_moderationrequest request
            JOIN callbacks_providercallback callback ON callback.idempotency_key = request.idempotency_key
            WHERE callback.id = %(id)s)
        FOR UPDATE) AS review
) >= 0
FOR UPDATE OF callbacks_providercallback
"""

_PROCESSED = CompiledUpdate(lambda callback_id: ProviderCallback.objects.filter(pk=callback_id),
                            ("outcome", "processed_at"))


def callback_process(*, callback_id: int) -> str | None:
    """Apply a stored callback once. Returns its outcome, or None if it was already processed.

    The inbox row's lock makes the fast path and the sweeper take turns, and `processed_at`
    makes the second a no-op. (Not SKIP LOCKED: duplicate deliveries lock the row for a moment
    to count themselves, and processing must wait them out, not skip the row.) If processing
    fails, the transaction rolls back as a whole and the row stays unprocessed for the sweeper.
    """
    with transaction.atomic():
        callback = next(iter(ProviderCallback.objects.raw(_INBOX_LOCK, {"id": callback_id})), None)
        if callback is None:
            return None
        with context.bind(
            provider_event_id=callback.provider_event_id,
            idempotency_key=callback.idempotency_key,
            # The endpoint, the sweeper and replay have bound the review already.
            review_id=context.current().get("review_id")
            or (review_id_for_key(callback.idempotency_key) if callback.idempotency_key else None),
        ), tracing.continued(
            # The trace of the operation the callback answers (stored with it when it started).
            _trace_parent(callback.idempotency_key), "callback.process",
            provider_event_id=callback.provider_event_id,
        ):
            outcome = _apply(callback, parse(callback.payload_json))
            callback.outcome = outcome
            callback.processed_at = timezone.now()
            if outcome != ResultOutcome.APPLIED and _content_erased(callback.idempotency_key):
                # A late callback for erased content (an erased review is never processing, so
                # it cannot apply): it must not bring back what the provider quoted of it (16).
                callback.payload_json = redacted(callback.payload_json, known=known_categories())
                callback.save(update_fields=["outcome", "processed_at", "payload_json"])
            else:
                _PROCESSED.run(callback.pk, outcome=outcome, processed_at=callback.processed_at)
            logger.info("callback %s: %s", callback.provider_event_id, outcome)
    return outcome


def _trace_parent(idempotency_key) -> str:
    if not tracing.enabled():
        return ""  # tracing off: not one more query
    found = ModerationRequest.objects.filter(idempotency_key=idempotency_key).values_list("trace_parent", flat=True)
    return next(iter(found), "")


def known_categories() -> frozenset[str]:
    """Category names that are the platform's own (the active policy's), not a provider's words."""
    return frozenset(policy_categories(policy_active()))


def _content_erased(idempotency_key) -> bool:
    return ModerationRequest.objects.filter(
        idempotency_key=idempotency_key, review__content__erased_at__isnull=False
    ).exists()


def _apply(callback: ProviderCallback, event: CallbackEvent) -> str:
    if event.type == COMPLETED:
        return review_finalize(
            idempotency_key=event.idempotency_key,
            result=event.result,
            cause=Cause.PROVIDER_CALLBACK,
            callback_id=callback.pk,
            provider=callback.provider,
        )
    return request_fail_reported(
        idempotency_key=event.idempotency_key, error=event.error or "reported failed", provider=callback.provider
    )


def callback_process_safely(*, callback_id: int) -> str | None:
    """Process, and on failure log it (with the ids the caller bound) and count it: the sweeper
    tries again, up to MAX_PROCESS_FAILURES times."""
    try:
        return callback_process(callback_id=callback_id)
    except Exception as exc:
        logger.exception("processing callback %s failed; the sweeper will retry it", callback_id)
        ProviderCallback.objects.filter(pk=callback_id).update(
            process_failures=F("process_failures") + 1, process_error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        return None


def callbacks_sweep(*, now: datetime | None = None, limit: int = 500) -> list[int]:
    """Process callbacks stored but never processed (a crash between store and process)."""
    now = now or timezone.now()
    waiting = list(
        ProviderCallback.objects.filter(
            processed_at__isnull=True, received_at__lt=now - SWEEP_GRACE, process_failures__lt=MAX_PROCESS_FAILURES
        )
        .annotate(review_id=Subquery(
            ModerationRequest.objects.filter(idempotency_key=OuterRef("idempotency_key")).values("review_id")[:1]
        ))
        .order_by("received_at")
        .values_list("pk", "idempotency_key", "review_id")[:limit]
    )
    done = []
    for pk, key, review_id in waiting:
        with context.bind(idempotency_key=key, review_id=review_id):
            if callback_process_safely(callback_id=pk) is not None:
                done.append(pk)
    if done:
        logger.info("sweep: processed %d waiting callbacks", len(done))
    return done


def callback_replay(*, callback_id: int) -> str:
    """Run a stored callback again. An unprocessed one is processed; a processed one is applied
    again (harmless: it comes back duplicate, stale...) and keeps its first outcome."""
    callback = ProviderCallback.objects.get(pk=callback_id)
    if callback.outcome == ResultOutcome.INVALID:
        return ResultOutcome.INVALID
    with context.bind(
        provider_event_id=callback.provider_event_id,
        idempotency_key=callback.idempotency_key,
        review_id=review_id_for_key(callback.idempotency_key) if callback.idempotency_key else None,
    ):
        if callback.processed_at is None:
            outcome = callback_process(callback_id=callback.pk)
            if outcome is not None:
                return outcome
            # None: processed meanwhile by someone else; replaying that below is harmless.
        return _apply(callback, parse(callback.payload_json))
