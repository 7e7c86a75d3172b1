"""What became of each report (moderation/services/report_outcomes.py; docs/design.md, "Reports"):
resolved once, by the first judgement of its review after it, by the expiry job, or at once
where no judgement will come, and told to the client once (`report.resolved`)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from moderation import services, tasks
from moderation.privacy.erasure import content_erase
from moderation.invariants import violations
from moderation.models import (
    DecisionNotification,
    ModerationPolicy,
    NotificationKind,
    Report,
    Reporter,
)
from tests.helpers import claimed, decided, result, SCORE_FOR

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderators(django_user_model):
    return django_user_model.objects.create_user("mia"), django_user_model.objects.create_user("max")


def file(review, reporter: str, kind: str = "user") -> Report:
    return services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment", kind=kind).report


def decide(review, label: str, moderator):
    return services.review_override(review_id=review.pk, label=label, reason="checked", moderator=moderator,
                                    category="harassment" if label == "rejected" else "")


def resolved(review) -> list[tuple]:
    return list(Report.objects.filter(review=review).order_by("reporter_id")
                .values_list("reporter_id", "outcome", "resolved_by_id", "agreed"))


def told(review) -> dict[str, dict]:
    """The report.resolved bodies sent about the review's reports, by reporter."""
    rows = DecisionNotification.objects.filter(review=review, kind=NotificationKind.REPORT_RESOLVED)
    bodies = [json.loads(row.payload) for row in rows]
    return {body["data"]["reporter_id"]: body for body in bodies}


def test_a_moderators_rejection_resolves_every_open_report_actioned_and_the_reporters_were_right(
    api_client, moderators
):
    review = decided(api_client, "approved")
    reports = [file(review, f"user-{i}") for i in range(3)]  # the threshold sends it to a human
    decision = decide(review, "rejected", moderators[0])

    assert resolved(review) == [(f"user-{i}", "actioned", decision.pk, True) for i in range(3)]
    assert all(r.resolved_at is not None for r in Report.objects.filter(review=review))
    assert sorted(Reporter.objects.values_list("reporter_id", "resolved", "actioned")) == [
        (f"user-{i}", 1, 1) for i in range(3)]
    # The contract's body, exactly: nothing more, nothing less.
    assert told(review)["user-0"] == {"type": "report.resolved", "data": {
        "report_id": str(reports[0].pk), "review_id": str(review.pk), "external_id": review.content.external_id,
        "reporter_id": "user-0", "outcome": "actioned"}}
    assert len(told(review)) == 3
    assert violations([review.pk]) == []


def test_a_moderators_approval_resolves_them_no_action_and_counts_the_reporters_wrong(api_client, moderators):
    review = decided(api_client, "approved")
    for i in range(3):
        file(review, f"user-{i}")
    decision = decide(review, "approved", moderators[0])

    assert resolved(review) == [(f"user-{i}", "no_action", decision.pk, False) for i in range(3)]
    assert sorted(Reporter.objects.values_list("reporter_id", "resolved", "actioned")) == [
        (f"user-{i}", 1, 0) for i in range(3)]
    assert {body["data"]["outcome"] for body in told(review).values()} == {"no_action"}
    assert violations([review.pk]) == []


def test_a_providers_decision_resolves_the_reports_but_judges_no_reporter(api_client):
    review, request = claimed(api_client)
    file(review, "early-1")
    file(review, "early-2")

    assert services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["rejected"]),
                                    cause="provider_result") == "applied"

    review.refresh_from_db()
    assert resolved(review) == [("early-1", "actioned", review.decision_id, None),
                                ("early-2", "actioned", review.decision_id, None)]
    assert not Reporter.objects.filter(resolved__gt=0).exists()  # only a moderator's judgement counts toward accuracy
    assert violations([review.pk]) == []


def test_a_hand_off_to_a_human_judges_nothing_and_the_humans_decision_resolves_the_reports(api_client, moderators):
    review, request = claimed(api_client)
    file(review, "early")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["manual_review"]),
                             cause="provider_result")
    review.refresh_from_db()
    assert review.status == "manual_review"
    assert resolved(review) == [("early", "", None, None)] and told(review) == {}
    assert violations([review.pk]) == []

    decision = decide(review, "rejected", moderators[0])
    assert resolved(review) == [("early", "actioned", decision.pk, True)]


def test_an_appeals_second_decision_does_not_resolve_a_report_again(api_client, moderators):
    review = decided(api_client, "approved")
    for i in range(3):
        file(review, f"user-{i}")
    rejection = decide(review, "rejected", moderators[0])
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="it was a joke")
    overturn = decide(review, "approved", moderators[1])

    assert overturn.pk != rejection.pk
    assert resolved(review) == [(f"user-{i}", "actioned", rejection.pk, True) for i in range(3)]
    assert DecisionNotification.objects.filter(kind=NotificationKind.REPORT_RESOLVED).count() == 3
    assert set(Reporter.objects.values_list("resolved", "actioned")) == {(1, 1)}  # counted once
    assert violations([review.pk]) == []


def test_a_report_after_a_decision_waits_for_the_next_one(api_client, moderators):
    review = decided(api_client, "approved")
    late = file(review, "late")
    assert resolved(review) == [("late", "", None, None)]  # the approval came before it: it judges nothing

    decision = decide(review, "rejected", moderators[0])  # a moderator overrides the approval
    assert Report.objects.get(pk=late.pk).resolved_by_id == decision.pk


