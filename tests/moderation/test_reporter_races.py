"""Weighted reports under real concurrency (docs/design.md, "Reporters", and invariant 12): real
threads on PostgreSQL released together by a barrier, each with its own connection. Each test has
its control: the same collision with its guard taken out goes wrong."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from audit.models import ReviewTransition
from moderation import services
from moderation.models import ContentReview, Report, ReportEscalation, Reporter, ReporterMute
from moderation.services import reporters as reporters_service
from moderation.services import reports as reports_service
from tests.helpers import collide, decided, violations_with_rated_reporters

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 6
# Twelve reporters weighing 2.00 (always right), 0.50 (never right), 1 (not yet rated) and 0
# (muted by the rule), three of each: 10.50 in all, so the threshold of 6 is crossed partway.
KINDS = [(5, 5, Decimal("2.00")), (5, 0, Decimal("0.50")), (0, 0, Decimal("1.00")), (20, 0, Decimal("0.00"))]


def weighted_reporters(client) -> dict[str, Decimal]:
    weights = {}
    for i in range(12):
        resolved, actioned, weight = KINDS[i % 4]
        Reporter.objects.create(client=client, reporter_id=f"r{i}", resolved=resolved, actioned=actioned)
        weights[f"r{i}"] = weight
    return weights


def twelve_reports_at_once(review) -> list:
    def file(i):
        try:
            return services.report_file(review_id=review.pk, reporter_id=f"r{i}", reason="harassment").created
        except Exception as exc:  # noqa: BLE001 - the control expects some; the test asserts there are none
            return exc

    return collide(12, file)


def crossing_is_the_first_prefix_to_weigh_the_threshold(review) -> tuple[bool, str]:
    """The reports in the order they were stored (under the review's lock: one at a time): the
    threshold moved the review at the first of them whose weights reach it, counting exactly
    the reports before it and itself."""
    crossings = list(ReviewTransition.objects.filter(review=review, cause="user_reports"))
    escalations = list(ReportEscalation.objects.filter(review=review))
    if len(crossings) != 1 or len(escalations) != 1:
        return False, f"{len(crossings)} crossings, {len(escalations)} escalations"
    total, reached = Decimal(0), None
    for n, weight in enumerate(Report.objects.filter(review=review).order_by("created_at")
                               .values_list("weight", flat=True), start=1):
        total += weight
        if total >= THRESHOLD:
            reached = (n, total)
            break
    expected = reached and f"{reached[0]} users reported the decision, weighing {reached[1]}"
    said = crossings[0].reason
    return bool(expected) and escalations[0].report_count == reached[0] and said.startswith(expected), said


@pytest.fixture
def threshold_of_six():
    fields = services.policy_fields(services.policy_active())
    services.policy_publish(**{**fields, "report_threshold": THRESHOLD})


def test_twelve_weighted_reporters_at_once_cross_the_threshold_once_at_the_right_sum(api_client, threshold_of_six):
    weights = weighted_reporters(api_client)
    for _ in range(3):
        review = decided(api_client, "approved")

        created = twelve_reports_at_once(review)

        assert created == [True] * 12
        review.refresh_from_db()
        assert review.status == "manual_review"
        ok, said = crossing_is_the_first_prefix_to_weigh_the_threshold(review)
        assert ok, said
        assert dict(Report.objects.filter(review=review).values_list("reporter_id", "weight")) == weights
        assert violations_with_rated_reporters([review.pk]) == []


def test_without_the_review_lock_weighted_reporters_cross_wrongly(api_client, threshold_of_six, monkeypatch):
    """The control: without the review's row lock, each report sums what it sees, and the
    threshold is crossed twice, never, or at the wrong sum (or a thread fails)."""
    weighted_reporters(api_client)
    monkeypatch.setattr(ContentReview.objects, "select_for_update", lambda *a, **k: ContentReview.objects.all())
    broken = []
    for _ in range(5):
        review = decided(api_client, "approved")
        created = twelve_reports_at_once(review)
        ok, said = crossing_is_the_first_prefix_to_weigh_the_threshold(review)
        if created != [True] * 12 or not ok:
            broken.append(said)
            break
    assert broken


def report_racing_a_mute(api_client, mia, round_no: int, *, mute_after: float):
    """Reporter `ann-N` (weighing 2.00) files a report on a new review while a moderator mutes
    them `mute_after` seconds later; the report holds its read of the weight for 50 ms before
    storing the report, as a slow transaction would."""
    reporter = Reporter.objects.create(client=api_client, reporter_id=f"ann-{round_no}", resolved=5, actioned=5)
    review = decided(api_client, "manual_review")

    def act(i):
        if i == 0:
            return services.report_file(review_id=review.pk, reporter_id=reporter.reporter_id, reason="spam").report
        time.sleep(mute_after)
        return reporters_service.reporter_mute(reporter_pk=reporter.pk, muted=True, reason="brigading", user=mia)

    filed, muted = collide(2, act)
    filed.refresh_from_db()
    return filed, muted


@pytest.fixture
def slow_reports(monkeypatch):
    read = reports_service.reporter_weight_locked

    def slow(**kwargs):
        weight = read(**kwargs)
        time.sleep(0.05)
        return weight

    monkeypatch.setattr(reports_service, "reporter_weight_locked", slow)


def test_a_report_racing_a_mute_weighs_nothing_exactly_when_it_was_stored_after_the_mute(
    api_client, slow_reports, django_user_model
):
    mia = django_user_model.objects.create_user("mia")
    for round_no in range(6):
        filed, muted = report_racing_a_mute(api_client, mia, round_no, mute_after=0.02 if round_no % 2 else 0)

        assert muted.mute == ReporterMute.MUTED
        after = filed.created_at > muted.mute_changed_at
        assert filed.weight == (Decimal(0) if after else Decimal("2.00")), (round_no, filed.created_at,
                                                                            muted.mute_changed_at)


def test_without_the_key_share_lock_a_report_stored_after_a_mute_keeps_its_old_weight(
    api_client, slow_reports, monkeypatch, django_user_model
):
    """The control: a plain read of the reporter lets the mute commit between the report's read
    and its insert, so a report stored after the mute still weighs 2.00."""
    monkeypatch.setattr(reporters_service, "_READ", reporters_service._READ.replace("FOR KEY SHARE", ""))
    mia, wrong = django_user_model.objects.create_user("mia"), []
    for round_no in range(6):
        filed, muted = report_racing_a_mute(api_client, mia, round_no, mute_after=0.02)
        if filed.created_at > muted.mute_changed_at and filed.weight != 0:
            wrong.append(round_no)
    assert wrong


def test_a_report_does_not_wait_for_a_decision_adding_to_its_reporters_counters(api_client):
    """A decision keeps the counters in its transaction (an UPDATE: FOR NO KEY UPDATE); the
    report's FOR KEY SHARE does not conflict with it, so a report files while the decision is
    still open, with the weight committed before it. The control is the mute above: FOR UPDATE
    does wait."""
    import threading

    from django.db import connection, transaction
    from django.db.models import F

    reporter = Reporter.objects.create(client=api_client, reporter_id="ann", resolved=5, actioned=5)
    review = decided(api_client, "manual_review")
    counting, filed, order = threading.Event(), threading.Event(), []

    def decision_counting():
        try:
            with transaction.atomic():
                Reporter.objects.filter(pk=reporter.pk).update(resolved=F("resolved") + 1)
                counting.set()
                filed.wait(timeout=10)
                order.append("decision commits")
        finally:
            connection.close()

    holder = threading.Thread(target=decision_counting)
    holder.start()
    try:
        assert counting.wait(timeout=10)
        report = services.report_file(review_id=review.pk, reporter_id="ann", reason="spam").report
        order.append("report filed")
    finally:
        filed.set()
        holder.join(timeout=15)

    assert order == ["report filed", "decision commits"]
    assert report.weight == Decimal("2.00")  # 5 of 5: the sixth was not committed yet
    reporter.refresh_from_db()
    assert reporter.resolved == 6
