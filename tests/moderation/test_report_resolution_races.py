"""Report resolutions under real concurrency (docs/design.md, "Reports", invariant 19): real threads
on PostgreSQL, released together by a barrier, each with its own connection. However they
collide, each report is resolved once and told once, and none is left open after a judgement;
after each collision the checker finds nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from moderation import services
from moderation.invariants import violations
from moderation.models import DecisionNotification, NotificationKind, Report
from tests.helpers import collide, decided
from tests.helpers import outcome_of, raised

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 10


def reported(api_client, label: str, reporters: int):
    review = decided(api_client, label)
    for i in range(reporters):
        services.report_file(review_id=review.pk, reporter_id=f"user-{i}", reason="harassment")
    return review


def test_two_clusters_expiring_the_same_reports_resolve_each_once(api_client):
    reviews = [reported(api_client, "manual_review", 15) for _ in range(4)]
    Report.objects.update(created_at=timezone.now() - timedelta(days=31))

    for _ in range(ROUNDS):
        Report.objects.filter(outcome="expired").update(outcome="", resolved_at=None)
        DecisionNotification.objects.filter(kind=NotificationKind.REPORT_RESOLVED).delete()

        # Batches smaller than the backlog: each cluster takes several, skipping the other's.
        expired = collide(2, lambda i: services.reports_expire_due(batch=7))

        assert raised(expired) == [] and sum(expired) == 60, expired
        assert set(Report.objects.values_list("outcome", flat=True)) == {"expired"}
        told = DecisionNotification.objects.filter(kind=NotificationKind.REPORT_RESOLVED)
        assert told.count() == 60 and told.values("report").distinct().count() == 60
        assert violations([review.pk for review in reviews]) == []


def test_a_report_arriving_as_a_decision_resolves_the_others_is_resolved_by_it_or_waits_for_the_next(
    api_client, django_user_model
):
    moderator = django_user_model.objects.create_user("mia")
    for _ in range(ROUNDS):
        review = reported(api_client, "manual_review", 2)
        calls = [
            lambda: services.report_file(review_id=review.pk, reporter_id="newcomer", reason="harassment"),
            lambda: services.review_override(review_id=review.pk, label="rejected", reason="r",
                                             moderator=moderator, category="harassment"),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        decision = results[1]
        newcomer = Report.objects.get(review=review, reporter_id="newcomer")
        assert set(Report.objects.filter(review=review).exclude(pk=newcomer.pk)
                   .values_list("outcome", "resolved_by_id")) == {("actioned", decision.pk)}
        if newcomer.created_at < decision.created_at:
            # It came first: the decision judged it with the others.
            assert (newcomer.outcome, newcomer.resolved_by_id, newcomer.agreed) == ("actioned", decision.pk, True)
        else:
            # The decision came first: the report contests it, open until the next decision or
            # its expiry.
            assert (newcomer.outcome, newcomer.decision_id) == ("", decision.pk)
        told = DecisionNotification.objects.filter(report=newcomer).count()
        assert told == (1 if newcomer.outcome else 0)
        assert violations([review.pk]) == []


def test_a_decision_racing_the_expiry_job_resolves_each_report_once(api_client, django_user_model):
    moderator = django_user_model.objects.create_user("mia")
    for _ in range(ROUNDS):
        review = reported(api_client, "manual_review", 20)
        Report.objects.filter(review=review).update(created_at=timezone.now() - timedelta(days=31))
        calls = [
            lambda: services.reports_expire_due(batch=5),
            lambda: services.review_override(review_id=review.pk, label="approved", reason="r", moderator=moderator),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        outcomes = list(Report.objects.filter(review=review).values_list("outcome", flat=True))
        assert len(outcomes) == 20 and set(outcomes) <= {"expired", "no_action"}, outcomes
        assert DecisionNotification.objects.filter(review=review, kind=NotificationKind.REPORT_RESOLVED).count() == 20
        # The checker also counts each reporter's judged reports: only the decision's count.
        assert violations([review.pk]) == []


def test_a_report_arriving_as_its_content_is_erased_is_resolved_whichever_commits_first(api_client):
    """report_file reads whether the content is erased after the review's lock, not in the
    locking query: a lock that waited for the erasure's commit returns the review's new row but
    the joined content's old one, and the report would stay open with its detail kept, the
    erasure's resolution of the open reports having run before it existed."""
    from moderation.privacy.erasure import content_erase

    for round_no in range(ROUNDS):
        review = reported(api_client, "approved", 1)
        calls = [
            lambda: services.report_file(review_id=review.pk, reporter_id="late", reason="harassment",
                                         detail="it says the erased words"),
            lambda: content_erase(review_id=review.pk, actor="api", actor_id="owner", reason="owner's request"),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        late = Report.objects.get(review=review, reporter_id="late")
        assert late.outcome == "no_action" and late.resolved_by_id == review.decision_id, (round_no, late.outcome)
        assert late.detail != "it says the erased words"
        assert violations([review.pk]) == []
