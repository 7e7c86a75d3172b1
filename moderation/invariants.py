"""The invariants of docs/design.md, checked against the database: by the property-based test after every
step, and by `manage.py race_lab` after a run. Each check returns violations, never raises."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from decimal import Decimal

from django.db import connection
from django.db.models import Count, F, Q

from audit.models import ReviewTransition
from callbacks.models import ProviderCallback
from moderation.media.invariants import media_violations
from moderation.services.preservation import reportable_category, snapshot_digest
from moderation.transparency.statements import fixed_wording
from moderation.models import (
    LegalHold,
    FINAL_STATUSES,
    RESTRICTIVE_ACTIONS,
    STANDING_FOR_ACTION,
    STANDING_RANK,
    ActionCause,
    RestrictionEnd,
    Standing,
    Appeal,
    AppealStatus,
    NOTICE_KINDS,
    NotificationKind,
    Report,
    ReportEscalation,
    ReportKind,
    ReportOutcome,
    appeal_outcome,
    OPEN_REQUEST_STATUSES,
    Cause,
    ContentReview,
    Decision,
    DecisionNotification,
    DecisionSource,
    ContentErasure,
    ModerationRequest,
    ProviderAttempt,
    QaItem,
    QaKind,
    RequestStatus,
    ReviewStatus,
)

S = ReviewStatus
# docs/design.md's state machine: (from, to, cause).
LEGAL = {
    (S.PENDING, S.PROCESSING, Cause.JOB_STARTED),
    (S.PROCESSING, S.PROCESSING, Cause.RETRY_RECONCILE),
    *((S.PROCESSING, to, cause) for to in FINAL_STATUSES for cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK)),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.PROVIDER_FAILED),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.MANUAL_ESCALATION),
    *((src, to, Cause.MANUAL_OVERRIDE) for src in FINAL_STATUSES for to in (S.APPROVED, S.REJECTED)),
    *((src, S.PENDING, Cause.REPROCESS) for src in FINAL_STATUSES),
    (S.APPROVED, S.MANUAL_REVIEW, Cause.USER_REPORTS),
    (S.APPROVED, S.MANUAL_REVIEW, Cause.NOTICE),
    (S.REJECTED, S.MANUAL_REVIEW, Cause.APPEAL),
    (S.PENDING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    (S.PROCESSING, S.MANUAL_REVIEW, Cause.CONTENT_ERASED),
    (S.MANUAL_REVIEW, S.REJECTED, Cause.CONTENT_ERASED),  # erased under appeal: the rejection stands
    # A moderator took back their own decision of a review that waited for a human (review_undo).
    (S.APPROVED, S.MANUAL_REVIEW, Cause.UNDO),
    (S.REJECTED, S.MANUAL_REVIEW, Cause.UNDO),
}
# Transitions that send a decided review to a human without a decision of their own: the
# decision they contest (its label) stays the review's until a moderator decides.
CONTESTING = {Cause.USER_REPORTS: S.APPROVED, Cause.NOTICE: S.APPROVED, Cause.APPEAL: S.REJECTED}


def _decision_matches(review: ContentReview, log: list) -> bool:
    if review.decision is None:
        return False
    if review.decision.label == review.status:
        return True
    contested = CONTESTING.get(log[-1].cause) if log else None
    return review.status == S.MANUAL_REVIEW and review.decision.label == contested


def review_violations(review_ids: Iterable) -> list[str]:
    """Invariants 1, 4 and 9 for each review: legal, chained, logged transitions that agree
    with the row and its history; a decided review says what decided it (a review that reports
    or an appeal sent to a human, the decision contested); a processing review's live key is an
    open operation of its own; a review waiting for a human is in one queue."""
    problems = []
    logs: dict = {}
    for t in ReviewTransition.objects.filter(review_id__in=review_ids).order_by("id"):
        logs.setdefault(t.review_id, []).append(t)
    history = dict(
        ContentReview.history.model.objects.filter(id__in=review_ids).values_list("id").annotate(n=Count("history_id"))
    )
    for review in ContentReview.objects.filter(pk__in=review_ids).select_related("decision", "content"):
        log = logs.get(review.pk, [])
        for t in log:
            if (t.from_status, t.to_status, t.cause) not in LEGAL:
                problems.append(f"{review.pk}: illegal transition {t.from_status} -> {t.to_status} ({t.cause})")
        if [t.from_status for t in log[1:]] != [t.to_status for t in log[:-1]]:
            problems.append(f"{review.pk}: transition log is not a chain")
        if (log[-1].to_status if log else S.PENDING) != review.status or (log and log[0].from_status != S.PENDING):
            problems.append(f"{review.pk}: status {review.status} disagrees with its transition log")
        if review.version != 1 + len(log) or history.get(review.pk, 0) != 1 + len(log):
            problems.append(f"{review.pk}: version/history ({review.version}/{history.get(review.pk)}) vs {len(log)} transitions")
        if review.status in FINAL_STATUSES and not _decision_matches(review, log):
            problems.append(f"{review.pk}: {review.status} without a matching decision")
        # A review waits in exactly one review queue while, and only while, it is in manual_review
        # with content left to judge (an erased one waits in none).
        waits = review.status == S.MANUAL_REVIEW and review.content.erased_at is None
        if waits != bool(review.queue and review.queue_order_at):
            problems.append(f"{review.pk}: {review.status} with queue {review.queue or 'none'}")
        # Who may see a review reads the queue it waits in or last waited in: one and the same while it waits.
        if review.queue and review.last_queue != review.queue:
            problems.append(f"{review.pk}: waits in {review.queue} but its last queue is {review.last_queue or 'none'}")
        if review.status == S.PROCESSING:
            live = ModerationRequest.objects.filter(idempotency_key=review.active_idempotency_key).first()
            if live is None or live.review_id != review.pk or live.status not in OPEN_REQUEST_STATUSES:
                problems.append(f"{review.pk}: processing without an open live operation")
    return problems


def pipeline_violations(review_ids: Iterable) -> list[str]:
    """Invariants 3, 4, 5 and 7 across the reviews' operations, decisions and callbacks, and 9 for
    moderators' rejections (each names its violation category)."""
    problems = []
    provider = Decision.objects.filter(review_id__in=review_ids, source=DecisionSource.PROVIDER).select_related("request")
    for decision in provider:
        if decision.request is None or decision.request.status != RequestStatus.COMPLETED:
            problems.append(f"decision {decision.pk}: from an operation that did not complete")
    if provider.values("request").distinct().count() != provider.count():
        problems.append("an operation decided a review twice")
    replaced = ModerationRequest.objects.filter(
        review_id__in=review_ids, superseded_by__isnull=False, superseded_by__cause=Cause.RETRY_RECONCILE
    ).exclude(status=RequestStatus.SUPERSEDED)
    problems += [f"request {r.pk}: superseded, then {r.status}" for r in replaced]
    if ModerationRequest.objects.filter(review_id__in=review_ids, idempotency_key__isnull=True).exists():
        problems.append("an operation without a stored key")
    decisions = Decision.objects.filter(review_id__in=review_ids)
    uncategorised = decisions.filter(source=DecisionSource.MODERATOR, label=S.REJECTED, category="")
    problems += [f"decision {d}: a moderator's rejection without a violation category"
                 for d in uncategorised.values_list("pk", flat=True)]
    if DecisionNotification.objects.filter(decision__in=decisions).count() != decisions.count():
        problems.append("decisions and notifications do not pair one to one")
    crossings = ReportEscalation.objects.filter(review_id__in=review_ids)
    if DecisionNotification.objects.filter(escalation__in=crossings).count() != crossings.count():
        problems.append("report-threshold crossings and notifications do not pair one to one")
    keys = ModerationRequest.objects.filter(review_id__in=review_ids).values("idempotency_key")
    twice = ProviderCallback.objects.filter(idempotency_key__in=keys).values("provider", "provider_event_id").annotate(
        n=Count("id")).filter(n__gt=1)
    problems += [f"callback {row['provider_event_id']} stored {row['n']} times" for row in twice]
    return problems


