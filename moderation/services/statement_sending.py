"""Sending statements of reasons to the DSA Transparency Database (docs/transparency.md, "Sending").

`statements_submit` takes pending statements in batches of at most 100, each batch leased in a
short transaction (`FOR UPDATE SKIP LOCKED`, then `locked_until`), so any number of senders (the
notification cluster's schedule on several machines, `submit_statements`) never send one
statement at once; the POST runs with no transaction open, through the outbound guard
(moderation/netguard.py, as webhooks). Then, by the answer:

- 201 naming every statement of the batch: all are submitted (a 2xx that is not that, a login
  page or a proxy's, stored nothing: it fails like a 5xx);
- 422 naming statements (`statement_<index>`): those are rejected, their errors kept; the others
  are released and go in the next batch at once (the database stores nothing of a refused batch);
- 422 naming `existing_puids`: those count as submitted (the database has them: an earlier send
  whose answer was lost), the others are released likewise;
- anything else (5xx, 401, 429, a timeout, a refused connection, an answer that is not the
  database's): the batch waits, with exponential backoff per statement, and the run stops, since
  the next batch would fare no better. Nothing is lost: a pending statement is sent until the
  database has it.

A sender that dies mid-send leaves its lease to expire; the next sender sends the batch again and
meets the duplicate answer for what went in.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from moderation.errors import UnsafeWebhookUrl
from moderation.models import StatementStatus, TransparencyStatement
from moderation.netguard import guarded_transport, webhook_url_check

logger = logging.getLogger(__name__)

BATCH_MAX = 100  # the database's limit for one request
STATEMENTS_PATH = "/api/v1/statements"
ANSWER_MAX_BYTES = 8 * 1024 * 1024  # the database's answer for 100 statements is well under 1 MiB
ERROR_TEXT_MAX = 2000


@dataclass
class SendReport:
    """What one run did: statements submitted and rejected by it, and those still pending after it."""

    submitted: int = 0
    rejected: int = 0
    pending: int = 0
    batches: int = 0
    error: str = ""

    def line(self) -> str:
        return f"submitted {self.submitted}, rejected {self.rejected}, pending {self.pending}"


@dataclass(frozen=True)
class _Leased:
    pk: int
    puid: str
    body: dict
    attempts: int


def statement_backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(settings.DSA_TDB_BACKOFF_S * 2 ** max(attempts - 1, 0), settings.DSA_TDB_BACKOFF_MAX_S))


def _lease_length() -> timedelta:
    # Outlives the POST (its transport gives up at DSA_TDB_TIMEOUT_S) and the bookkeeping after it.
    return timedelta(seconds=settings.DSA_TDB_TIMEOUT_S * 2 + 30)


def _lease(*, now: datetime, force: bool, size: int) -> tuple[list[_Leased], datetime]:
    """Take up to `size` pending statements no other sender holds: due ones, or all with `force`.
    Returns them and the lease (their `locked_until`): the answer is recorded only on rows that
    still carry it, so a sender whose lease ran out never writes over the next sender's."""
    due = Q(status=StatementStatus.PENDING) & (Q(locked_until__isnull=True) | Q(locked_until__lte=now))
    if not force:
        due &= Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    with transaction.atomic():
        # SKIP LOCKED: two senders leasing at once take disjoint batches, neither waits; the
        # lease (locked_until) then keeps the batch from every sender until its answer is in.
        rows = list(TransparencyStatement.objects.select_for_update(skip_locked=True).filter(due)
                    .order_by(F("next_attempt_at").asc(nulls_first=True), "id")
                    .values_list("pk", "puid", "body", "attempts")[:size])
        lease = now + _lease_length()
        if rows:
            TransparencyStatement.objects.filter(pk__in=[row[0] for row in rows]).update(
                locked_until=lease, attempts=F("attempts") + 1)
    return [_Leased(pk, puid, body, attempts + 1) for pk, puid, body, attempts in rows], lease


def _post(batch: list[_Leased]) -> tuple[int | None, object, str]:
    """POST the batch; (status, parsed JSON answer or None, error text). No transaction is open."""
    url = settings.DSA_TDB_URL + STATEMENTS_PATH
    body = json.dumps({"statements": [leased.body for leased in batch]}, ensure_ascii=False).encode()
    headers = {"Authorization": f"Bearer {settings.DSA_TDB_TOKEN}", "Accept": "application/json",
               "Content-Type": "application/json", "User-Agent": "moderation-statements/1"}
    try:
        transport = guarded_transport(deadline=time.monotonic() + settings.DSA_TDB_TIMEOUT_S)
        with httpx.Client(transport=transport, timeout=settings.DSA_TDB_TIMEOUT_S, follow_redirects=False) as http, \
                http.stream("POST", url, content=body, headers=headers) as response:
            raw = b""
            for chunk in response.iter_bytes():
                raw += chunk
                if len(raw) > ANSWER_MAX_BYTES:
                    return response.status_code, None, f"HTTP {response.status_code}: answer over {ANSWER_MAX_BYTES} bytes"
            status = response.status_code
    except httpx.HTTPError as exc:
        return None, None, f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX]
    try:
        return status, json.loads(raw), ""
    except ValueError:
        return status, None, f"HTTP {status}: {raw[:200].decode(errors='replace')}"


