"""Reports and appeals under real concurrency (docs/design.md, invariants 1, 7 and 12-14): real
threads on PostgreSQL, released together by a barrier, each with its own connection; after each
collision the invariant checker finds nothing to report."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from audit.models import ReviewTransition
from moderation import services
from moderation.invariants import violations
from moderation.models import Appeal, DecisionNotification, NotificationKind, Report
from tests.helpers import collide, decided, outcome_of, raised, result

pytestmark = pytest.mark.django_db(transaction=True)


def http_for(client) -> APIClient:
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {client.token}")
    return http


def fifty_reports_from_ten_reporters(api_client, review) -> list:
    """50 report requests at once through the API, each of 10 reporters five times: the codes."""
    connections = threading.BoundedSemaphore(30)  # the test server allows 100 connections, shared

    def report(i):
        with connections:
            try:
                return http_for(api_client).post(f"/api/v1/reviews/{review.pk}/reports/",
                                                 {"reporter_id": f"user-{i % 10}", "reason": "harassment"},
                                                 format="json").status_code
            finally:
                connection.close()

    return collide(50, report)


def test_fifty_concurrent_reports_from_ten_reporters_cross_the_threshold_once(api_client):
    review = decided(api_client, "approved")
    codes = fifty_reports_from_ten_reporters(api_client, review)

    assert raised(codes) == []
    assert sorted(codes) == [200] * 40 + [201] * 10
    review.refresh_from_db()
    assert review.status == "manual_review"
    assert ReviewTransition.objects.filter(review=review, cause="user_reports").count() == 1
    assert DecisionNotification.objects.filter(kind=NotificationKind.REVIEW_REPORTED).count() == 1
    assert Report.objects.filter(review=review).count() == 10
    assert http_for(api_client).get(f"/api/v1/reviews/{review.pk}/").json()["report_count"] == 10
    assert violations([review.pk]) == []


@pytest.mark.parametrize("other", ["override", "reprocess"])
def test_a_report_crossing_the_threshold_while_a_moderator_acts_leaves_one_consistent_story(
    api_client, django_user_model, other
):
    moderator = django_user_model.objects.create_user("mia")
    for _ in range(8):
        review = decided(api_client, "approved")
        for reporter in ("u1", "u2"):
            services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment")
        act = {
            "override": lambda: services.review_override(review_id=review.pk, label="rejected", reason="harassment",
                                                         category="harassment", moderator=moderator),
            "reprocess": lambda: services.review_reprocess(review_id=review.pk, actor="command", actor_id="t"),
        }[other]
        third = lambda: services.report_file(review_id=review.pk, reporter_id="u3", reason="harassment")  # noqa: E731

        results = collide(2, lambda i: outcome_of([third, act][i]))
        assert raised(results) == [], results

        review.refresh_from_db()
        crossed = ReviewTransition.objects.filter(review=review, cause="user_reports").count()
        assert crossed <= 1
        assert review.status == {"override": "rejected", "reprocess": "pending"}[other]
        assert Report.objects.filter(review=review).count() == 3
        assert DecisionNotification.objects.filter(review=review, kind=NotificationKind.REVIEW_REPORTED).count() == crossed
        assert violations([review.pk]) == []


def test_ten_concurrent_appeals_make_one_201_and_nine_409s(api_client):
    review = decided(api_client, "rejected")

    def appeal(i):
        try:
            return http_for(api_client).post(f"/api/v1/reviews/{review.pk}/appeals/",
                                             {"appellant_id": f"owner-{i}", "statement": "please look again"},
                                             format="json")
        finally:
            connection.close()

    answers = collide(10, appeal)
    assert raised(answers) == []

    assert sorted(a.status_code for a in answers) == [201] + [409] * 9
    assert {a.json()["error"] for a in answers if a.status_code == 409} == {"appeal_exists"}
    assert Appeal.objects.filter(review=review).count() == 1
    assert ReviewTransition.objects.filter(review=review, cause="appeal").count() == 1
    assert violations([review.pk]) == []


def test_an_appeal_racing_an_override_of_the_same_decision_is_refused_or_attached_to_that_decision(
    api_client, django_user_model
):
    mia, max_ = (django_user_model.objects.create_user(name) for name in ("mia", "max"))
    for _ in range(8):
        review = decided(api_client, "manual_review")
        appealed = services.review_override(review_id=review.pk, label="rejected", reason="threat",
                                            category="violence", moderator=mia)
        calls = [
            lambda: services.appeal_file(review_id=review.pk, appellant_id="owner", statement="out of context"),
            lambda: services.review_override(review_id=review.pk, label="approved", reason="a quote",
                                             moderator=max_),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        review.refresh_from_db()
        assert review.status == "approved"
        appeal = Appeal.objects.filter(review=review).first()
        if appeal is None:  # the override went first: nothing left to appeal
            assert results[0] == "NotAppealable"
        else:  # the appeal went first: the override resolved it
            assert (appeal.decision_id, appeal.status, appeal.resolution_id) == (
                appealed.pk, "overturned", review.decision_id)
        assert violations([review.pk]) == []


def test_an_appeal_racing_a_reprocess_leaves_either_the_appeal_or_the_new_operation(api_client):
    for _ in range(8):
        review = decided(api_client, "rejected")
        calls = [
            lambda: services.appeal_file(review_id=review.pk, appellant_id="owner", statement="wrong"),
            lambda: services.review_reprocess(review_id=review.pk, actor="command", actor_id="t"),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        review.refresh_from_db()
        if Appeal.objects.filter(review=review).exists():  # the appeal went first: a moderator decides
            assert results[1] == "AppealOpen" and review.status == "manual_review"
        else:
            assert results[0] == "NotAppealable" and review.status == "pending"
        assert violations([review.pk]) == []


def test_a_decision_that_a_reprocess_supersedes_after_its_appeal_can_be_appealed_in_turn(
    api_client, django_user_model
):
    review = decided(api_client, "rejected")
    first = services.appeal_file(review_id=review.pk, appellant_id="owner", statement="wrong")
    services.review_override(review_id=review.pk, label="rejected", reason="still wrong", category="hate",
                             moderator=django_user_model.objects.create_user("mia"))
    services.review_reprocess(review_id=review.pk, actor="command", actor_id="t")
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.95), cause="provider_result")

    second = services.appeal_file(review_id=review.pk, appellant_id="owner", statement="the new one is wrong too")

    first.refresh_from_db()
    assert first.status == "upheld" and second.decision_id != first.decision_id
    review.refresh_from_db()
    assert review.status == "manual_review" and second.decision_id == review.decision_id
    assert violations([review.pk]) == []


def test_without_the_review_lock_the_same_collisions_break_the_report_contract(api_client, monkeypatch):
    """The control of the first test: its guard taken out, the same 50 reports go wrong."""
    from moderation.models import ContentReview

    review = decided(api_client, "approved")
    monkeypatch.setattr(ContentReview.objects, "select_for_update", lambda *a, **k: ContentReview.objects.all())
    codes = fifty_reports_from_ten_reporters(api_client, review)

    crossed = ReviewTransition.objects.filter(review=review, cause="user_reports").count()
    assert raised(codes) or sorted(codes) != [200] * 40 + [201] * 10 or crossed != 1