def erasure_violations(review_ids: Iterable) -> list[str]:
    """Invariant 16 for the erased ones among the reviews: a tombstone, nothing left of the
    content, the review out of moderation, and no provider attempt started after the erasure."""
    problems = []
    for erasure in ContentErasure.objects.filter(review_id__in=review_ids).select_related("content", "review"):
        content = erasure.content
        if content.erased_at is None or content.text or content.media_url or content.metadata:
            problems.append(f"{erasure.review_id}: erased, but its content is not blank")
        if erasure.review.status not in FINAL_STATUSES:
            problems.append(f"{erasure.review_id}: erased, but still {erasure.review.status}")
    late = ProviderAttempt.objects.filter(
        request__review__erasure__isnull=False, request__review_id__in=review_ids,
        started_at__gt=F("request__review__erasure__erased_at"),
    )
    problems += [f"{a.request.review_id}: provider attempt {a.pk} started after the erasure" for a in late.select_related("request")]
    return problems


def report_violations(review_ids: Iterable) -> list[str]:
    """Invariant 12: a decision crosses the report threshold at most once, and every
    `user_reports` transition is such a crossing, recorded against the decision it contested."""
    problems = []
    transitions = dict(ReviewTransition.objects.filter(review_id__in=review_ids, cause=Cause.USER_REPORTS)
                       .values_list("review_id").annotate(n=Count("id")).order_by())
    crossings = ReportEscalation.objects.filter(review_id__in=review_ids).select_related("decision", "transition")
    recorded = dict(crossings.values_list("review_id").annotate(n=Count("id")).order_by())
    for review_id in transitions.keys() | recorded.keys():
        if transitions.get(review_id, 0) != recorded.get(review_id, 0):
            problems.append(f"{review_id}: {transitions.get(review_id, 0)} user_reports transitions, "
                            f"{recorded.get(review_id, 0)} threshold crossings recorded")
    per_decision = crossings.values("decision").annotate(n=Count("id")).filter(n__gt=1)
    problems += [f"decision {row['decision']}: crossed the report threshold {row['n']} times" for row in per_decision]
    for crossing in crossings:
        if crossing.transition.cause != Cause.USER_REPORTS or crossing.decision.label != S.APPROVED:
            problems.append(f"{crossing.review_id}: threshold crossing {crossing.pk} is not a user_reports "
                            "transition of an approval")
        problems += _crossing_weight_violations(crossing)
    return problems


def _crossing_weight_violations(crossing: ReportEscalation) -> list[str]:
    """The crossing came with the first report of its decision whose reporters' weights reach
    the threshold (docs/design.md, "Reporters"), and counted the reporters up to it: reports are
    stored one at a time under the review's lock, so those before the crossing are the ones
    created before it."""
    weights = list(Report.objects.filter(review_id=crossing.review_id, decision_id=crossing.decision_id,
                                         created_at__lte=crossing.created_at)
                   .order_by("created_at").values_list("weight", flat=True))
    total = sum(weights, Decimal(0))
    if len(weights) != crossing.report_count or total < crossing.threshold or (
            weights and total - weights[-1] >= crossing.threshold):
        return [f"{crossing.review_id}: threshold crossing {crossing.pk} counted {crossing.report_count} reporters "
                f"of threshold {crossing.threshold}, but {len(weights)} reported before it, weighing {total}"]
    return []


