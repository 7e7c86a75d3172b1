"""Prometheus metrics at /metrics, computed from the database when scraped.

Every figure comes from rows the pipeline writes anyway (inbox rows, pipeline events, attempts,
transitions, reviews), so the numbers are the same whichever process is scraped and however
many gunicorn workers and django-q2 clusters there are. Counters only grow because those rows
are append-only (or only grow their counts).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import (
    Count,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Min,
    QuerySet,
    OuterRef,
    Q,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from audit.models import EventKind, PipelineEvent, PrunedTally
from callbacks.models import ProviderCallback
from moderation.observability import anomalies, deadlines, workplace
from moderation.observability.access import is_operator
from moderation.services.reporters import ACCURACY_BANDS, UNRATED, reporter_counts
from moderation.review_queues import deadline_for
from moderation.selectors import decision_times, decisions_between, stuck_requests
from moderation.services.policy import policy_active
from moderation.services.routing import review_queues
from moderation.models import (
    AccountAction,
    StatementStatus,
    TransparencyStatement,
    ActionCause,
    ActionKind,
    Appeal,
    AppealStatus,
    NOTICE_KINDS,
    Report,
    ReportEscalation,
    ReportKind,
    ReportOutcome,
    Cause,
    CircuitState,
    ContentReview,
    Decision,
    DecisionNotification,
    DecisionSource,
    AttemptOutcome,
    ModerationRequest,
    ProviderAttempt,
    NotificationStatus,
    ProviderCircuit,
    ReviewStatus,
    Standing,
    Strike,
    StrikeEnd,
)

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
LOST = (EventKind.CLAIM_LOST, EventKind.STALE_RESULT, EventKind.DUPLICATE_RESULT, EventKind.ALREADY_FINAL,
        EventKind.ORPHAN_RESULT, EventKind.CONCURRENT_TRANSITION)


def _seconds(later: str, earlier) -> Func:
    """Seconds between two timestamps, with their fractions (EXTRACT gives a numeric)."""
    interval = ExpressionWrapper(F(later) - earlier, output_field=DurationField())
    return Func(interval, template="EXTRACT(EPOCH FROM %(expressions)s)", output_field=FloatField())


def _pruned() -> dict[str, int]:
    """What prune deleted behind the counters below (moderation/privacy/retention.py): added back, so a
    counter never falls (Prometheus would read a fall as a restart, and `increase()` as a burst)."""
    return dict(PrunedTally.objects.values_list("key", "count"))


# Appeals wait for people: minutes to days.
APPEAL_BUCKETS = (60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600)
# Notices wait for people too, a trusted flagger's at the head of the queue: seconds to weeks, fine
# enough for histogram_quantile to give the median a DSA transparency report states.
NOTICE_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 12 * 3600, 24 * 3600,
                  2 * 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600, 14 * 24 * 3600, 30 * 24 * 3600)


def report_counts(review_ids=None) -> dict[tuple[str, str], int]:
    """Reports by (kind, outcome), outcome "" while open; of the given reviews only, if any."""
    rows = Report.objects.all() if review_ids is None else Report.objects.filter(review_id__in=review_ids)
    return {(kind, outcome): n for kind, outcome, n in rows.values_list("kind", "outcome").annotate(n=Count("id"))
            .order_by()}


def notice_decision_seconds(review_ids=None) -> QuerySet:
    """The notices (DSA notices, trusted flaggers' reports) a decision resolved, each with the
    seconds from the notice to that resolution (`seconds`): the time to act that a DSA
    transparency report gives the median of. A report's resolution is written once and reports
    are never pruned, so what this counts never falls."""
    rows = Report.objects.filter(kind__in=NOTICE_KINDS, outcome__in=(ReportOutcome.ACTIONED, ReportOutcome.NO_ACTION))
    if review_ids is not None:
        rows = rows.filter(review_id__in=review_ids)
    return rows.annotate(seconds=_seconds("resolved_at", F("created_at")))


def _histogram(family: HistogramMetricFamily, stage: str, rows, bounds=BUCKETS) -> None:
    figures = rows.aggregate(
        **{f"le{i}": Count("pk", filter=Q(seconds__lte=bound)) for i, bound in enumerate(bounds)},
        total=Count("pk"), sum=Sum("seconds"),
    )
    buckets = [(str(bound), figures[f"le{i}"]) for i, bound in enumerate(bounds)] + [("+Inf", figures["total"])]
    family.add_metric([stage], buckets, float(figures["sum"] or 0))


class PipelineCollector:
    def collect(self):
        yield from self._callbacks()
        yield from self._events()
        yield from self._attempts()
        yield from self._gauges()
        yield from self._backlogs()
        yield self._latency()
        yield from self._reports_and_appeals()
        yield from self._reports_by_kind()
        yield from self._workplace()
        yield from self._deadlines()
        yield from self._authors()
        yield from self._reporters()
        yield from self._statements()
        yield from self._anomalies()

    def _anomalies(self):
        """The anomaly alarms (moderation/observability/anomalies.py): each signal's share of the
        last full hour's automatic decisions and of its 7-day baseline, and 1 where it is out of
        its band (the alert rule ModerationDecisionAnomaly reads that)."""
        share = GaugeMetricFamily("moderation_decision_share", "Share of the automatic decisions: rejected, sent to "
                                  "humans, or matched by a rule; the last full hour and its 7-day baseline.",
                                  labels=["signal", "window"])
        out = GaugeMetricFamily("moderation_anomaly", "1 when a signal's last hour is out of its band around its "
                                "7-day baseline (ANOMALY_BAND).", labels=["signal"])
        _, figures = anomalies.signal_figures()
        for f in figures:
            share.add_metric([f.signal, "1h"], f.now)
            share.add_metric([f.signal, "7d"], f.baseline)
            out.add_metric([f.signal], 1.0 if f.out_of_band else 0.0)
        yield share
        yield out

    def _workplace(self):
        """The review queues and the humans' work (moderation.observability.workplace)."""
        depth = GaugeMetricFamily("moderation_queue_depth", "Reviews waiting in each review queue.", labels=["queue"])
        oldest = GaugeMetricFamily("moderation_queue_oldest_age_seconds", "Age of the oldest review in each review queue.",
                                   labels=["queue"])
        for q in workplace.review_queue_figures():
            depth.add_metric([q.queue], q.depth)
            oldest.add_metric([q.queue], q.oldest_age_s or 0)
        yield depth
        yield oldest
        decisions = CounterMetricFamily("moderation_moderator_decisions", "Approvals and rejections by each moderator "
                                        "(decisions per day: increase over 1d).", labels=["moderator", "label"])
        for moderator, label, n in workplace.moderator_decision_totals():
            decisions.add_metric([moderator or "", label], n)
        yield decisions
        labels = ["category", "policy_version"]
        reviewed = CounterMetricFamily("moderation_model_decisions_reviewed",
                                       "Model approvals/rejections a moderator then decided.", labels=labels)
        overturned = CounterMetricFamily("moderation_model_decisions_overturned",
                                         "Model approvals/rejections a moderator reversed.", labels=labels)
        rate = GaugeMetricFamily("moderation_overturn_rate", "Overturned / reviewed model decisions.", labels=labels)
        for o in workplace.overturn_rates():
            key = [o.category, str(o.policy_version or "")]
            reviewed.add_metric(key, o.reviewed)
            overturned.add_metric(key, o.overturned)
            rate.add_metric(key, o.rate)
        yield reviewed
        yield overturned
        yield rate
        waited = GaugeMetricFamily("moderation_time_in_queue_seconds",
                                   "Time in the review queue of the reviews that left it in the last 7 days.",
                                   labels=["queue", "quantile"])
        for t in workplace.time_in_review_queue():
            waited.add_metric([t.queue, "0.5"], t.p50_s)
            waited.add_metric([t.queue, "0.95"], t.p95_s)
        yield waited

    def _deadlines(self):
        """Deadlines (docs/design.md, "Deadlines"; moderation.observability.deadlines): per review
        queue, its target, the reviews waiting near and past their deadline (the alert rule
        ModerationDeadlinesBreached reads the latter), and the last 7 days' decisions, their
        median and p95 time to decision and the breaches among them. Gauges: an undone decision
        leaves the figures, so they may fall."""
        policy, queues, now = policy_active(), review_queues(), timezone.now()
        target = GaugeMetricFamily("moderation_queue_deadline_seconds",
                                   "Target time to decision of each review queue (the active policy).", labels=["queue"])
        past = GaugeMetricFamily("moderation_queue_past_deadline",
                                 "Reviews waiting in each review queue past their due time.", labels=["queue"])
        near = GaugeMetricFamily("moderation_queue_near_deadline",
                                 "Reviews waiting in each review queue near their due time, not past it.", labels=["queue"])
        for q in deadlines.open_figures(policy, now=now, queues=queues):
            target.add_metric([q.queue], deadline_for(policy, q.queue).total_seconds())
            past.add_metric([q.queue], q.breached)
            near.add_metric([q.queue], q.near)
        yield target
        yield past
        yield near
        decided = GaugeMetricFamily("moderation_decisions_7d", "Decisions of reviews waiting in each review queue, "
                                    "last 7 days (an undone one is none).", labels=["queue"])
        late = GaugeMetricFamily("moderation_decisions_past_deadline_7d",
                                 "Of those, decisions made after their due time.", labels=["queue"])
        seconds = GaugeMetricFamily("moderation_time_to_decision_seconds",
                                    "Time from anchor to decision, last 7 days.", labels=["queue", "quantile"])
        for row in decision_times(decisions_between(now - timedelta(days=7), now + timedelta(microseconds=1)), "queue"):
            decided.add_metric([row["queue"]], row["decided"])
            late.add_metric([row["queue"]], row["breached"])
            seconds.add_metric([row["queue"], "0.5"], row["median_s"])
            seconds.add_metric([row["queue"], "0.95"], row["p95_s"])
        yield decided
        yield late
        yield seconds

    def _callbacks(self):
        duplicates = CounterMetricFamily("moderation_duplicate_callbacks", "Re-deliveries of callbacks already stored.", labels=["provider"])
        by_outcome = CounterMetricFamily("moderation_callbacks", "Callbacks stored, by outcome.", labels=["provider", "outcome"])
        waiting = GaugeMetricFamily("moderation_callbacks_unprocessed", "Callbacks stored, not yet processed.", labels=["provider"])
        rows = ProviderCallback.objects.values_list("provider", "outcome").annotate(n=Count("id"), dup=Sum("duplicate_count")).order_by()
        pruned = _pruned()
        outcomes: dict[tuple[str, str], int] = {
            tuple(key.split(":")[1:]): n for key, n in pruned.items() if key.startswith("callback:")
        }
        dup_by_provider = {key.split(":")[1]: n for key, n in pruned.items() if key.startswith("duplicates:")}
        for provider, outcome, n, dup in rows:
            if outcome:  # a counter counts outcomes, which never change once set
                outcomes[(provider, outcome)] = outcomes.get((provider, outcome), 0) + n
            else:
                waiting.add_metric([provider], n)
            dup_by_provider[provider] = dup_by_provider.get(provider, 0) + (dup or 0)
        for (provider, outcome), n in outcomes.items():
            by_outcome.add_metric([provider, outcome], n)
        for provider, n in dup_by_provider.items():
            duplicates.add_metric([provider], n)
        yield duplicates
        yield by_outcome
        yield waiting

    def _events(self):
        counts = dict(PipelineEvent.objects.values_list("kind").annotate(n=Count("id")).order_by())
        for key, n in _pruned().items():  # events deleted by prune still count
            if key.startswith("event:"):
                counts[key[len("event:"):]] = counts.get(key[len("event:"):], 0) + n
        lost = CounterMetricFamily(
            "moderation_lost_updates", "Conditional updates that lost: a claim, or a result for an operation that is not live.",
            labels=["kind"],
        )
        for kind in LOST:
            lost.add_metric([kind], counts.get(kind, 0))
        yield lost
        yield CounterMetricFamily("moderation_illegal_transitions", "Transitions the state machine refused.",
                                  value=counts.get(EventKind.ILLEGAL_TRANSITION, 0))

    def _attempts(self):
        attempts = CounterMetricFamily("moderation_provider_attempts", "Finished provider calls, by outcome.", labels=["provider", "outcome"])
        in_flight = GaugeMetricFamily("moderation_provider_attempts_in_flight", "Provider calls under way.", labels=["provider"])
        for provider, outcome, n in ProviderAttempt.objects.values_list("provider", "outcome").annotate(n=Count("id")).order_by():
            if outcome == AttemptOutcome.IN_FLIGHT:
                in_flight.add_metric([provider], n)
            else:
                attempts.add_metric([provider, outcome], n)
        yield attempts
        yield in_flight
        retries = CounterMetricFamily(
            "moderation_retries", "Retries: further attempts of an operation (same key), and superseding operations (new key).",
            labels=["kind"],
        )
        further = ModerationRequest.objects.filter(attempt_no__gt=1).aggregate(n=Sum(F("attempt_no") - 1))["n"] or 0
        retries.add_metric(["same_key"], further)
        retries.add_metric(["supersede"], ModerationRequest.objects.filter(cause=Cause.RETRY_RECONCILE).count())
        yield retries
        yield self._attempts_per_review()

    def _attempts_per_review(self):
        """How many provider calls each review has needed (1 = no retry), as a histogram."""
        bounds = (1, 2, 3, 5, 10)
        buckets = ", ".join(f"count(*) FILTER (WHERE n <= {b})" for b in bounds)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {buckets}, count(*), coalesce(sum(n), 0) FROM ("  # noqa: S608 - constants only
                " SELECT count(*) AS n FROM moderation_providerattempt a"
                " JOIN moderation_moderationrequest r ON r.id = a.request_id GROUP BY r.review_id) per_review"
            )
            *counts, total, attempts = cursor.fetchone()
        # A gauge histogram: a review's count moves between buckets when it is retried.
        family = GaugeHistogramMetricFamily("moderation_attempts_per_review", "Provider calls each review has needed (1: no retry).")
        family.add_metric([], [(str(b), c) for b, c in zip(bounds, counts, strict=True)] + [("+Inf", total)], float(attempts))
        return family

    def _gauges(self):
        by_status = GaugeMetricFamily("moderation_reviews", "Reviews by status.", labels=["status"])
        counts = dict(ContentReview.objects.values_list("status").annotate(n=Count("id")).order_by())
        for status in ReviewStatus.values:
            by_status.add_metric([status], counts.get(status, 0))
        yield by_status
        yield GaugeMetricFamily(
            "moderation_reviews_stuck", "Reviews whose live operation has not moved for MODERATION_STUCK_AFTER_S.",
            value=stuck_requests().count(),
        )
        circuits = GaugeMetricFamily("moderation_provider_circuit", "1 for each provider's current circuit state.", labels=["provider", "state"])
        for provider, state in ProviderCircuit.objects.values_list("provider", "state"):
            for candidate in CircuitState.values:
                circuits.add_metric([provider, candidate], 1 if candidate == state else 0)
        yield circuits

    def _backlogs(self):
        """How long the oldest review waiting for a worker (pending) and the oldest waiting for a
        moderator (manual_review, not leased) have waited (0 when none): the SLA alerts."""
        now = timezone.now()
        oldest = GaugeMetricFamily(
            "moderation_oldest_waiting_seconds",
            "Age of the oldest waiting item: pending reviews (for a worker), manual reviews not leased (for a human).",
            labels=["queue"],
        )
        pending = ContentReview.objects.filter(status=ReviewStatus.PENDING).aggregate(t=Min("last_enqueued_at"))["t"]
        human = ContentReview.objects.filter(
            Q(leased_to__isnull=True) | Q(lease_expires_at__lt=now),
            status=ReviewStatus.MANUAL_REVIEW, content__erased_at__isnull=True,
        ).aggregate(t=Min("completed_at"))["t"]
        for queue, since in (("pending", pending), ("manual_review", human)):
            oldest.add_metric([queue], (now - since).total_seconds() if since else 0.0)
        yield oldest
        notifications = DecisionNotification.objects.filter(status=NotificationStatus.PENDING).aggregate(
            n=Count("id"), t=Min("created_at")
        )
        yield GaugeMetricFamily("moderation_notifications_pending", "Decision notifications not delivered yet.",
                                value=notifications["n"])
        yield GaugeMetricFamily(
            "moderation_notification_oldest_pending_seconds", "Age of the oldest undelivered decision notification.",
            value=(now - notifications["t"]).total_seconds() if notifications["t"] else 0.0,
        )

    def _latency(self):
        family = HistogramMetricFamily("moderation_latency_seconds", "Time between the pipeline's steps.", labels=["stage"])
        enqueued = PipelineEvent.objects.filter(
            review=OuterRef("request__review"), kind=EventKind.JOB_ENQUEUED, created_at__lte=OuterRef("started_at")
        ).order_by("-created_at").values("created_at")[:1]
        _histogram(family, "enqueue_to_provider_request", ProviderAttempt.objects.filter(attempt_no=1)
                   .annotate(enqueued=Subquery(enqueued)).filter(enqueued__isnull=False)
                   .annotate(seconds=_seconds("started_at", F("enqueued"))))
        first_attempt = ProviderAttempt.objects.filter(
            request__idempotency_key=OuterRef("idempotency_key"), attempt_no=1
        ).values("started_at")[:1]
        # The callbacks that decided (a decision cites them): never pruned, so the count never falls.
        deciding = ProviderCallback.objects.filter(Exists(Decision.objects.filter(callback=OuterRef("pk"))))
        _histogram(family, "provider_request_to_callback", deciding.annotate(sent=Subquery(first_attempt))
                   .filter(sent__isnull=False).annotate(seconds=_seconds("received_at", F("sent"))))
        _histogram(family, "callback_to_final", Decision.objects.filter(callback__isnull=False)
                   .annotate(seconds=_seconds("created_at", F("callback__received_at"))))
        _histogram(family, "submit_to_final", Decision.objects.filter(source=DecisionSource.PROVIDER)
                   .annotate(seconds=_seconds("created_at", F("review__content__created_at"))))
        return family

    def _reports_and_appeals(self):
        """The threshold crossings users' reports caused (the reports themselves: _reports_by_kind);
        appeals filed, resolved by outcome, still open, and how long a resolution took."""
        yield CounterMetricFamily("moderation_report_threshold_crossings",
                                  "Approved reviews sent to a human because enough users reported them.",
                                  value=ReportEscalation.objects.count())
        counts = dict(Appeal.objects.values_list("status").annotate(n=Count("id")).order_by())
        yield CounterMetricFamily("moderation_appeals_filed", "Appeals filed.", value=sum(counts.values()))
        resolved = CounterMetricFamily("moderation_appeals_resolved", "Appeals decided, by outcome.", labels=["outcome"])
        durations = HistogramMetricFamily("moderation_appeal_resolution_seconds",
                                          "From an appeal to the moderator's decision that resolved it.", labels=["outcome"])
        for outcome in (AppealStatus.UPHELD, AppealStatus.OVERTURNED):
            resolved.add_metric([outcome], counts.get(outcome, 0))
            _histogram(durations, outcome, Appeal.objects.filter(status=outcome)
                       .annotate(seconds=_seconds("resolved_at", F("created_at"))), bounds=APPEAL_BUCKETS)
        yield resolved
        yield GaugeMetricFamily("moderation_appeals_open", "Appeals waiting for a moderator.",
                                value=counts.get(AppealStatus.OPEN, 0))
        yield durations

    def _reports_by_kind(self):
        """Reports received and resolved by kind and outcome, those still open, and how long a
        notice waited for the decision that resolved it. The open ones are a gauge: a counter
        labelled "open" would fall at each resolution. Each report is resolved once, so the
        counters and the histogram only grow."""
        counts = report_counts()
        received = CounterMetricFamily("moderation_reports", "Reports received (one per reporter and review), by kind.",
                                       labels=["kind"])
        resolved = CounterMetricFamily("moderation_reports_resolved", "Reports resolved (report.resolved), by kind "
                                       "and outcome.", labels=["kind", "outcome"])
        still_open = GaugeMetricFamily("moderation_reports_open", "Reports not resolved yet, by kind.", labels=["kind"])
        for kind in ReportKind.values:
            received.add_metric([kind], sum(n for (k, _), n in counts.items() if k == kind))
            still_open.add_metric([kind], counts.get((kind, ""), 0))
            for outcome in ReportOutcome.values:
                resolved.add_metric([kind, outcome], counts.get((kind, outcome), 0))
        yield received
        yield resolved
        yield still_open
        yield self._notice_decisions()

    @staticmethod
    def _notice_decisions() -> HistogramMetricFamily:
        """One pass over the resolved notices for every (kind, outcome) series."""
        family = HistogramMetricFamily("moderation_notice_decision_seconds", "From a DSA notice or a trusted "
                                       "flagger's report to the decision that resolved it.", labels=["kind", "outcome"])
        rows = {(row["kind"], row["outcome"]): row for row in notice_decision_seconds().values("kind", "outcome").annotate(
            **{f"le{i}": Count("pk", filter=Q(seconds__lte=bound)) for i, bound in enumerate(NOTICE_BUCKETS)},
            total=Count("pk"), sum=Sum("seconds"),
        ).order_by()}
        for kind in NOTICE_KINDS:
            for outcome in (ReportOutcome.ACTIONED, ReportOutcome.NO_ACTION):
                row = rows.get((kind, outcome), {})
                buckets = [(str(bound), row.get(f"le{i}", 0)) for i, bound in enumerate(NOTICE_BUCKETS)]
                family.add_metric([kind, outcome], buckets + [("+Inf", row.get("total", 0))], float(row.get("sum") or 0))
        return family

    def _authors(self):
        """Accounts by standing, actions taken on them, strikes written and ended, and how late
        the authors' schedule is in ending suspensions."""
        # Only the standings other than good: counted through author_standing_idx (partial: the
        # authors with a record), not over every author a client ever named. The partial indexes'
        # conditions are written as constants: a bound parameter would not match them once the
        # statement is prepared (settings.DB_PREPARE_THRESHOLD).
        with connection.cursor() as cursor:
            cursor.execute("SELECT standing, count(*) FROM moderation_author WHERE standing <> 'good' GROUP BY standing")
            standings = dict(cursor.fetchall())
            cursor.execute("SELECT statement_timestamp() - min(until) FROM moderation_accountaction"  # the due index
                           " WHERE action = 'suspend' AND ended_at IS NULL AND until <= statement_timestamp()")
            overdue = cursor.fetchone()[0]
        accounts = GaugeMetricFamily("moderation_authors", "Authors by standing (good is not counted).",
                                     labels=["standing"])
        for standing in (Standing.WARNED, Standing.SUSPENDED, Standing.BANNED):
            accounts.add_metric([standing], standings.get(standing, 0))
        yield accounts
        taken = {(action, cause): n for action, cause, n in AccountAction.objects.values_list("action", "cause")
                 .annotate(n=Count("*")).order_by()}
        actions = CounterMetricFamily("moderation_account_actions", "Warnings, suspensions and bans, by cause.",
                                      labels=["action", "cause"])
        for action in ActionKind.values:
            for cause in ActionCause.values:
                actions.add_metric([action, cause], taken.get((action, cause), 0))
        yield actions
        ends = _strike_counts()
        yield CounterMetricFamily("moderation_strikes_written", "Strikes written (one per rejection of an author's "
                                  "review).", value=sum(ends.values()))
        ended = CounterMetricFamily("moderation_strikes_ended", "Strikes no longer counted: replaced by a new "
                                    "decision, overturned (these two: revoked), or lapsed.", labels=["end"])
        for end in StrikeEnd.values:
            ended.add_metric([end], ends.get(end, 0))
        yield ended
        yield GaugeMetricFamily("moderation_suspensions_overdue_seconds",
                                "How long the oldest suspension past its end has stayed in force (0: none).",
                                value=overdue.total_seconds() if overdue else 0.0)


    def _reporters(self):
        """Reporters by accuracy band, and how many are muted (by the accuracy rule, by a
        moderator): recounted every REPORTER_COUNTS_EVERY_S, not at each scrape (the count reads
        every reporter a client ever named)."""
        counts = cache.get(_REPORTERS_CACHE_KEY) if settings.METRICS_CACHE_S > 0 else None
        if counts is None:
            counts = reporter_counts()
            if settings.METRICS_CACHE_S > 0:
                cache.set(_REPORTERS_CACHE_KEY, counts, REPORTER_COUNTS_EVERY_S)
        bands = GaugeMetricFamily("moderation_reporters", "Reporters by the share of their resolved reports a "
                                  "moderator actioned (unrated: fewer than 5 resolved).", labels=["accuracy_band"])
        for band in (UNRATED, *ACCURACY_BANDS):
            bands.add_metric([band], counts["bands"].get(band, 0))
        yield bands
        muted = GaugeMetricFamily("moderation_reporters_muted", "Reporters whose reports weigh 0 toward the report "
                                  "threshold, by who muted them.", labels=["by"])
        for by in ("accuracy", "moderator"):
            muted.add_metric([by], counts["muted"].get(by, 0))
        yield muted

    def _statements(self):
        """Statements of reasons for the DSA Transparency Database still to send, or refused
        (docs/transparency.md). Submitted ones are not counted: a scan of every statement ever
        sent at each scrape; the indexes on status answer these two."""
        rows = dict(TransparencyStatement.objects.filter(status__in=[StatementStatus.PENDING, StatementStatus.REJECTED])
                    .values_list("status").annotate(n=Count("id")).values_list("status", "n"))
        waiting = GaugeMetricFamily("moderation_statements", "Statements of reasons not in the Transparency "
                                    "Database: pending, or rejected by it.", labels=["status"])
        for status in (StatementStatus.PENDING, StatementStatus.REJECTED):
            waiting.add_metric([status], rows.get(status, 0))
        yield waiting
        # DSA_TDB_URL unset: statements are kept, not sent, and nothing is late (0).
        # Waiting since it was written, or re-queued (a statement fixed weeks later is not late).
        oldest = (TransparencyStatement.objects.filter(status=StatementStatus.PENDING)
                  .aggregate(t=Min(Coalesce("requeued_at", "created_at")))["t"] if settings.DSA_TDB_URL else None)
        yield GaugeMetricFamily(
            "moderation_statements_oldest_pending_seconds",
            "Age of the oldest statement of reasons not yet in the Transparency Database (0 when none is sent).",
            value=(timezone.now() - oldest).total_seconds() if oldest else 0.0)


REPORTER_COUNTS_EVERY_S = 300
_REPORTERS_CACHE_KEY = "moderation:metrics:reporters"

# The strikes' counters read the whole table (no index serves a count by how strikes ended): 1 to
# 4 s at 10M strikes (docs/benchmarks.md). They are recounted at most this often, not at every scrape.
STRIKE_COUNTS_EVERY_S = 300


def _strike_counts() -> dict[str, int]:
    """Strikes by how they ended ('' for the active ones), recounted every STRIKE_COUNTS_EVERY_S
    (every scrape when METRICS_CACHE_S is 0): counters that step every few minutes still give
    `increase()` over an hour."""
    counts = cache.get(_STRIKES_CACHE_KEY) if settings.METRICS_CACHE_S > 0 else None
    if counts is None:
        counts = dict(Strike.objects.values_list("end").annotate(n=Count("*")).order_by())
        if settings.METRICS_CACHE_S > 0:
            cache.set(_STRIKES_CACHE_KEY, counts, STRIKE_COUNTS_EVERY_S)
    return counts


registry = CollectorRegistry(auto_describe=False)
registry.register(PipelineCollector())


def metrics(request):
    """Staff (a logged-in admin session) or `Authorization: Bearer <METRICS_TOKEN>`.

    The figures are cached for METRICS_CACHE_S and computed under a statement timeout, so
    several scrapers cannot keep the database busy.
    """
    if not is_operator(request):
        response = HttpResponse(REFUSED, status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = cache.get(_CACHE_KEY) if settings.METRICS_CACHE_S > 0 else None  # 0: never cached, nor read
    if body is None:
        with transaction.atomic(), connection.cursor() as cursor:
            # set_config(..., true) is SET LOCAL with a bound value (SET takes no parameters, and
            # parameters are bound server-side: settings.DB_PREPARE_THRESHOLD).
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(settings.METRICS_STATEMENT_TIMEOUT_MS)])
            body = generate_latest(registry)
        cache.set(_CACHE_KEY, body, settings.METRICS_CACHE_S)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


_CACHE_KEY = "moderation:metrics"
_STRIKES_CACHE_KEY = "moderation:metrics:strikes"
REFUSED = ("/metrics needs a staff login (sign in at /admin/ in the same browser) or the header"
           " `Authorization: Bearer <token>`, where the token is the server's METRICS_TOKEN setting\n")
