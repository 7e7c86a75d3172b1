"""What became of each report, told to the client once (docs/design.md, "Reports", invariant 19).

A report is resolved once, by whichever comes first:

- a judgement of its review made after it (`reports_resolve_locked`, from the one decide path,
  in the decision's transaction): `actioned` when the decision rejects, `no_action` when it
  approves. A decision that hands the review to a human (`manual_review`) judges nothing: the
  reports wait for the human's decision, which resolves them (telling a notifier `no_action`
  while a moderator looks at the review because of its notice would be false, and once told,
  the human's decision could not be told);
- the expiry job (`reports_expire_due`): a `user` report still open after the active policy's
  `report_expiry_days` is `expired`. Notices never expire: a human decides each;
- at once, where no judgement will come (`report_resolve_on_filing_locked`, from report_file;
  `reports_resolve_erased_locked`, from erasure): a notice filed on a review already rejected
  (which gets no transition) is `actioned`, citing the rejection in force, so the notifier learns
  that the content is down (DSA Art. 16(5)); a report of erased content, or open when its content
  is erased, is resolved citing the decision in force (`no_action`, or `actioned` under a
  rejection): no moderator will ever look at it.

Each resolution writes one `report.resolved` row to the outbox in its transaction (a unique
constraint per report). Every resolution holds the review's row lock (the expiry job takes it
with SKIP LOCKED) and resolves only reports still open (`outcome = ''`, re-checked by its
UPDATE), so a decision, a report and the expiry job racing on one review resolve each report
once. A moderator's decision also judges the reporter (`Report.agreed`), counted on their
`Reporter` row in the same transaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from moderation.models import (
    NOTICE_KINDS,
    ContentReview,
    Decision,
    NotificationKind,
    Report,
    Reporter,
    ReportKind,
    ReportOutcome,
    ReviewStatus,
)
from moderation.db.one_statement import OneStatement, Read
from moderation.services.outbox import outbox_row, outbox_write, report_resolved_body
from moderation.services.policy import policy_active

# The labels that judge a review's reports; `manual_review` hands it to a human instead.
JUDGING_LABELS = (ReviewStatus.APPROVED, ReviewStatus.REJECTED)


def report_outcome(label: str) -> ReportOutcome:
    """A judged report's outcome from the decision that resolves it."""
    return ReportOutcome.ACTIONED if label == ReviewStatus.REJECTED else ReportOutcome.NO_ACTION


# How strong a report's kind is, as `reports_open_read` answers (the strongest open one).
OPEN_KIND_RANK = {ReportKind.USER: 1, ReportKind.DSA_NOTICE: 2, ReportKind.TRUSTED_FLAGGER: 3}
_RANK_SQL = "CASE kind " + " ".join(f"WHEN '{kind}' THEN {rank}" for kind, rank in OPEN_KIND_RANK.items()) + " END"


def reports_open_read(writes: OneStatement, review: ContentReview) -> Read:
    """Whether `review` has an open report, and the strongest kind among them (OPEN_KIND_RANK;
    NULL: none), asked in the statement that inserts its decision:
    most reviews are never reported, and their decisions pay no round trip for reports. Under
    the review's row lock the answer holds until the decision resolves them: report_file and the
    expiry job take that lock too."""
    return writes.read(
        f"SELECT max({_RANK_SQL}) FROM moderation_report WHERE review_id = %s AND outcome = ''", (review.pk,))


def reports_resolve_locked(review: ContentReview, decision: Decision, *, by_moderator: bool) -> int:
    """Resolve every open report of `review` by `decision`; returns how many.

    Call from the decide path, holding the review's row lock, in the decision's transaction.
    report_file takes the same lock, so every open report came before this decision; one filed
    after it waits for the commit and finds the decision in force (it stays open for the next).
    `by_moderator`: a moderator's decision judges the reporters too (`agreed`), else NULL.
    A re-decision (an appeal's) finds its reports resolved already: once per report.
    """
    if decision.label not in JUDGING_LABELS:
        return 0
    agreed = decision.label == ReviewStatus.REJECTED if by_moderator else None
    return len(_resolve_locked(review, decision.pk, report_outcome(decision.label), agreed))


