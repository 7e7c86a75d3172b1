"""The race lab's notice traffic (lab/notice_traffic.py), in-process: a burst files its notices
and the review's decision or reprocess at once, an answer the contract does not allow is a
violation of the lab, and what the burst leaves holds every invariant."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from lab.notice_traffic import NoticeTraffic
from moderation import services
from moderation.invariants import violations
from moderation.models import ContentReview, Report, ReviewStatus
from tests.helpers import decided


class ReportsInProcess:
    """Stands for the HTTP client: files each report with the service the endpoint calls, and
    answers as the endpoint does (or with `answer`, to see the lab refuse it)."""

    def __init__(self, answer: httpx.Response | None = None):
        self.answer = answer

    def post(self, path: str, json: dict) -> httpx.Response:
        if self.answer is not None:
            return self.answer
        try:
            filed = services.report_file(review_id=path.split("/")[4], reporter_id=json["reporter_id"],
                                         reason=json["reason"], kind=json["kind"])
        finally:
            connection.close()  # a pool thread's own connection
        return httpx.Response(201 if filed.created else 200, json={"kind": filed.report.kind})


def traffic(api_client, **rates) -> NoticeTraffic:
    return NoticeTraffic("http://lab", "token", api_client, notice_rate=1.0,
                         **{"decide_rate": 0.0, "reprocess_rate": 0.0, **rates})


def burst(notices: NoticeTraffic, review, http) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as posts:
        notices._burst(http, posts, review.pk)


@pytest.mark.django_db(transaction=True)
def test_a_burst_on_an_approved_review_sends_it_to_a_human_with_each_reporter_counted_once(api_client):
    review = decided(api_client, "approved")
    notices = traffic(api_client, reprocess_rate=1.0)

    burst(notices, review, ReportsInProcess())

    review.refresh_from_db()
    assert notices.unexpected == []
    reports = Report.objects.filter(review=review)
    assert reports.filter(kind="user").count() == 1 and reports.exclude(kind="user").exists()
    assert notices.counts["user 201"] == 1 and notices.counts["user 200"] == 1  # the reporter twice
    # The reprocess raced the notices: whichever came first, the review ends with a human, or
    # pending for a result that must go to one; never approved by the decision contested.
    assert review.status in (ReviewStatus.MANUAL_REVIEW, ReviewStatus.PENDING)
    assert review.notice_kind
    assert violations([review.pk]) == []


@pytest.mark.django_db(transaction=True)
def test_a_burst_on_a_review_with_a_human_carries_its_decision_and_holds_every_invariant(api_client):
    review = decided(api_client, "manual_review")
    notices = traffic(api_client, decide_rate=1.0)

    burst(notices, review, ReportsInProcess())

    assert notices.unexpected == []
    decided_or_refused = sum(n for k, n in notices.counts.items() if k.startswith(("decided", "decision refused")))
    assert decided_or_refused == 1, notices.counts
    assert ContentReview.objects.get(pk=review.pk).notice_kind
    assert violations([review.pk]) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answer", [httpx.Response(500, json={"error": "server_error"}),
                                    httpx.Response(201, json={"kind": "user"})], ids=["a 500", "the wrong kind"])
def test_an_answer_the_contract_does_not_allow_is_a_violation_of_the_lab(api_client, answer):
    review = decided(api_client, "approved")
    notices = traffic(api_client)

    burst(notices, review, ReportsInProcess(answer))

    assert notices.unexpected, notices.counts