def _named(batch: list[_Leased], errors: dict) -> tuple[dict[int, dict], set[int]]:
    """From a 422's errors: the refused statements (pk -> their errors) and those already stored."""
    refused: dict[int, dict] = {}
    for key, value in errors.items():
        if isinstance(key, str) and key.startswith("statement_") and key[len("statement_"):].isdigit():
            index = int(key[len("statement_"):])
            if index < len(batch):
                refused[batch[index].pk] = value if isinstance(value, dict) else {"statement": [str(value)]}
    existing = errors.get("existing_puids")
    by_puid = {leased.puid: leased.pk for leased in batch}
    stored = {by_puid[str(puid)] for puid in existing if str(puid) in by_puid} if isinstance(existing, list) else set()
    return refused, stored


def _summary(errors: dict) -> str:
    return "; ".join(f"{field}: {' '.join(map(str, messages)) if isinstance(messages, list) else messages}"
                     for field, messages in errors.items())[:ERROR_TEXT_MAX]


def _uuids(answer: object) -> dict[str, str]:
    stored = answer.get("statements") if isinstance(answer, dict) else None
    return {str(s.get("puid")): str(s.get("uuid", ""))[:64] for s in stored or [] if isinstance(s, dict)}


def _stored_all(batch: list[_Leased], status: int | None, uuids: dict[str, str]) -> bool:
    """The database's success: 201 with the statements it stored (`uuids`), every one of the
    batch among them. Anything else that says 2xx (a login page, a proxy, a wrong path) stored nothing."""
    return status == 201 and set(uuids) >= {leased.puid for leased in batch}


def _record(batch: list[_Leased], lease: datetime, status: int | None, answer: object, error: str, now: datetime,
            report: SendReport) -> bool:
    """Apply the database's answer to the batch; True if the run may go on with the next batch."""
    pks = [leased.pk for leased in batch]
    ours = TransparencyStatement.objects.filter(status=StatementStatus.PENDING, locked_until=lease)
    uuids = _uuids(answer)
    if _stored_all(batch, status, uuids):
        ours.filter(pk__in=pks).update(
            status=StatementStatus.SUBMITTED, submitted_at=now, locked_until=None, last_error="",
            tdb_uuid=Case(*(When(pk=leased.pk, then=Value(uuids.get(leased.puid, ""))) for leased in batch),
                          default=Value("")))
        report.submitted += len(batch)
        return True
    errors = answer.get("errors") if status == 422 and isinstance(answer, dict) else None
    refused, stored = _named(batch, errors) if isinstance(errors, dict) else ({}, set())
    if refused or stored:
        with transaction.atomic():
            for pk, its_errors in refused.items():
                ours.filter(pk=pk).update(status=StatementStatus.REJECTED, errors=its_errors, locked_until=None,
                                          last_error=_summary(its_errors))
            ours.filter(pk__in=stored - set(refused)).update(status=StatementStatus.SUBMITTED, submitted_at=now,
                                                              already_stored=True, locked_until=None, last_error="")
            # The rest was refused only with the batch: it goes in the next one, at once.
            ours.filter(pk__in=set(pks) - set(refused) - stored).update(locked_until=None)
        report.rejected += len(refused)
        report.submitted += len(stored - set(refused))
        for pk in refused:
            logger.warning("statement %s refused by the Transparency Database: %s",
                           next(leased.puid for leased in batch if leased.pk == pk), _summary(refused[pk]))
        return True
    if not error and status is not None and 200 <= status < 300:
        error = f"HTTP {status}: not the database's answer (no stored statements for the batch)"
    error = error or (f"HTTP {status}: {_summary(errors)}" if isinstance(errors, dict) else f"HTTP {status}")
    ours.filter(pk__in=pks).update(
        locked_until=None, last_error=error[:ERROR_TEXT_MAX],
        next_attempt_at=Case(*(When(pk=leased.pk, then=Value(now + statement_backoff(leased.attempts)))
                               for leased in batch)))
    report.error = error
    logger.warning("Transparency Database unavailable (%s): %d statements wait", error, len(batch))
    return False


def statements_pending() -> int:
    return TransparencyStatement.objects.filter(status=StatementStatus.PENDING).count()


def statements_submit(*, force: bool = False, deadline: float | None = None, batch_size: int = BATCH_MAX,
                      now=None, should_stop=None) -> SendReport:
    """Send pending statements until none is due (or, with `force`, none is pending whatever its
    backoff), the database fails, `deadline` (time.monotonic()) leaves no time for one more
    batch, or `should_stop()` says so. `now` (a callable returning the time; tests) defaults to
    timezone.now."""
    clock = now or timezone.now
    report = SendReport()
    if not settings.DSA_TDB_URL:
        report.error = "DSA_TDB_URL is not set: statements are kept, not sent"
    else:
        try:
            webhook_url_check(settings.DSA_TDB_URL)
        except UnsafeWebhookUrl as exc:
            report.error = f"DSA_TDB_URL refused: {exc}"
    while not report.error and (deadline is None or time.monotonic() + settings.DSA_TDB_TIMEOUT_S < deadline):
        if should_stop is not None and should_stop():
            break
        batch, lease = _lease(now=clock(), force=force, size=min(batch_size, BATCH_MAX))
        if not batch:
            break
        report.batches += 1
        status, answer, error = _post(batch)
        if not _record(batch, lease, status, answer, error, clock(), report):
            break
    report.pending = statements_pending()
    return report