def report_resolve_on_filing_locked(review: ContentReview, report: Report) -> bool:
    """Resolve a report just filed that no decision will judge: a notice on a review already
    rejected (`actioned`, citing the rejection in force), or any report of erased content (by the
    decision in force). Call from report_file, holding the review's row lock. Returns whether it
    resolved it, setting the resolution on `report` as stored."""
    erased = review.content.erased_at is not None
    noticed_rejected = report.kind in NOTICE_KINDS and review.status == ReviewStatus.REJECTED
    if review.decision_id is None or not (erased or noticed_rejected):
        return False
    now = timezone.now()
    outcome, resolved = _resolve_by_decision_in_force_locked(review, now=now, report_ids=[report.pk])
    if not resolved:
        return False
    report.outcome, report.resolved_at, report.resolved_by_id, report.agreed = outcome, now, review.decision_id, None
    return True


def reports_resolve_erased_locked(review: ContentReview, *, now: datetime) -> int:
    """Resolve the open reports of a review whose content was just erased, by the decision in force:
    erasure takes it out of every review queue, so no moderator will judge them. Call from the
    erasure, holding the review's row lock, after its decisions (a rejection under appeal, a
    hand-off of content still in moderation)."""
    if review.decision_id is None:  # erasure decides a review that had none: unreachable, kept safe
        return 0
    return len(_resolve_by_decision_in_force_locked(review, now=now)[1])


def _resolve_by_decision_in_force_locked(review: ContentReview, *, now: datetime,
                                         report_ids: list | None = None) -> tuple[ReportOutcome, list[tuple]]:
    """Resolve open reports (all, or `report_ids`) by the decision in force, where no judgement
    will come after them: no moderator agreed, so no reporter is counted."""
    label = Decision.objects.values_list("label", flat=True).get(pk=review.decision_id)
    outcome = report_outcome(label)
    return outcome, _resolve_locked(review, review.decision_id, outcome, None, now=now, report_ids=report_ids)


