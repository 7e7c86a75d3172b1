"""The checker's report resolutions (moderation/invariants.py, invariant 19) can fail: each test
writes one corruption past the services and the checker names it; the same reviews as the
services left them report nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from moderation import services
from moderation.privacy.erasure import content_erase
from moderation.invariants import report_resolution_violations, violations
from moderation.models import DecisionNotification, NotificationKind, Report, Reporter
from tests.helpers import decided

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(django_user_model):
    return django_user_model.objects.create_user("mia")


def file(review, reporter: str, kind: str = "user") -> Report:
    return services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment", kind=kind).report


def rejected_by(moderator, api_client):
    """An approved review reported by two users, then rejected by a moderator: both actioned."""
    review = decided(api_client, "approved")
    reports = [file(review, "user-1"), file(review, "user-2")]
    services.review_override(review_id=review.pk, label="rejected", reason="r", moderator=moderator,
                             category="harassment")
    review.refresh_from_db()
    assert violations([review.pk]) == []
    return review, [Report.objects.get(pk=r.pk) for r in reports]


def found(review, text: str) -> list[str]:
    problems = report_resolution_violations([review.pk])
    assert any(text in problem for problem in problems), problems
    return problems


def test_a_resolution_told_to_no_one_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    DecisionNotification.objects.filter(report=report).delete()

    found(review, f"report {report.pk} (actioned): resolved, but no report.resolved was written")
    found(review, "1 report.resolved notifications, 2 resolved reports")


def test_an_open_report_that_was_told_and_judged_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    Report.objects.filter(pk=report.pk).update(outcome="", resolved_at=None, resolved_by=None, agreed=None)

    problems = found(review, "open, but its report.resolved was written")
    found(review, "still open after a judgement of its review")
    assert len([p for p in problems if str(report.pk) in p]) == 1  # one line a report, every flag in it


def test_a_report_resolved_twice_in_its_review_count_is_reported(api_client, moderator):
    review, _ = rejected_by(moderator, api_client)
    # One more report.resolved on the review than it has resolved reports (the unique constraint
    # keeps a second off the same report; the count catches one announced some other way).
    DecisionNotification.objects.filter(decision=review.decision).update(kind=NotificationKind.REPORT_RESOLVED)

    found(review, "3 report.resolved notifications, 2 resolved reports")


def test_a_resolution_told_with_another_outcome_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    notification = DecisionNotification.objects.get(report=report)
    DecisionNotification.objects.filter(pk=notification.pk).update(
        payload=notification.payload.replace('"actioned"', '"no_action"'))

    found(review, "its report.resolved is of another kind, review or outcome")


def test_a_resolution_told_about_another_reporters_report_is_reported(api_client, moderator):
    review, (report, other) = rejected_by(moderator, api_client)
    notification = DecisionNotification.objects.get(report=report)
    DecisionNotification.objects.filter(pk=notification.pk).update(
        payload=notification.payload.replace(str(report.pk), str(other.pk)).replace(
            f'"{report.reporter_id}"', f'"{other.reporter_id}"'))

    found(review, "or tells of another report")


def test_an_outcome_the_cited_decision_does_not_give_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    Report.objects.filter(pk=report.pk).update(outcome="no_action")

    found(review, "its outcome is not what the decision it cites says")


def test_a_resolution_citing_another_reviews_decision_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    other = decided(api_client, "rejected")
    Report.objects.filter(pk=report.pk).update(resolved_by=other.decision_id)

    found(review, "resolved by a decision of another review")


def test_a_user_report_resolved_by_the_decision_before_it_is_reported(api_client):
    review = decided(api_client, "rejected")
    report = file(review, "late")  # a user report on a rejection waits: no decision judges it
    Report.objects.filter(pk=report.pk).update(outcome="actioned", resolved_at=timezone.now(),
                                               resolved_by=review.decision_id)

    found(review, "resolved by a decision that is no judgement made after it")
    # The same resolution of a notice is the contract's (the rejection in force tells the notifier).
    notice = file(review, "notifier", kind="dsa_notice")
    assert not any(str(notice.pk) in p for p in report_resolution_violations([review.pk]))


def test_a_hand_off_to_a_human_resolving_a_report_is_reported(api_client, moderator):
    review = decided(api_client, "approved")
    report = file(review, "user-1")
    services.review_reprocess(review_id=review.pk, actor="command", actor_id="t")
    services.review_escalate(review_id=review.pk, reason="look", moderator=moderator)
    review.refresh_from_db()
    assert violations([review.pk]) == []  # it waits for the human's decision
    Report.objects.filter(pk=report.pk).update(outcome="no_action", resolved_at=timezone.now(),
                                               resolved_by=review.decision_id)

    found(review, "resolved by a decision that is no judgement made after it")


def test_an_agreement_no_moderator_made_is_reported(api_client):
    review = decided(api_client, "approved")
    report = file(review, "user-1")
    Report.objects.filter(pk=report.pk).update(outcome="no_action", resolved_at=timezone.now(),
                                               resolved_by=review.decision_id, created_at=timezone.now() - timedelta(days=1),
                                               agreed=False)

    found(review, "its agreement is not the judgement of a moderator's decision after it")


def test_a_moderators_judgement_without_its_agreement_is_reported(api_client, moderator):
    review, (report, _) = rejected_by(moderator, api_client)
    Report.objects.filter(pk=report.pk).update(agreed=None)

    found(review, "its agreement is not the judgement of a moderator's decision after it")
    found(review, "reporter user-1 of client")  # and the reporter's counts no longer add up


def test_an_expired_notice_is_reported(api_client):
    review = decided(api_client, "approved")
    notice = file(review, "notifier", kind="dsa_notice")
    Report.objects.filter(pk=notice.pk).update(outcome="expired", resolved_at=timezone.now())

    found(review, "a notice, expired")


def test_a_report_left_open_after_a_judgement_is_reported(api_client):
    review = decided(api_client, "approved")
    report = file(review, "late")
    assert violations([review.pk]) == []
    # As if it had come before the approval and the decision had missed it.
    Report.objects.filter(pk=report.pk).update(created_at=review.decision.created_at - timedelta(seconds=1))

    found(review, f"report {report.pk} (open): still open after a judgement of its review")


def test_a_report_of_erased_content_left_open_is_reported(api_client):
    review = decided(api_client, "approved")
    content_erase(review_id=review.pk, actor="api", actor_id="acme", reason="asked")
    report = file(review, "after")
    DecisionNotification.objects.filter(report=report).delete()
    Report.objects.filter(pk=report.pk).update(outcome="", resolved_at=None, resolved_by=None)

    found(review, "still open after a judgement of its review (or its content's erasure)")


def test_a_reporters_counts_that_are_not_what_moderators_judged_are_reported(api_client, moderator):
    review, _ = rejected_by(moderator, api_client)
    Reporter.objects.filter(reporter_id="user-2").update(resolved=5)

    found(review, "reporter user-2 of client")
    assert "moderators judged 1/1" in found(review, "counts 5/1 resolved/actioned")[-1]
