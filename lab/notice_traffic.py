"""DSA notices and trusted flaggers against the race lab's reviews, while results, decisions and
reprocesses race them (docs/design.md, "Reports").

From the first submission on, a share of the reviews is noticed a few seconds after it is
submitted, so at whatever point it has reached: mostly still pending or processing (the notice
must wait for the result, which then cannot approve the review), some approved (sent to a human
at once), some with a human or rejected (not moved; the notice kept). Each noticed review gets a
burst, all at once over HTTP: a DSA notice, a trusted flagger's or both, and a user's report,
each reporter twice. Into the same burst go the lab's notice moderator, deciding the review if it
is with a human, or sending it through the provider again (a reprocess) if it is decided. The
moderator also decides, as they appear, the noticed reviews a notice sent to a human.

Every HTTP answer must be one the contract allows (201 or 200, echoing the kind), and every
refusal of a decision or a reprocess one the services name; anything else is a violation of the
lab. What the reviews became is the invariant checker's to judge (`notice_violations`).
"""

from __future__ import annotations

import heapq
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, F
from django.utils import timezone

from audit.models import Actor, ReviewTransition
from moderation import services
from moderation.errors import (
    AppealOpen,
    ContentErased,
    FourEyesRequired,
    LeasedToOther,
    NotApplicable,
    StaleVersion,
)
from moderation.models import (
    FINAL_STATUSES,
    NOTICE_KINDS,
    ApiClient,
    Cause,
    ContentReview,
    Decision,
    DecisionSource,
    Report,
    ReportKind,
    ReviewStatus,
)
from lab.user_traffic import post_as_a_client
from moderation.observability.metrics import notice_decision_seconds, report_counts

# The notices one burst carries, and how often each set is chosen; a user's report comes too.
NOTICE_SETS = {(ReportKind.DSA_NOTICE,): 2, (ReportKind.TRUSTED_FLAGGER,): 2,
               (ReportKind.DSA_NOTICE, ReportKind.TRUSTED_FLAGGER): 1}
# A burst comes this many seconds after its review was first seen: the lab's reviews are first
# decided some 5 to 40 s after submission (docs/race-lab.md), so a burst lands anywhere from
# pending to decided (and, on a noticed one, decided again by the notice moderator).
BURST_DELAY_S = (0.0, 30.0)
REPORTS_ALLOWED = {200, 201}
REPORTERS_PER_KIND = 5  # reporters of each kind: a few file many reports each, as flaggers do
# What a moderator's decision or a reprocess may be refused with, racing a notice, a result or
# the other traffic: the review changed since it was read, another moderator holds it, its
# content was erased, it is under appeal, or it is no longer decided. An IllegalTransition is
# not among them: with the version checked, it would be a bug.
REFUSALS = (StaleVersion, LeasedToOther, FourEyesRequired, ContentErased, AppealOpen, NotApplicable)