def _resolve_locked(review: ContentReview, decision_id, outcome: ReportOutcome, agreed: bool | None, *,
                    now: datetime | None = None, report_ids: list | None = None) -> list[tuple]:
    """One statement resolves the open reports (a review may have thousands), returning them;
    then their notifications in bulk and, when a moderator judged them, their reporters' counts.
    Every caller holds the review's row lock, as the expiry job does before it expires any of
    its reports; `outcome = ''` is re-checked all the same, under each report's row lock, so
    nothing resolves a report twice (a unique constraint on its notification stands behind)."""
    now = now or timezone.now()
    only = "AND id = ANY(%(ids)s)" if report_ids is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""UPDATE moderation_report SET outcome = %(outcome)s, resolved_at = %(now)s,
                       resolved_by_id = %(decision)s, agreed = %(agreed)s
                WHERE review_id = %(review)s AND outcome = '' {only}
                RETURNING id, reporter_id""",
            {"outcome": str(outcome), "now": now, "decision": decision_id, "agreed": agreed, "review": review.pk,
             "ids": report_ids},
        )
        resolved = cursor.fetchall()
    if not resolved:
        return []
    _announce([(review, report_id, reporter_id, outcome) for report_id, reporter_id in resolved])
    if agreed is not None:
        reporters_count_locked(review.client_id, [reporter_id for _, reporter_id in resolved], agreed=agreed)
    return resolved


def reporters_count_locked(client_id: int, reporter_ids: Iterable[str], *, agreed: bool) -> None:
    """Count one judged report for each reporter (`resolved`, and `actioned` when the moderator
    agreed), creating their rows as needed.

    Lock order: a decision holds its review's lock, then locks its reporters in reporter_id
    order (the sorted insert, then the sorted SELECT FOR NO KEY UPDATE, which a report's KEY SHARE read
    of the reporter does not wait for); the UPDATE after it touches
    only rows it holds. Two decisions on different reviews that share reporters therefore
    wait for each other in one order and never deadlock, and neither holds a reporter while
    waiting for a review.
    """
    ordered = sorted(set(reporter_ids))
    Reporter.objects.bulk_create([Reporter(client_id=client_id, reporter_id=rid) for rid in ordered],
                                 ignore_conflicts=True, batch_size=1000)
    rows = Reporter.objects.filter(client_id=client_id, reporter_id__in=ordered)
    locked = list(rows.select_for_update(no_key=True).order_by("reporter_id").values_list("pk", flat=True))
    Reporter.objects.filter(pk__in=locked).update(resolved=F("resolved") + 1,
                                                  actioned=F("actioned") + (1 if agreed else 0))


def _announce(resolved: list[tuple]) -> None:
    """One `report.resolved` row per report, in bulk (`outbox_write`: each client's first few
    enqueued, the others left in its backlog for the sweep: thousands of reports cost the shared
    job queue a few jobs, not one each)."""
    rows = []
    for review, report_id, reporter_id, outcome in resolved:
        row = outbox_row(review, kind=NotificationKind.REPORT_RESOLVED,
                         body=report_resolved_body(review, report_id=report_id, reporter_id=reporter_id,
                                                   outcome=outcome))
        row.report_id = report_id
        rows.append(row)
    outbox_write(rows)


def reports_expire_due(*, now: datetime | None = None, batch: int = 500, batches: int = 100,
                       deadline: float | None = None) -> int:
    """Expire the `user` reports still open after the active policy's `report_expiry_days`
    (`expired`, no decision cited); returns how many this call expired.

    Batches of up to `batch`, oldest first, each its own transaction, until none is left due, at
    most `batches` and none begun past `deadline` (time.monotonic()). Each batch locks the
    reports' reviews with SKIP LOCKED (`_expire_batch`): two clusters running the job at once
    take different reviews' reports, and a review a decision holds is left to it (its reports
    are judged, or expired by the next run). A review skipped once is not asked for again in
    this run, so every batch makes progress and the run ends."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=policy_active().report_expiry_days)
    expired, skipped = 0, set()
    for _ in range(batches):
        if deadline is not None and time.monotonic() > deadline:
            break
        due = (Report.objects.filter(outcome="", kind=ReportKind.USER, created_at__lte=cutoff)
               .exclude(review_id__in=skipped).order_by("created_at").values_list("pk", "review_id")[:batch])
        count, candidates = _expire_batch(due, now=now, skipped=skipped)
        expired += count
        if candidates < batch:  # that was the last of them
            break
    return expired


def _expire_batch(due, *, now: datetime, skipped: set) -> tuple[int, int]:
    """Expire the reports `due` (pk, review_id) still open, in one transaction; returns how many,
    and how many were due. Adds the reviews it could not lock to `skipped`.

    Locks in the decide path's order, reviews then reports: a decision holds its review and
    waits for the reports it resolves, and a report's notification takes a share lock on its
    review when the transaction commits (its foreign key), so locking reports first would
    deadlock with it. The reviews are taken with SKIP LOCKED: those a decision, a report or the
    other cluster holds are left (their reports are resolved there, or later); under the
    reviews' locks nobody else resolves their reports, re-checked open all the same (another
    cluster may have expired them since `due` was read)."""
    with transaction.atomic():
        candidates = list(due)
        wanted = {review_id for _, review_id in candidates}
        reviews = {review.pk: review for review in ContentReview.objects.select_for_update(skip_locked=True, of=("self",))
                   .filter(pk__in=wanted).select_related("content", "client")}
        skipped |= wanted - reviews.keys()
        reports = list(Report.objects.filter(pk__in=[pk for pk, review_id in candidates if review_id in reviews],
                                             outcome="").order_by("created_at", "pk")
                       .values_list("pk", "review_id", "reporter_id"))
        if reports:
            Report.objects.filter(pk__in=[pk for pk, _, _ in reports]).update(outcome=ReportOutcome.EXPIRED,
                                                                              resolved_at=now)
            _announce([(reviews[review_id], pk, reporter_id, ReportOutcome.EXPIRED)
                       for pk, review_id, reporter_id in reports])
    return len(reports), len(candidates)