@pytest.mark.parametrize("kind", ["dsa_notice", "trusted_flagger"])
def test_a_notice_on_a_rejected_review_is_actioned_at_once_citing_the_rejection_in_force(api_client, kind):
    review = decided(api_client, "rejected")
    notice = file(review, "notifier", kind=kind)
    user = file(review, "someone")  # a user report waits: for a decision, or its expiry

    assert (notice.outcome, notice.resolved_by_id, notice.agreed) == ("actioned", review.decision_id, None)
    assert resolved(review) == [("notifier", "actioned", review.decision_id, None), ("someone", "", None, None)]
    assert told(review)["notifier"]["data"]["outcome"] == "actioned" and user.outcome == ""
    review.refresh_from_db()
    assert review.status == "rejected"  # no transition, as the contract says
    assert violations([review.pk]) == []


def test_a_report_of_erased_content_is_resolved_at_once_and_erasure_resolves_those_left_open(api_client):
    review = decided(api_client, "approved")
    file(review, "before")
    content_erase(review_id=review.pk, actor="api", actor_id="acme", reason="the author asked")
    after = file(review, "after", kind="dsa_notice")

    assert after.outcome == "no_action"
    assert resolved(review) == [("after", "no_action", review.decision_id, None),
                                ("before", "no_action", review.decision_id, None)]
    assert len(told(review)) == 2
    assert violations([review.pk]) == []


def test_erasing_content_under_appeal_resolves_its_reports_by_the_rejection_that_stands(api_client, moderators):
    review = decided(api_client, "rejected")
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="wrong")
    file(review, "reporter")
    content_erase(review_id=review.pk, actor="api", actor_id="acme", reason="the author asked")

    review.refresh_from_db()
    assert resolved(review) == [("reporter", "actioned", review.decision_id, None)]
    assert violations([review.pk]) == []


# --- expiry -------------------------------------------------------------------------------------

def test_user_reports_open_past_the_policys_expiry_expire_once_and_notices_never_do(api_client):
    review = decided(api_client, "approved")
    for i in range(2):
        file(review, f"user-{i}")
    file(review, "notifier", kind="dsa_notice")

    assert services.reports_expire_due(now=timezone.now() + timedelta(days=29)) == 0
    assert services.reports_expire_due(now=timezone.now() + timedelta(days=31)) == 2
    assert services.reports_expire_due(now=timezone.now() + timedelta(days=31)) == 0

    assert resolved(review) == [("notifier", "", None, None), ("user-0", "expired", None, None),
                                ("user-1", "expired", None, None)]
    assert told(review)["user-0"]["data"]["outcome"] == "expired" and len(told(review)) == 2
    assert violations([review.pk]) == []


def test_an_expired_report_is_not_resolved_again_by_a_later_decision(api_client, moderators):
    review = decided(api_client, "approved")
    file(review, "user-0")
    services.reports_expire_due(now=timezone.now() + timedelta(days=31))
    decide(review, "rejected", moderators[0])

    assert resolved(review) == [("user-0", "expired", None, None)]
    assert not Reporter.objects.filter(resolved__gt=0).exists()
    assert DecisionNotification.objects.filter(kind=NotificationKind.REPORT_RESOLVED).count() == 1


def test_the_active_policys_expiry_days_decide(api_client):
    review = decided(api_client, "approved")
    file(review, "user-0")
    ModerationPolicy.objects.filter(pk=services.policy_active().pk).update(report_expiry_days=2)

    assert services.reports_expire_due(now=timezone.now() + timedelta(days=1)) == 0
    assert services.reports_expire_due(now=timezone.now() + timedelta(days=3)) == 1


def test_a_backlog_expires_in_batches_up_to_their_bounds(api_client):
    review = decided(api_client, "approved")
    for i in range(5):
        file(review, f"user-{i}")
    later = timezone.now() + timedelta(days=31)

    assert services.reports_expire_due(now=later, batch=2, deadline=time.monotonic() - 1) == 0
    assert services.reports_expire_due(now=later, batch=2, batches=2) == 4
    assert services.reports_expire_due(now=later, batch=2, batches=2) == 1
    assert Report.objects.filter(outcome="").count() == 0


def test_the_schedule_runs_the_task_that_expires_reports(api_client):
    schedule = Schedule.objects.get(name="moderation.reports_expire")
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("moderation.tasks.reports_expire",
                                                                         Schedule.MINUTES, -1)
    review = decided(api_client, "approved")
    file(review, "user-0")
    Report.objects.update(created_at=timezone.now() - timedelta(days=31))

    assert tasks.reports_expire() == "1 reports expired"
    assert tasks.reports_expire() == "0 reports expired"


# --- many reports -------------------------------------------------------------------------------

def test_a_decision_resolves_hundreds_of_reports_in_a_bounded_number_of_statements_and_few_jobs(
    api_client, moderators, django_assert_max_num_queries, django_capture_on_commit_callbacks, settings
):
    api_client.webhook_url = "https://hooks.example/acme"
    api_client.save(update_fields=["webhook_url"])
    review = decided(api_client, "manual_review")
    Report.objects.bulk_create([Report(review=review, reporter_id=f"user-{i}", reason="harassment")
                                for i in range(300)])
    before = DecisionNotification.objects.count()

    with django_assert_max_num_queries(40), django_capture_on_commit_callbacks() as callbacks:
        decide(review, "rejected", moderators[0])

    assert Report.objects.filter(review=review, outcome="actioned").count() == 300
    assert Reporter.objects.filter(resolved=1, actioned=1).count() == 300
    written = DecisionNotification.objects.filter(kind=NotificationKind.REPORT_RESOLVED)
    assert written.count() == 300 and DecisionNotification.objects.count() == before + 301
    # The client's first few are enqueued; the rest wait in its backlog for the attempts that end.
    assert written.filter(last_enqueued_at__isnull=False).count() == settings.NOTIFY_CLIENT_CONCURRENCY
    assert len(callbacks) <= settings.NOTIFY_CLIENT_CONCURRENCY + 3
    assert violations([review.pk]) == []