@dataclass
class NoticeTraffic:
    base_url: str
    token: str
    client: ApiClient
    notice_rate: float  # share of the reviews noticed
    decide_rate: float  # share of the bursts on a review with a human into which its decision goes
    reprocess_rate: float  # share of the bursts on a decided review into which a reprocess goes
    seed: int = 1
    counts: Counter = field(default_factory=Counter)
    unexpected: list = field(default_factory=list)

    def __post_init__(self):
        self.rng = random.Random(f"{self.seed}-notices")
        self.done = threading.Event()
        self.moderator = get_user_model().objects.get_or_create(username="race-lab-notice-moderator")[0]
        self._lock = threading.Lock()  # the counters and the random stream, shared by the threads
        self._seen: set = set()
        self.noticed: list = []

    def start(self) -> list[threading.Thread]:
        """The notices (scheduling each burst), the moderator of the notices queue and the
        report expiry job."""
        threads = [threading.Thread(target=self._guarded, args=(job,), daemon=True)
                   for job in (self._notice_loop, self._moderate_loop, self._expire_loop)]
        for thread in threads:
            thread.start()
        return threads

    def _guarded(self, job) -> None:
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - reported as a violation of the lab, with its type
            self.unexpected.append(f"notice traffic {job.__name__}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def _count(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] += n

    def _draw(self, fn, *args):
        with self._lock:
            return fn(*args)

    # --- the notices ----------------------------------------------------------------------------

    def _notice_loop(self) -> None:
        """Until `done`: choose among the reviews submitted since, and start each chosen one's
        burst when it is due; then the bursts still due, at once."""
        http = httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        due: list[tuple[float, object]] = []  # (when, review id), a heap
        try:
            with ThreadPoolExecutor(max_workers=8) as bursts, ThreadPoolExecutor(max_workers=16) as posts:
                while not self.done.is_set() or due:
                    if not self.done.is_set():
                        for pk in self._new_reviews():
                            if self._draw(self.rng.random) < self.notice_rate:
                                self.noticed.append(pk)
                                heapq.heappush(due, (time.monotonic() + self._draw(self.rng.uniform, *BURST_DELAY_S), pk))
                    while due and (due[0][0] <= time.monotonic() or self.done.is_set()):
                        bursts.submit(self._burst, http, posts, heapq.heappop(due)[1])
                    time.sleep(0.2)
        finally:
            http.close()

    def _new_reviews(self) -> list:
        rows = list(ContentReview.objects.filter(client=self.client).exclude(pk__in=self._seen)
                    .order_by("created_at").values_list("pk", flat=True)[:500])
        self._seen.update(rows)
        return rows

    def _burst(self, http, posts, review_id) -> None:
        """The review's notices and a user's report (each reporter twice), and perhaps its
        moderator's decision or a reprocess, all at once."""
        try:
            status, version = ContentReview.objects.values_list("status", "version").get(pk=review_id)
            self._count(f"noticed while {status}")
            with self._lock:
                kinds = self.rng.choices(list(NOTICE_SETS), weights=list(NOTICE_SETS.values()))[0]
                decide = status == ReviewStatus.MANUAL_REVIEW and self.rng.random() < self.decide_rate
                reprocess = (status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED)
                             and self.rng.random() < self.reprocess_rate)
                label = self.rng.choice([ReviewStatus.APPROVED, ReviewStatus.REJECTED])
                # A few flaggers and notifiers file many notices each (reporters per client).
                reporters = [(kind, f"lab-{kind}-{self.rng.randrange(REPORTERS_PER_KIND)}")
                             for kind in (*kinds, ReportKind.USER)]
            steps = [("report", kind, reporter) for kind, reporter in reporters] * 2
            steps += [("decide", label, version)] if decide else []
            steps += [("reprocess", None, version)] if reprocess else []
            with self._lock:
                self.rng.shuffle(steps)
            for _ in posts.map(lambda step: self._step(http, review_id, step), steps):
                pass
        except Exception as exc:  # noqa: BLE001 - a violation of the lab, with its type
            self.unexpected.append(f"notice burst on {review_id}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    def _step(self, http, review_id, step) -> None:
        what, arg, extra = step
        if what == "report":
            self._report(http, review_id, kind=arg, reporter_id=extra)
            return
        try:
            if what == "decide":
                self._decide(review_id, arg, expected_version=extra)
            else:
                self._reprocess(review_id, expected_version=extra)
        finally:
            connection.close()  # a pool thread's own connection

    def _report(self, http, review_id, *, kind: str, reporter_id: str) -> None:
        body = {"reporter_id": reporter_id, "reason": "other", "kind": kind}
        response = post_as_a_client(http, f"/api/v1/reviews/{review_id}/reports/", body, self.counts)
        self._count(f"{kind} {response.status_code}")
        if response.status_code not in REPORTS_ALLOWED:
            self.unexpected.append(f"{kind} on {review_id}: HTTP {response.status_code} {response.text[:200]}")
        elif response.json().get("kind") != kind:
            self.unexpected.append(f"{kind} on {review_id}: answered as {response.json().get('kind')!r}")

    # --- the notice moderator -------------------------------------------------------------------

    def _decide(self, review_id, label: str, *, expected_version: int) -> bool:
        """The notice moderator's decision; False if refused."""
        try:
            services.review_override(review_id=review_id, label=label, reason="race lab: the notice looked at",
                                     category="harassment" if label == ReviewStatus.REJECTED else "",
                                     moderator=self.moderator, expected_version=expected_version)
            self._count(f"decided {label}")
            return True
        except REFUSALS as exc:
            self._count(f"decision refused: {type(exc).__name__}")
            return False

    def _reprocess(self, review_id, *, expected_version: int) -> None:
        try:
            services.review_reprocess(review_id=review_id, actor=Actor.ADMIN, actor_id=str(self.moderator),
                                      reason="race lab: again, after a notice", user=self.moderator,
                                      expected_version=expected_version)
            self._count("reprocessed")
        except REFUSALS as exc:
            self._count(f"reprocess refused: {type(exc).__name__}")

    def _moderate_loop(self) -> None:
        """Until `done`: decide, oldest first, the noticed reviews a human has (the notices queue),
        while further notices of them may arrive."""
        refused: set = set()  # (review, version) refused once (e.g. four eyes): not tried again as it is
        while not self.done.is_set():
            waiting = (ContentReview.objects.filter(client=self.client, status=ReviewStatus.MANUAL_REVIEW)
                       .exclude(notice_kind="").order_by("completed_at").values_list("pk", "version")[:50])
            for review_id, version in [row for row in waiting if row not in refused][:20]:
                if self.done.is_set():
                    return
                label = self._draw(self.rng.choice, [ReviewStatus.APPROVED, ReviewStatus.REJECTED])
                if not self._decide(review_id, label, expected_version=version):
                    refused.add((review_id, version))
            time.sleep(0.5)

    def _expire_loop(self) -> None:
        """Until `done`: the report expiry job (moderation.reports_expire), every second or two,
        a third of the runs as if the policy's report_expiry_days had passed, so that open user
        reports expire while the bursts' decisions, reprocesses and reports race them."""
        while not self.done.is_set():
            time.sleep(self._draw(self.rng.uniform, 1.0, 2.0))
            past = self._draw(self.rng.random) < 1 / 3
            days = services.policy_active().report_expiry_days + 1 if past else 0
            expired = services.reports_expire_due(now=timezone.now() + timedelta(days=days))
            self._count("expiry runs")
            self._count("expiry runs past report_expiry_days", past)
            self._count("reports expired", expired)

    # --- figures --------------------------------------------------------------------------------

    def figures(self) -> dict:
        reviews = ContentReview.objects.filter(pk__in=self.noticed)
        c = self.counts
        kinds = dict(Report.objects.filter(review_id__in=self.noticed).values_list("kind")
                     .annotate(n=Count("review", distinct=True)).order_by())
        after_notice = Decision.objects.filter(
            review_id__in=self.noticed, source=DecisionSource.PROVIDER,
            review__reports__kind__in=NOTICE_KINDS, review__reports__created_at__lt=F("created_at"),
        ).values("pk").distinct()
        results = dict(Decision.objects.filter(pk__in=after_notice).values_list("label").annotate(n=Count("id"))
                       .order_by())
        outcomes = report_counts(review_ids=self.noticed)
        seconds = sorted(notice_decision_seconds(review_ids=self.noticed).values_list("seconds", flat=True))
        return {
            "noticed reviews (by a DSA notice / a trusted flagger)": f"{len(self.noticed)} ("
            + " / ".join(str(kinds.get(k, 0)) for k in NOTICE_KINDS) + ")",
            "  noticed while pending / processing / approved / manual_review / rejected": " / ".join(
                str(c[f"noticed while {s}"]) for s in (ReviewStatus.PENDING, ReviewStatus.PROCESSING,
                                                        ReviewStatus.APPROVED, ReviewStatus.MANUAL_REVIEW,
                                                        ReviewStatus.REJECTED)),
            f"reports sent in the bursts (201 / 200): {'; '.join(ReportKind.values)}": "; ".join(
                f"{c[f'{k} 201']} / {c[f'{k} 200']}" for k in ReportKind.values),
            "approved reviews sent to a human by a notice (cause notice)": ReviewTransition.objects.filter(
                review_id__in=self.noticed, cause=Cause.NOTICE).count(),
            "provider results after a notice: manual_review / approved": " / ".join(
                str(results.get(s, 0)) for s in (ReviewStatus.MANUAL_REVIEW, ReviewStatus.APPROVED)),
            "noticed reviews decided by the notice moderator (approved / rejected)": " / ".join(
                [str(c["decided approved"]), str(c["decided rejected"])]),
            "  decisions refused": _refusals(c, "decision refused"),
            "noticed reviews reprocessed in a burst (taken)": c["reprocessed"],
            "  reprocesses refused": _refusals(c, "reprocess refused"),
            "noticed reviews final at the end": f"{reviews.filter(status__in=FINAL_STATUSES).count()} of {reviews.count()}",
            "their reports by kind (open / actioned / no_action / expired)": "; ".join(
                f"{k} " + " / ".join(str(outcomes.get((k, o), 0)) for o in ("", "actioned", "no_action", "expired"))
                for k in ReportKind.values),
            "notice to decision, s: p50 / max (resolved notices)": " / ".join(
                str(round(v, 1)) for v in (seconds[(len(seconds) - 1) // 2], seconds[-1])) if seconds else "-",
            "report expiry runs (past report_expiry_days) / reports expired": f"{c['expiry runs']} "
            f"({c['expiry runs past report_expiry_days']}) / {c['reports expired']}",
            "notice traffic errors": len(self.unexpected),
        }


def _refusals(counts: Counter, prefix: str) -> str:
    """The refusals counted under `prefix`, by the service's reason: "StaleVersion 3, ..." or 0."""
    return ", ".join(f"{k.split(': ', 1)[1]} {n}" for k, n in sorted(counts.items()) if k.startswith(prefix)) or "0"