def notice_violations(review_ids: Iterable) -> list[str]:
    """A notice sends its review to a human (docs/design.md, "Reports"): the review keeps it
    (`notice_kind`), no provider result approves it afterwards, and one approved when the
    notice came is no longer approved by that same decision."""
    problems = []
    notices = (Report.objects.filter(review_id__in=review_ids, kind__in=NOTICE_KINDS)
               .exclude(review__content__erased_at__lte=F("created_at"))  # a report of erased content moves nothing
               .select_related("review__decision"))
    for report in notices:
        review = report.review
        if not review.notice_kind:
            problems.append(f"{review.pk}: {report.kind} report {report.pk} not kept on the review")
        if (review.status == S.APPROVED and review.decision_id == report.decision_id
                and review.decision.label == S.APPROVED):
            problems.append(f"{review.pk}: still approved by the decision {report.kind} report {report.pk} contested")
    late = Decision.objects.filter(review_id__in=review_ids, source=DecisionSource.PROVIDER, label=S.APPROVED,
                                   review__reports__kind__in=NOTICE_KINDS,
                                   review__reports__created_at__lt=F("created_at")).distinct()
    problems += [f"{decision.review_id}: approved by its provider after a notice" for decision in late]
    return problems


# Invariant 19, one statement each over the reports of the reviews asked about: each selects only
# the rows that break it, with a flag per broken rule (as the authors' checks below).
_JUDGING = ", ".join(f"'{label}'" for label in (S.APPROVED, S.REJECTED))
_NOTICES = ", ".join(f"'{kind}'" for kind in NOTICE_KINDS)
_REPORTS = f"""
SELECT * FROM (
  SELECT r.id, r.review_id, r.outcome,
    r.outcome = '' AND n.id IS NOT NULL AS open_told,
    r.outcome <> '' AND n.id IS NULL AS untold,
    n.id IS NOT NULL AND (n.kind <> '{NotificationKind.REPORT_RESOLVED}' OR n.review_id IS DISTINCT FROM r.review_id
                          OR n.payload::jsonb #>> '{{data,outcome}}' IS DISTINCT FROM r.outcome
                          OR n.payload::jsonb #>> '{{data,report_id}}' IS DISTINCT FROM r.id::text
                          OR n.payload::jsonb #>> '{{data,reporter_id}}' IS DISTINCT FROM r.reporter_id
                          OR n.payload::jsonb #>> '{{data,review_id}}' IS DISTINCT FROM r.review_id::text) AS told_wrong,
    d.review_id <> r.review_id AS other_review,
    (r.outcome = '{ReportOutcome.ACTIONED}') <> (d.label = '{S.REJECTED}') AS wrong_outcome,
    -- Only a judgement made after the report resolves it, unless none will come: a notice on a
    -- review already rejected (the rejection in force), or content erased (the decision in force).
    (d.created_at < r.created_at OR d.label NOT IN ({_JUDGING}) OR r.resolved_at < d.created_at)
      AND NOT (r.kind IN ({_NOTICES}) AND r.resolved_by_id = r.decision_id AND d.label = '{S.REJECTED}'
               AND d.created_at <= r.created_at)
      AND NOT (c.erased_at IS NOT NULL AND c.erased_at <= r.resolved_at) AS not_after,
    (r.agreed IS NOT NULL) <> COALESCE(d.source = '{DecisionSource.MODERATOR}' AND d.label IN ({_JUDGING})
                                       AND d.created_at >= r.created_at, FALSE)
      OR r.agreed <> (d.label = '{S.REJECTED}') AS wrong_agreement,
    r.outcome = '{ReportOutcome.EXPIRED}' AND r.kind <> '{ReportKind.USER}' AS notice_expired,
    r.outcome = '' AND (c.erased_at IS NOT NULL OR EXISTS (
      SELECT 1 FROM moderation_decision j WHERE j.review_id = r.review_id AND j.label IN ({_JUDGING})
        AND j.created_at > r.created_at)) AS left_open
  FROM moderation_report r
  JOIN moderation_contentreview v ON v.id = r.review_id
  JOIN moderation_content c ON c.id = v.content_id
  LEFT JOIN moderation_decisionnotification n ON n.report_id = r.id
  LEFT JOIN moderation_decision d ON d.id = r.resolved_by_id
  WHERE r.review_id = ANY(%(ids)s)
) flagged
WHERE open_told OR untold OR told_wrong OR other_review OR wrong_outcome OR not_after OR wrong_agreement
   OR notice_expired OR left_open
"""
# Every report.resolved of a review announces one of its resolved reports: counted, not joined.
_REPORTS_TOLD = f"""
SELECT v.id, told.n, resolved.n
FROM moderation_contentreview v,
  LATERAL (SELECT count(*) AS n FROM moderation_decisionnotification n
           WHERE n.review_id = v.id AND n.kind = '{NotificationKind.REPORT_RESOLVED}') told,
  LATERAL (SELECT count(*) AS n FROM moderation_report r WHERE r.review_id = v.id AND r.outcome <> '') resolved
WHERE v.id = ANY(%(ids)s) AND told.n <> resolved.n
"""
# A reporter's counts are the reports of theirs a moderator judged (`agreed`), over every review
# of their client, for the reporters of the reviews asked about.
_REPORTERS = """
WITH asked AS (
  SELECT DISTINCT v.client_id, r.reporter_id FROM moderation_report r
  JOIN moderation_contentreview v ON v.id = r.review_id WHERE r.review_id = ANY(%(ids)s)
)
SELECT a.client_id, a.reporter_id, COALESCE(rp.resolved, 0), COALESCE(rp.actioned, 0), judged.resolved, judged.actioned
FROM asked a
LEFT JOIN moderation_reporter rp ON rp.client_id = a.client_id AND rp.reporter_id = a.reporter_id,
LATERAL (SELECT count(*) FILTER (WHERE r.agreed IS NOT NULL) AS resolved, count(*) FILTER (WHERE r.agreed) AS actioned
         FROM moderation_report r JOIN moderation_contentreview v ON v.id = r.review_id
         WHERE r.reporter_id = a.reporter_id AND v.client_id = a.client_id) judged
WHERE (COALESCE(rp.resolved, 0), COALESCE(rp.actioned, 0)) <> (judged.resolved, judged.actioned)
"""
_REPORT_PROBLEMS = {
    "open_told": "open, but its report.resolved was written",
    "untold": "resolved, but no report.resolved was written",
    "told_wrong": "its report.resolved is of another kind, review or outcome, or tells of another report",
    "other_review": "resolved by a decision of another review",
    "wrong_outcome": "its outcome is not what the decision it cites says",
    "not_after": "resolved by a decision that is no judgement made after it",
    "wrong_agreement": "its agreement is not the judgement of a moderator's decision after it",
    "notice_expired": "a notice, expired",
    "left_open": "still open after a judgement of its review (or its content's erasure)",
}


