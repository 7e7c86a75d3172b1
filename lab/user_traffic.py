"""Users' reports and appeals against the race lab's reviews, while the pipeline runs.

As reviews are decided, a share of them is reported by more distinct users than the policy's
threshold, each reporter several times and all at once, and a share of the rejected ones is
appealed by several concurrent requests; meanwhile a lab moderator decides the open appeals
in-process. Every HTTP answer must be one the contract allows (docs/design.md, "Reports" and
"Appeals"); anything else is reported as a violation.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from moderation import services
from moderation.errors import ModerationError
from moderation.models import Appeal, AppealStatus, ContentReview, ReportEscalation, ReviewStatus

REPORTS_ALLOWED = {200, 201}
APPEALS_ALLOWED = {201, 409}
RETRY_FOR_S = 120


def post_as_a_client(http: httpx.Client, path: str, body: dict, counts: Counter) -> httpx.Response:
    """POST as a client would: a connection that fails (the web tier down, `--web-outage-s`)
    is tried again, for up to RETRY_FOR_S; the answer that finally comes is what counts."""
    deadline = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return http.post(path, json=body)
        except httpx.TransportError:
            counts["connection errors retried"] += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@dataclass
class UserTraffic:
    base_url: str
    token: str
    review_ids: list
    report_rate: float
    appeal_rate: float
    seed: int = 1
    counts: Counter = field(default_factory=Counter)
    unexpected: list = field(default_factory=list)

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        self.done = threading.Event()
        self.threshold = services.policy_active().report_threshold
        self._seen: set = set()

    def run(self) -> None:
        """Until `done` is set: contest newly decided reviews, and decide open appeals."""
        from django.contrib.auth import get_user_model
        from django.db import connection

        moderator, _ = get_user_model().objects.get_or_create(username="race-lab-moderator")
        http = httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        try:
            with ThreadPoolExecutor(max_workers=8) as pool:
                while not self.done.is_set():
                    self._contest(pool, http, moderator)
                    time.sleep(0.5)
                self._contest(pool, http, moderator)  # what was decided last
        finally:
            http.close()
            connection.close()

    def _contest(self, pool, http, moderator) -> None:
        for pk, status in self._newly_decided():
            if self.rng.random() < self.report_rate:
                self._report_burst(pool, http, pk)
            if status == ReviewStatus.REJECTED and self.rng.random() < self.appeal_rate:
                self._appeal_burst(pool, http, pk)
        self._decide_appeals(moderator)

    def _newly_decided(self) -> list:
        decided = (ContentReview.objects.filter(pk__in=self.review_ids, status__in=[ReviewStatus.APPROVED, ReviewStatus.REJECTED])
                   .exclude(pk__in=self._seen).values_list("pk", "status"))
        rows = list(decided[:500])
        self._seen.update(pk for pk, _ in rows)
        return rows

    def _report_burst(self, pool, http, review_id) -> None:
        """threshold + 1 distinct reporters, each twice, all at once."""
        reporters = [f"user-{i}" for i in range(self.threshold + 1)] * 2
        self.rng.shuffle(reporters)
        path = f"/api/v1/reviews/{review_id}/reports/"
        bodies = [{"reporter_id": r, "reason": self.rng.choice(["harassment", "hate", "other"])} for r in reporters]
        self._answers("report", REPORTS_ALLOWED, pool.map(lambda body: self._post(http, path, body), bodies))

    def _appeal_burst(self, pool, http, review_id) -> None:
        path = f"/api/v1/reviews/{review_id}/appeals/"
        body = {"appellant_id": "owner", "statement": "please look again"}
        self._answers("appeal", APPEALS_ALLOWED, pool.map(lambda _: self._post(http, path, body), range(3)))

    def _post(self, http, path: str, body: dict) -> httpx.Response:
        return post_as_a_client(http, path, body, self.counts)

    def _answers(self, what: str, allowed: set, responses) -> None:
        for response in responses:
            self.counts[f"{what} {response.status_code}"] += 1
            if response.status_code not in allowed:
                self.unexpected.append(f"{what}: HTTP {response.status_code} {response.text[:200]}")

    def _decide_appeals(self, moderator) -> None:
        open_appeals = Appeal.objects.filter(review_id__in=self.review_ids, status=AppealStatus.OPEN)
        for review_id in open_appeals.values_list("review_id", flat=True):
            label = self.rng.choice([ReviewStatus.APPROVED, ReviewStatus.REJECTED])
            try:
                services.review_override(review_id=review_id, label=label, reason="race lab: looked again",
                                         category="harassment" if label == ReviewStatus.REJECTED else "",
                                         moderator=moderator)
            except ModerationError as exc:  # e.g. reprocessed meanwhile: counted, not a failure
                self.counts[f"appeal decision refused: {type(exc).__name__}"] += 1

    def figures(self) -> dict:
        appeals = Appeal.objects.filter(review_id__in=self.review_ids)
        outcomes = Counter(appeals.values_list("status", flat=True))
        return {
            "reports sent (201 / 200)": f"{self.counts['report 201']} / {self.counts['report 200']}",
            "report threshold crossings": ReportEscalation.objects.filter(review_id__in=self.review_ids).count(),
            "appeals sent (201 / 409)": f"{self.counts['appeal 201']} / {self.counts['appeal 409']}",
            "appeals upheld / overturned / open": " / ".join(
                str(outcomes[s]) for s in (AppealStatus.UPHELD, AppealStatus.OVERTURNED, AppealStatus.OPEN)),
            "unexpected answers": len(self.unexpected),
            "connection errors retried": self.counts["connection errors retried"],
        }
