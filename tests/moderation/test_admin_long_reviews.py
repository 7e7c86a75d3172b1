"""A review with many reports (a client can file thousands) opens a page at a time: its admin
change page pages its inlines, and the review page pages its reports, notes and timeline, each
page reading a page of rows, not all of them."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from moderation import services
from moderation.models import Report
from moderation.observability.timeline import review_timeline
from tests.helpers import decided, staff_browser
from tests.moderation.test_workplace import LIST, timeline

pytestmark = pytest.mark.django_db

REPORTS = 130


@pytest.fixture
def moderator(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


@pytest.fixture
def reported(api_client):
    review = decided(api_client, "rejected")  # a rejected review stays where it is, however reported
    for i in range(REPORTS):
        services.report_file(review_id=review.pk, reporter_id=f"user-{i:03}", reason="spam", detail=f"detail-{i:03}")
    return review


def details(html: str) -> list[str]:
    return re.findall(r"detail-\d{3}", html)


def tie_reports_at_the_page_boundary(review) -> None:
    """Twenty reports recorded at one instant, around where the timeline's first page ends."""
    tied = list(Report.objects.filter(review=review).order_by("created_at")[85:105])
    Report.objects.filter(pk__in=[r.pk for r in tied]).update(created_at=tied[0].created_at)


def test_the_change_page_shows_the_reports_a_page_at_a_time_in_a_bounded_number_of_queries(
        moderator, reported, django_assert_max_num_queries):
    with django_assert_max_num_queries(40):
        first = moderator.get(f"{LIST}{reported.pk}/change/")
    last = moderator.get(f"{LIST}{reported.pk}/change/?reports_page=3")

    assert first.status_code == last.status_code == 200
    assert details(first.content.decode()) == [f"detail-{i:03}" for i in range(50)]
    assert details(last.content.decode()) == [f"detail-{i:03}" for i in range(100, REPORTS)]
    assert "?reports_page=2" in first.content.decode()


def test_a_page_number_that_is_not_a_page_shows_a_page(moderator, reported):
    for page in ["0", "-1", "²", "x", "99999999999999999999999", "999999"]:
        assert moderator.get(f"{LIST}{reported.pk}/change/?reports_page={page}").status_code == 200
        assert moderator.get(f"{timeline(reported)}?timeline_page={page}&reports_page={page}").status_code == 200


def test_the_review_page_lists_the_reports_a_page_at_a_time(moderator, reported):
    page = moderator.get(f"{timeline(reported)}?reports_page=2").content.decode()
    listed = re.search(r'id="review-reports">(.*?)</dd>', page, re.S).group(1)

    assert f"{REPORTS} reporters" in listed
    assert details(listed) == [f"detail-{i:03}" for i in range(50, 100)]


def test_the_timeline_pages_together_hold_the_whole_timeline_in_order(moderator, reported):
    tie_reports_at_the_page_boundary(reported)
    whole = [e.source for e in review_timeline(reported, notes=True)]

    shown, number = [], 1
    while True:
        with CaptureQueriesContext(connection) as queries:
            html = moderator.get(f"{timeline(reported)}?timeline_page={number}").content.decode()
        rows = re.findall(r'<tr class="kind-[a-z_]+" data-source="([^"]+)"', html)
        assert 0 < len(rows) <= 100
        report_reads = [q["sql"] for q in queries.captured_queries
                        if 'FROM "moderation_report"' in q["sql"] and "COUNT(" not in q["sql"]]
        # A page of reports, and the reports tied with its last one.
        assert all("LIMIT" in sql or '"created_at" = ' in sql for sql in report_reads), report_reads
        shown += rows
        if f"timeline_page={number + 1}" not in html:
            break
        number += 1

    assert number == 2 and shown == whole


def test_the_first_entries_of_a_timeline_are_its_beginning(reported):
    tie_reports_at_the_page_boundary(reported)
    whole = review_timeline(reported, notes=True)
    for first in (1, 7, 95, 100, 101, len(whole) - 1, len(whole) + 5):
        assert [e.source for e in review_timeline(reported, notes=True, first=first)] == [e.source for e in whole[:first]]


def test_the_first_entries_keep_their_order_when_records_tie_at_one_instant(api_client):
    """Rows of one record at one instant can sort differently in the timeline than by key
    (a job enqueued sorts before other events): every row tied with the last one read is read."""
    from audit.models import EventKind, PipelineEvent

    review = decided(api_client, "approved")
    at = review.content.created_at
    tied = [PipelineEvent.objects.create(review=review, kind=kind) for kind in
            (EventKind.ALREADY_FINAL, EventKind.STALE_RESULT, EventKind.JOB_ENQUEUED)]
    PipelineEvent.objects.filter(pk__in=[e.pk for e in tied]).update(created_at=at)
    whole = [e.source for e in review_timeline(review)]
    assert whole[:2] == ["content:" + str(review.content_id), f"event:{tied[2].pk}"]

    for first in range(1, len(whole) + 1):
        assert [e.source for e in review_timeline(review, first=first)] == whole[:first], first