def report_resolution_violations(review_ids: Iterable) -> list[str]:
    """Invariant 19: each report is resolved at most once and told so once, by a judgement made
    after it (or the expiry of a user report, or at once where none will come); none is left open
    after one; its reporter counts what moderators judged."""
    review_ids = [uuid.UUID(str(pk)) for pk in review_ids]
    if not review_ids:
        return []
    problems = []
    for pk, review_id, outcome, *flags in _rows(_REPORTS, review_ids):
        wrong = [text for text, flag in zip(_REPORT_PROBLEMS.values(), flags, strict=True) if flag]
        problems.append(f"{review_id}: report {pk} ({outcome or 'open'}): {'; '.join(wrong)}")
    problems += [f"{review_id}: {told} report.resolved notifications, {resolved} resolved reports"
                 for review_id, told, resolved in _rows(_REPORTS_TOLD, review_ids)]
    problems += [f"reporter {reporter} of client {client}: counts {kept}/{kept_actioned} resolved/actioned, "
                 f"moderators judged {judged}/{agreed}"
                 for client, reporter, kept, kept_actioned, judged, agreed in _rows(_REPORTERS, review_ids)]
    return problems


def appeal_violations(review_ids: Iterable) -> list[str]:
    """Invariant 13: one appeal per rejection, logged once; open only while the review waits for
    a human with the appealed decision; resolved by another moderator's decision that matches
    its outcome."""
    problems = []
    appeals = list(Appeal.objects.filter(review_id__in=review_ids)
                   .select_related("review__content", "decision", "resolution"))
    transitions = dict(ReviewTransition.objects.filter(review_id__in=review_ids, cause=Cause.APPEAL)
                       .values_list("review_id").annotate(n=Count("id")).order_by())
    per_review: dict = {}
    for appeal in appeals:
        per_review[appeal.review_id] = per_review.get(appeal.review_id, 0) + 1
        problems += [f"{appeal.review_id}: appeal {appeal.pk} {problem}" for problem in _appeal_problems(appeal)]
    for review_id in transitions.keys() | per_review.keys():
        if transitions.get(review_id, 0) != per_review.get(review_id, 0):
            problems.append(f"{review_id}: {per_review.get(review_id, 0)} appeals, "
                            f"{transitions.get(review_id, 0)} appeal transitions")
    twice = Appeal.objects.filter(review_id__in=review_ids).values("decision").annotate(n=Count("id")).filter(n__gt=1)
    problems += [f"decision {row['decision']}: appealed {row['n']} times" for row in twice]
    return problems


def _appeal_problems(appeal: Appeal) -> list[str]:
    review, appealed, resolution = appeal.review, appeal.decision, appeal.resolution
    problems = [] if appealed.label == S.REJECTED and appealed.review_id == review.pk else ["contests no rejection"]
    erased = review.content.erased_at is not None
    if appeal.status == AppealStatus.OPEN:
        if review.status != S.MANUAL_REVIEW or review.decision_id != appealed.pk:
            problems.append(f"open while the review is {review.status} with decision {review.decision_id}")
        elif erased or not review.queue:
            # No moderator would ever decide it: "review next" and the review queues offer only queued,
            # unerased reviews (erasure closes the appeal instead).
            problems.append(f"open, but no queue offers it{' (its content was erased: erase_content again closes it)' if erased else ''}")
        return problems
    # A moderator's later decision resolves an appeal; erasure closes one with a system decision.
    by = DecisionSource.SYSTEM if erased and resolution.source == DecisionSource.SYSTEM else DecisionSource.MODERATOR
    if resolution.review_id != review.pk or resolution.source != by or resolution.pk < appealed.pk:
        problems.append("resolved by something other than a later moderator decision")
    if appeal_outcome(resolution.label) != appeal.status:
        problems.append(f"{appeal.status} by a decision to {resolution.label}")
    if appealed.moderator_id is not None and resolution.moderator_id == appealed.moderator_id:
        problems.append("decided by the moderator who made the appealed decision")
    return problems


