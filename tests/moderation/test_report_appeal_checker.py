"""The invariant checker's report and appeal checks can fail (moderation/invariants.py, invariants 1,
12 and 13): each is shown the violation its guard prevents, written past that guard, and reports
it; the same review with the guard in place leaves nothing to report."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from django.db import connection
from django.db.models import F

from audit.models import Actor, ReviewTransition
from moderation import services
from moderation.errors import FourEyesRequired
from moderation.invariants import violations
from moderation.models import Appeal, Cause, ContentReview, ReportEscalation, ReviewStatus
from tests.helpers import decided

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]


@contextmanager
def without(table: str, drop: str, restore: str):
    """A uniqueness guard taken out of the schema for the block, and put back after it (the
    block deletes the rows that break it first)."""
    with connection.cursor() as cursor:
        cursor.execute(drop)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(restore)


@pytest.mark.django_db(transaction=True)
def test_a_decision_appealed_twice_is_reported(api_client):
    review = decided(api_client, "rejected")
    first = services.appeal_file(review_id=review.pk, appellant_id="owner", statement="wrong")
    assert violations([review.pk]) == []

    with without("moderation_appeal",
                 "ALTER TABLE moderation_appeal DROP CONSTRAINT moderation_appeal_decision_id_key; "
                 "DROP INDEX appeal_one_open_per_review",
                 "ALTER TABLE moderation_appeal ADD CONSTRAINT moderation_appeal_decision_id_key UNIQUE (decision_id); "
                 "CREATE UNIQUE INDEX appeal_one_open_per_review ON moderation_appeal (review_id) "
                 "WHERE status = 'open'"):
        try:
            # Past the review lock and the AppealExists check: a second appeal of the same decision.
            Appeal.objects.create(review=review, decision_id=first.decision_id, appellant_id="owner-2",
                                  statement="again")
            found = violations([review.pk])
        finally:
            Appeal.objects.exclude(pk=first.pk).delete()

    assert f"decision {first.decision_id}: appealed 2 times" in found, found


def test_an_appeal_decided_by_the_moderator_who_made_the_appealed_decision_is_reported(
    api_client, django_user_model, monkeypatch
):
    from moderation.services import moderator as moderator_services

    mia = django_user_model.objects.create_user("mia")
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="slur", category="hate", moderator=mia)
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="reclaimed word")
    with pytest.raises(FourEyesRequired):  # the guard in place: refused, nothing to report
        services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia)
    assert violations([review.pk]) == []

    monkeypatch.setattr(moderator_services, "appeal_check_four_eyes", lambda appeal, moderator: None)
    services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia)

    found = violations([review.pk])
    assert any("decided by the moderator who made the appealed decision" in v for v in found), found


@pytest.mark.django_db(transaction=True)
def test_a_decision_crossing_the_report_threshold_twice_is_reported(api_client):
    review = decided(api_client, "approved")
    for reporter in ("u1", "u2", "u3"):  # the default threshold: 3 reporters
        services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment")
    crossing = ReportEscalation.objects.get(review=review)
    assert violations([review.pk]) == []

    with without("moderation_reportescalation",
                 "ALTER TABLE moderation_reportescalation DROP CONSTRAINT moderation_reportescalation_decision_id_key",
                 "ALTER TABLE moderation_reportescalation ADD CONSTRAINT moderation_reportescalation_decision_id_key "
                 "UNIQUE (decision_id)"):
        try:
            # Past the lock and the status check: the same decision's reporters counted over again.
            again = ReviewTransition.objects.create(
                review=review, from_status=ReviewStatus.APPROVED, to_status=ReviewStatus.MANUAL_REVIEW,
                cause=Cause.USER_REPORTS, actor=Actor.SYSTEM, actor_id="report-threshold")
            ReportEscalation.objects.create(review=review, decision=crossing.decision, transition=again,
                                            report_count=4, threshold=3)
            found = violations([review.pk])
        finally:
            ReportEscalation.objects.exclude(pk=crossing.pk).delete()  # (transitions are append-only)

    assert f"decision {crossing.decision_id}: crossed the report threshold 2 times" in found, found


@pytest.mark.parametrize(("label", "cause"), [("rejected", Cause.USER_REPORTS), ("approved", Cause.APPEAL)])
def test_a_report_or_appeal_transition_from_the_wrong_status_is_reported_illegal(api_client, label, cause):
    review = decided(api_client, label)
    # Past the state machine: the status changed, and logged, as a report (or appeal) would.
    ContentReview.objects.filter(pk=review.pk).update(status=ReviewStatus.MANUAL_REVIEW, version=F("version") + 1)
    ReviewTransition.objects.create(review=review, from_status=label, to_status=ReviewStatus.MANUAL_REVIEW,
                                    cause=cause, actor=Actor.SYSTEM)

    found = violations([review.pk])
    assert f"{review.pk}: illegal transition {label} -> manual_review ({cause})" in found, found


def test_an_appeal_filed_without_its_logged_transition_is_reported(api_client, monkeypatch):
    from moderation.services import appeals

    review = decided(api_client, "rejected")
    monkeypatch.setattr(appeals, "transition_review", lambda *a, **k: None)  # no transition, none logged
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="wrong")

    found = violations([review.pk])
    assert f"{review.pk}: 1 appeals, 0 appeal transitions" in found, found