# --- authors (invariant 17) -------------------------------------------------------------------
# Each check is one statement over the authors asked about, joined and grouped in the database
# (no query per author): at 1M authors and 10M strikes it reads the authors' rows through their
# indexes once. Each selects only the rows that break it, with a flag per broken rule.

_RESTRICTED = ", ".join(f"'{standing}'" for standing in (Standing.SUSPENDED, Standing.BANNED))
_RESTRICTIVE = ", ".join(f"'{kind}'" for kind in RESTRICTIVE_ACTIONS)


def _rank(column: str) -> str:
    return "CASE {} {} END".format(column, " ".join(f"WHEN '{s}' THEN {r}" for s, r in STANDING_RANK.items()))


def _standing_of(action: str) -> str:
    """SQL for the standing the action in `action` puts an author in (STANDING_FOR_ACTION)."""
    return "CASE {} {} END".format(action, " ".join(f"WHEN '{k}' THEN '{s}'" for k, s in STANDING_FOR_ACTION.items()))


_POINTS = """
SELECT a.id, a.strike_points, COALESCE(s.points, 0)
FROM moderation_author a
LEFT JOIN (SELECT author_id, SUM(points) AS points FROM moderation_strike
           WHERE author_id = ANY(%(ids)s) AND ended_at IS NULL GROUP BY author_id) s ON s.author_id = a.id
WHERE a.id = ANY(%(ids)s) AND a.strike_points <> COALESCE(s.points, 0)
"""

_STRIKES_TWICE = """
SELECT review_id, COUNT(*) FROM moderation_strike
WHERE author_id = ANY(%(ids)s) AND ended_at IS NULL GROUP BY review_id HAVING COUNT(*) > 1
"""

# Every action is logged once as taken (the transition whose cause is the action's cause), and,
# once ended other than by a replacement, once as ended (cause: its end); the transition that
# took it reached the action's standing, and an automatic one raised the standing.
_ACTIONS_LOGGED = f"""
SELECT * FROM (
    SELECT a.id, a.action, a.cause, a."end",
           COUNT(t.id) FILTER (WHERE t.cause = a.cause) AS took,
           COUNT(t.id) FILTER (WHERE t.cause = a."end") AS ended,
           COUNT(t.id) AS logged,
           bool_and(t.to_standing = {_standing_of("a.action")}) FILTER (WHERE t.cause = a.cause) AS reached,
           bool_and({_rank("t.to_standing")} > {_rank("t.from_standing")}) FILTER (WHERE t.cause = a.cause) AS raised,
           bool_and(t.author_id = a.author_id) AS own
    FROM moderation_accountaction a LEFT JOIN moderation_standingtransition t ON t.action_id = a.id
    WHERE a.author_id = ANY(%(ids)s)
    GROUP BY a.id
) x
WHERE took <> 1 OR ended <> (CASE WHEN "end" IN ('', '{RestrictionEnd.REPLACED}') THEN 0 ELSE 1 END)
   OR logged <> took + ended OR NOT reached OR NOT own OR (cause = '{ActionCause.STRIKES}' AND NOT raised)
"""

# The triggering situation of an automatic action is the strike that reached its rung, which the
# action names (`AccountAction.strike`, written in that strike's transaction): it must be one of
# the author's, and two automatic actions on one strike took a rung twice.
_TRIGGERS = f"""
SELECT a.strike_id, array_agg(a.id::text ORDER BY a.id), bool_and(COALESCE(s.author_id = a.author_id, false))
FROM moderation_accountaction a
LEFT JOIN moderation_strike s ON s.id = a.strike_id
WHERE a.author_id = ANY(%(ids)s) AND a.cause = '{ActionCause.STRIKES}'
GROUP BY a.strike_id
HAVING a.strike_id IS NULL OR COUNT(*) > 1 OR NOT bool_and(COALESCE(s.author_id = a.author_id, false))
"""

# The author's standing is the last logged one (good before any), its restriction is the action
# in force that put it there, and every suspension or ban in force is its author's restriction.
_STANDING = f"""
SELECT * FROM (
    SELECT a.id, a.standing, COALESCE(last.to_standing, '{Standing.GOOD}') AS logged,
           a.standing <> COALESCE(last.to_standing, '{Standing.GOOD}') AS unlogged,
           (a.standing IN ({_RESTRICTED})) <> (a.restriction_id IS NOT NULL) AS unrestricted,
           a.restriction_id IS NOT NULL AND (
               r.author_id <> a.id OR r.ended_at IS NOT NULL OR {_standing_of("r.action")} <> a.standing
               OR r.until IS DISTINCT FROM a.restricted_until) AS mismatched
    FROM moderation_author a
    LEFT JOIN LATERAL (
        SELECT to_standing FROM moderation_standingtransition WHERE author_id = a.id ORDER BY id DESC LIMIT 1
    ) last ON true
    LEFT JOIN moderation_accountaction r ON r.id = a.restriction_id
    WHERE a.id = ANY(%(ids)s)
) x
WHERE unlogged OR unrestricted OR mismatched
"""

_CHAIN = f"""
SELECT author_id, id, from_standing, previous FROM (
    SELECT author_id, id, from_standing,
           LAG(to_standing, 1, '{Standing.GOOD}') OVER (PARTITION BY author_id ORDER BY id) AS previous
    FROM moderation_standingtransition WHERE author_id = ANY(%(ids)s)
) x
WHERE from_standing <> previous
"""

_IN_FORCE = f"""
SELECT r.id, r.action, r.author_id FROM moderation_accountaction r JOIN moderation_author a ON a.id = r.author_id
WHERE r.author_id = ANY(%(ids)s) AND r.action IN ({_RESTRICTIVE}) AND r.ended_at IS NULL
  AND a.restriction_id IS DISTINCT FROM r.id
"""


def _rows(sql: str, author_ids: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": author_ids})
        return cursor.fetchall()


def author_violations(author_ids: Iterable) -> list[str]:
    """Invariant 17 for each author: its points are the sum of its active strikes; no review has
    two active strikes; every action is logged, and no rung was taken twice in one escalation
    (an automatic action raised the standing, and no two share the strike that triggered them);
    its standing is its last logged one, the log is a chain, and its restriction is the one
    suspension or ban in force."""
    author_ids = list(author_ids)
    if not author_ids:
        return []
    problems = [f"author {pk}: {kept} strike points kept, {active} in active strikes"
                for pk, kept, active in _rows(_POINTS, author_ids)]
    problems += [f"{review_id}: {n} active strikes" for review_id, n in _rows(_STRIKES_TWICE, author_ids)]
    for pk, kind, cause, end, took, ended, logged, reached, raised, own in _rows(_ACTIONS_LOGGED, author_ids):
        wrong = [f"logged {took} times as taken, {ended} as ended, {logged} in all"]
        wrong += [f"did not put the author in {STANDING_FOR_ACTION[kind]}"] if reached is False else []
        wrong += ["did not raise the standing"] if cause == ActionCause.STRIKES and raised is False else []
        wrong += ["logged on another author"] if own is False else []
        problems.append(f"action {pk} ({kind} by {cause}, end: {end or 'none'}): {'; '.join(wrong)}")
    for strike, actions, rests in _rows(_TRIGGERS, author_ids):
        if strike is None:
            problems.append(f"automatic actions {', '.join(actions)}: taken with no strike that reached the rung")
            continue
        if len(actions) > 1:
            problems.append(f"strike {strike}: the ladder took {len(actions)} actions on it ({', '.join(actions)})")
        if not rests:
            problems.append(f"strike {strike}: an automatic action taken on it is not its author's")
    for pk, standing, logged, unlogged, unrestricted, mismatched in _rows(_STANDING, author_ids):
        if unlogged:
            problems.append(f"author {pk}: {standing}, but its last logged standing is {logged}")
        if unrestricted:
            problems.append(f"author {pk}: {standing} with restriction fields that say otherwise")
        if mismatched:
            problems.append(f"author {pk}: {standing}, but its restriction is not the action in force that made it so")
    problems += [f"author {pk}: transition {t} from {src}, but the one before went to {previous}"
                 for pk, t, src, previous in _rows(_CHAIN, author_ids)]
    problems += [f"author {author}: {kind} {pk} in force, but not the author's restriction"
                 for pk, kind, author in _rows(_IN_FORCE, author_ids)]
    return problems


# --- statements of reasons (docs/transparency.md) -----------------------------------------------
# Two statements: one over the reviews' decisions and statements, one over their authors' account
# actions, each selecting only the rows that break a rule, with a flag per rule (as above).

# What a statement's body must never quote, found in its string values but the puid (unescaped,
# so a quote with a `"` in it is found too). Short texts and reasons ("spam", "ok") are words any
# body may hold; an id is found anywhere from QUOTE_MIN_CHARS characters, and a shorter one
# standing as a word of its own (an author "a0" is not quoted by a uuid or a date holding "a0").
QUOTE_MIN_CHARS = 8


def _strings_of(body: str) -> str:
    """SQL for the string values of the JSON `body` but its puid, unescaped, one text (chr(31)
    between them)."""
    return f"""(SELECT string_agg(v #>> '{{}}', chr(31))
               FROM jsonb_path_query({body} - 'puid', 'strict $.** ? (@.type() == "string")') v)"""


def _quotes_id(column: str) -> str:
    """SQL: the body's strings (`q.text`, their words `q.words`) quote the id in `column`. An id
    that is a word of the statement's own wording ("Yes", "DE", "terms") says nothing."""
    return (f"({column} <> '' AND ((length({column}) >= {QUOTE_MIN_CHARS} AND strpos(q.text, {column}) > 0)"
            f" OR {column} = ANY(q.words)) AND NOT {column} = ANY(q.wording_words))")


def _quotes_text(column: str) -> str:
    """SQL: the body's strings quote the free text in `column` (QUOTE_MIN_CHARS or longer): it is
    in them, and not explained by the statement's own wording (its policy's mapping, the
    builder's fixed sentences and the database's labels, `q.wording`): a moderator who wrote
    "harassment" is not quoted by the ground "terms of service: harassment"."""
    return (f"(length({column}) >= {QUOTE_MIN_CHARS} AND strpos(q.text, {column}) > 0"
            f" AND strpos(q.wording, {column}) = 0)")


def _body_strings(statement: str) -> str:
    return (f"LEFT JOIN LATERAL (SELECT t.text, t.wording, regexp_split_to_array(t.text, '[^[:alnum:]_@-]+') AS words, "
            f"regexp_split_to_array(t.wording, '[^[:alnum:]_@-]+') AS wording_words FROM ("
            f"SELECT {_strings_of(statement + '.body')} AS text, "
            f"COALESCE((SELECT {_strings_of('p.dsa_mapping')} FROM moderation_moderationpolicy p "
            f"WHERE p.id = {statement}.policy_id), '') || chr(31) "
            # the canned reasons of the decision's policy version: its own sentences (moderation.transparency.canned_reasons)
            f"|| COALESCE((SELECT {_strings_of('dp.canned_reasons')} FROM moderation_decision dd "
            f"JOIN moderation_moderationpolicy dp ON dp.id = dd.policy_id WHERE dd.id = {statement}.decision_id), '') "
            f"|| chr(31) || %(wording)s AS wording) t) q ON true")


_REVIEW_STATEMENTS = f"""
WITH j AS (  -- the judgements: a restriction is in force from a rejection until an approval
  SELECT id, label = '{S.REJECTED}'
           AND LAG(label) OVER (PARTITION BY review_id ORDER BY id) IS DISTINCT FROM '{S.REJECTED}' AS restricts
  FROM moderation_decision WHERE review_id = ANY(%(ids)s) AND label IN ('{S.REJECTED}', '{S.APPROVED}')
), d AS (
  SELECT m.id, m.review_id, m.label, COALESCE(j.restricts, false) AS restricts
  FROM moderation_decision m LEFT JOIN j ON j.id = m.id WHERE m.review_id = ANY(%(ids)s)
), s AS (
  SELECT * FROM moderation_transparencystatement WHERE review_id = ANY(%(ids)s)
  UNION ALL  -- a statement of one of these decisions filed under another review
  SELECT * FROM moderation_transparencystatement WHERE decision_id IN (SELECT id FROM d) AND review_id <> ALL(%(ids)s)
), x AS (
  SELECT COALESCE(d.review_id, s.review_id) AS review_id, d.id AS decision_id, d.label, s.id AS statement_id,
    d.restricts AND s.id IS NULL AS missing,
    s.id IS NOT NULL AND NOT COALESCE(d.restricts, false) AS unwarranted,
    s.id IS NOT NULL AND d.review_id IS DISTINCT FROM s.review_id AS other_review,
    s.body ->> 'puid' IS DISTINCT FROM s.puid OR s.puid IS DISTINCT FROM s.decision_id::text AS wrong_puid,
    s.overturned_at IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM d a WHERE a.review_id = s.review_id AND a.label = '{S.APPROVED}' AND a.id > s.decision_id)
      AS overturned_alone,
    s.overturned_at IS NULL AND EXISTS (
      SELECT 1 FROM d a WHERE a.review_id = s.review_id AND a.label = '{S.APPROVED}' AND a.id > s.decision_id)
      AS uncorrected,
    q.text IS NOT NULL AND (
      {_quotes_text("c.text")}
      OR {_quotes_id("au.author_id")}
      OR EXISTS (SELECT 1 FROM moderation_report r WHERE r.review_id = s.review_id AND {_quotes_id("r.reporter_id")})
      OR EXISTS (SELECT 1 FROM moderation_decision m WHERE m.review_id = s.review_id
                 AND {_quotes_text("m.reason")})) AS quotes
  FROM d FULL JOIN s ON s.decision_id = d.id
  LEFT JOIN moderation_contentreview v ON v.id = s.review_id
  LEFT JOIN moderation_content c ON c.id = v.content_id
  LEFT JOIN moderation_author au ON au.id = v.author_id
  {_body_strings("s")}
)
SELECT * FROM x WHERE missing OR unwarranted OR other_review OR (statement_id IS NOT NULL AND wrong_puid)
  OR overturned_alone OR uncorrected OR quotes
"""
_REVIEW_STATEMENT_PROBLEMS = {
    "missing": "restricts the content, but has no statement",
    "unwarranted": "has a statement, but restricts nothing new (a restriction was in force, or it is no rejection)",
    "other_review": "has a statement of another review",
    "wrong_puid": "its statement's puid is not the decision's id",
    "overturned_alone": "its statement is overturned, but no later approval of its review lifted it",
    "uncorrected": "a later approval lifted the restriction, but its statement records no correction",
    "quotes": "its statement quotes the content, the author's or a reporter's id, or a moderator's reason",
}
# The authors of the reviews: each suspension or ban has its statement, a warning none.
_ACTION_STATEMENTS = f"""
SELECT * FROM (
  SELECT a.id, a.action, a.author_id,
    (a.action IN ({_RESTRICTIVE})) <> (s.id IS NOT NULL) AS wrong_count,
    s.id IS NOT NULL AND (s.body ->> 'puid' IS DISTINCT FROM s.puid OR s.puid IS DISTINCT FROM a.id::text) AS wrong_puid,
    s.id IS NOT NULL AND q.text IS NOT NULL AND (
      {_quotes_id("au.author_id")}
      OR {_quotes_text("a.reason")}) AS quotes
  FROM moderation_accountaction a
  JOIN moderation_author au ON au.id = a.author_id
  LEFT JOIN moderation_transparencystatement s ON s.account_action_id = a.id
  {_body_strings("s")}
  WHERE a.author_id IN (SELECT author_id FROM moderation_contentreview WHERE id = ANY(%(ids)s) AND author_id IS NOT NULL)
) x
WHERE wrong_count OR wrong_puid OR quotes
"""


def _statement_rows(sql: str, review_ids: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": review_ids, "wording": chr(31).join(fixed_wording())})
        return cursor.fetchall()


def statement_violations(review_ids: Iterable) -> list[str]:
    """Statements of reasons (docs/transparency.md): a decision has one exactly when it restricts
    (a rejection while no restriction is in force: no rejection before it, or an approval since
    the last one; a hand-off to a human in between changes nothing); its puid is the decision's
    id, in the row and the body; an overturned one was lifted by a later approval, and one a later
    approval lifted records it; none quotes
    the content, an author's or reporter's id, or a moderator's reason; and, for the reviews'
    authors, each suspension or ban has one and a warning none."""
    review_ids = [uuid.UUID(str(pk)) for pk in review_ids]
    if not review_ids:
        return []
    problems = []
    for review_id, decision_id, label, statement_id, *flags in _statement_rows(_REVIEW_STATEMENTS, review_ids):
        wrong = [text for text, flag in zip(_REVIEW_STATEMENT_PROBLEMS.values(), flags, strict=True) if flag]
        what = f"decision {decision_id} ({label})" if decision_id is not None else "a decision of another review"
        problems.append(f"{review_id}: {what}, statement {statement_id or 'none'}: {'; '.join(wrong)}")
    for pk, kind, author, wrong_count, wrong_puid, quotes in _statement_rows(_ACTION_STATEMENTS, review_ids):
        wrong = ([f"a {kind} {'without a statement' if kind in RESTRICTIVE_ACTIONS else 'with a statement'}"]
                 if wrong_count else [])
        wrong += ["its statement's puid is not the action's id"] if wrong_puid else []
        wrong += ["its statement quotes the author's id or the moderator's reason"] if quotes else []
        problems.append(f"author {author}: action {pk}: {'; '.join(wrong)}")
    return problems


def qa_violations(review_ids: Iterable) -> list[str]:
    """Invariant 21: a second review is never held or answered by the first decision's moderator;
    a moderator has each golden item once; every answer is scored as its golden item or first
    decision says (`correct`, `agrees`). One read of the reviews' QA items."""
    problems, seen = [], set()
    items = (QaItem.objects.filter(review_id__in=list(review_ids), moderator__isnull=False)
             .select_related("golden", "first_decision"))
    for item in items:
        where = f"{item.review_id}: {item}"
        if item.kind == QaKind.GOLDEN:
            if (item.golden_id, item.moderator_id) in seen:
                problems.append(f"{where}: golden item {item.golden_id} handed to moderator {item.moderator_id} twice")
            seen.add((item.golden_id, item.moderator_id))
            expected = (item.golden.expected_label, item.golden.expected_category)
            if item.answered_at is not None and item.correct != ((item.label, item.category) == expected):
                problems.append(f"{where}: scored correct={item.correct} for {item.label} {item.category!r}")
        else:
            first = item.first_decision
            if item.moderator_id == first.moderator_id:
                problems.append(f"{where}: held by the first decision's moderator")
            if item.answered_at is not None and item.agrees != ((item.label, item.category) == (first.label, first.category)):
                problems.append(f"{where}: scored agrees={item.agrees} for {item.label} {item.category!r}")
    return problems


def hold_violations(review_ids: Iterable) -> list[str]:
    """Invariant 22 for the reviews: no content was erased while a hold that keeps it was in force,
    and every decision in a category reportable under its policy has its snapshot, whose SHA-256
    is its body's."""
    review_ids = list(review_ids)
    problems = []
    for tombstone in ContentErasure.objects.filter(review_id__in=review_ids).select_related("content", "review"):
        at, created = tombstone.erased_at, tombstone.content.created_at
        names = Q(reviews=tombstone.review_id)
        if tombstone.review.author_id is not None:
            names |= Q(Q(created_from__isnull=True) | Q(created_from__lte=created),
                       Q(created_before__isnull=True) | Q(created_before__gt=created), author_id=tombstone.review.author_id)
        kept = LegalHold.objects.filter(names, Q(lifted_at__isnull=True) | Q(lifted_at__gt=at),
                                        Q(expires_at__isnull=True) | Q(expires_at__gt=at), placed_at__lt=at)
        problems += [f"{tombstone.review_id}: erased while legal hold {pk} kept it"
                     for pk in kept.values_list("pk", flat=True).distinct()]
    for decision in Decision.objects.filter(review_id__in=review_ids).select_related("policy", "snapshot"):
        snapshot = getattr(decision, "snapshot", None)
        if snapshot is None and reportable_category(decision.policy, decision):
            problems.append(f"{decision.review_id}: decision {decision.pk} in a reportable category has no snapshot")
        elif snapshot is not None and snapshot.sha256 != snapshot_digest(snapshot.body):
            problems.append(f"{decision.review_id}: snapshot {snapshot.pk}'s SHA-256 is not its body's")
    return problems


def violations(review_ids: Iterable) -> list[str]:
    """Every invariant the checker knows, for the reviews and for the authors who wrote them."""
    review_ids = list(review_ids)
    author_ids = list(ContentReview.objects.filter(pk__in=review_ids, author__isnull=False)
                      .values_list("author_id", flat=True).distinct())
    return (review_violations(review_ids) + pipeline_violations(review_ids) + report_violations(review_ids)
            + notice_violations(review_ids) + report_resolution_violations(review_ids) + appeal_violations(review_ids)
            + erasure_violations(review_ids) + author_violations(author_ids) + statement_violations(review_ids)
            + media_violations(review_ids) + qa_violations(review_ids) + hold_violations(review_ids))
