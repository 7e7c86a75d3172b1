"""Report kinds: DSA notices and trusted flaggers send a review to a human whatever the threshold
(docs/design.md, "Reports"), through the REST API, the services, the review queues, the
workplace and the invariant checker."""

from __future__ import annotations

import pytest

from audit.models import ReviewTransition
from moderation import services
from moderation.invariants import notice_violations, violations
from moderation.models import DecisionNotification, NotificationKind, Report, ReportEscalation, ReviewQueue
from moderation.verdicts import NOTICE_EXPLANATION
from tests.helpers import SCORE_FOR, claimed, decided, result, staff_browser, submit
from tests.moderation.test_reports_and_appeals import report
from tests.moderation.test_workplace import timeline

pytestmark = pytest.mark.django_db


def finalize(request, label: str) -> str:
    return services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR[label]),
                                    cause="provider_result")


def test_a_report_is_a_user_report_unless_it_says_otherwise_and_an_unknown_kind_is_a_field_error(http, api_client):
    review = decided(api_client, "approved")

    plain = report(http, review, reporter="u1")
    notice = report(http, review, reporter="u2", kind="dsa_notice")
    unknown = report(http, review, reporter="u3", kind="police")

    assert plain.status_code == 201 and plain.json()["kind"] == "user"
    assert notice.status_code == 201 and notice.json()["kind"] == "dsa_notice"
    assert unknown.status_code == 400 and "kind" in unknown.json()["fields"]
    assert list(Report.objects.order_by("created_at").values_list("kind", flat=True)) == ["user", "dsa_notice"]


@pytest.mark.parametrize("kind", ["dsa_notice", "trusted_flagger"])
def test_a_notice_moves_an_approved_review_to_a_human_at_once_whatever_the_threshold(http, api_client, kind):
    review = decided(api_client, "approved")

    answer = report(http, review, kind=kind)

    assert answer.status_code == 201
    review.refresh_from_db()
    assert (review.status, review.queue, review.notice_kind) == ("manual_review", ReviewQueue.NOTICES, kind)
    moved = ReviewTransition.objects.get(review=review, cause="notice")
    assert (moved.from_status, moved.actor, moved.actor_id) == ("approved", "system", kind)
    # No threshold crossing: the transition is the notice's record; review.reported is the threshold's.
    assert not ReportEscalation.objects.exists()
    assert not DecisionNotification.objects.filter(kind=NotificationKind.REVIEW_REPORTED).exists()
    detail = http.get(f"/api/v1/reviews/{review.pk}/").json()
    assert detail["decision"]["label"] == "approved" and detail["report_count"] == 1  # the decision contested
    assert violations([review.pk]) == []


def test_a_user_report_still_waits_for_the_threshold(http, api_client):
    review = decided(api_client, "approved")

    report(http, review, kind="user")

    review.refresh_from_db()
    assert (review.status, review.notice_kind) == ("approved", "")


@pytest.mark.parametrize("label", ["approved", "rejected", "manual_review"])
def test_a_notice_on_a_review_still_processing_sends_whatever_result_lands_to_a_human(api_client, label):
    review, request = claimed(api_client)
    services.report_file(review_id=review.pk, reporter_id="u1", reason="harassment", kind="dsa_notice")

    assert finalize(request, label) == "applied"

    review.refresh_from_db()
    assert (review.status, review.queue) == ("manual_review", ReviewQueue.NOTICES)
    assert review.decision.label == "manual_review" and review.decision.explanation.startswith(NOTICE_EXPLANATION)
    assert not ReviewTransition.objects.filter(review=review, cause="notice").exists()  # its result moved it
    assert violations([review.pk]) == []


def test_a_notice_on_a_pending_review_is_kept_for_its_result(api_client):
    review = submit(api_client)
    services.report_file(review_id=review.pk, reporter_id="u1", reason="harassment", kind="trusted_flagger")
    request = services.review_claim(review_id=review.pk, worker_id="worker-1")

    finalize(request, "approved")

    review.refresh_from_db()
    assert (review.status, review.notice_kind) == ("manual_review", "trusted_flagger")


@pytest.mark.parametrize("status", ["manual_review", "rejected"])
def test_a_review_with_a_human_or_rejected_is_not_moved_but_the_notice_is_stored_and_counted(http, api_client, status):
    review = decided(api_client, status)

    answer = report(http, review, kind="trusted_flagger")

    assert answer.status_code == 201 and answer.json()["report_count"] == 1
    review.refresh_from_db()
    assert (review.status, review.notice_kind) == (status, "trusted_flagger")
    assert not ReviewTransition.objects.filter(review=review, cause="notice").exists()
    assert violations([review.pk]) == []


def test_a_review_keeps_its_strongest_notice(api_client):
    review = decided(api_client, "rejected")
    for reporter, kind in (("u1", "trusted_flagger"), ("u2", "dsa_notice")):
        services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment", kind=kind)

    review.refresh_from_db()
    assert review.notice_kind == "trusted_flagger"


def test_a_trusted_flagger_goes_ahead_of_every_dsa_notice_in_the_queue(api_client):
    notices = [decided(api_client, "approved") for _ in range(2)]
    for i, review in enumerate(notices):  # the DSA notice first, with more reporters: more priority
        services.report_file(review_id=review.pk, reporter_id=f"u{i}", reason="harassment", kind="user")
    services.report_file(review_id=notices[0].pk, reporter_id="n", reason="harassment", kind="dsa_notice")
    flagged = decided(api_client, "approved")
    services.report_file(review_id=flagged.pk, reporter_id="tf", reason="harassment", kind="trusted_flagger")
    services.report_file(review_id=notices[1].pk, reporter_id="n", reason="harassment", kind="dsa_notice")

    for review in (*notices, flagged):
        review.refresh_from_db()
    order = sorted((*notices, flagged), key=lambda review: (review.queue_order_at, review.pk))
    assert {review.queue for review in order} == {ReviewQueue.NOTICES}
    assert order[0] == flagged


def test_the_workplace_shows_each_reports_kind_and_the_client_who_said_so(django_user_model, api_client):
    moderator = staff_browser(django_user_model, "mia", "moderator")
    review = decided(api_client, "approved")
    services.report_file(review_id=review.pk, reporter_id="tf-1", reason="harassment", kind="trusted_flagger")
    services.report_file(review_id=review.pk, reporter_id="u1", reason="harassment")

    page = moderator.get(timeline(review)).content.decode()
    change = moderator.get(f"/admin/moderation/contentreview/{review.pk}/change/")

    assert f"Trusted flagger (Art. 22)</strong>, as {api_client} says" in page
    assert page.count('class="report-kind"') == 1  # a user report is just a report
    assert "reported by tf-1 as harassment (Trusted flagger (Art. 22))" in page  # the timeline
    assert f"Trusted flagger (Art. 22), as {api_client} says" in change.content.decode()  # the reports inline
    assert f"User (counts toward the threshold), as {api_client} says" in change.content.decode()


def test_the_checker_finds_a_notice_the_review_did_not_keep_and_an_approval_it_did_not_move(api_client):
    review = decided(api_client, "approved")
    # Planted: a notice stored past the service, as a report_file without its notice step would.
    Report.objects.create(review=review, decision=review.decision, reporter_id="n", reason="harassment",
                          kind="dsa_notice")

    found = notice_violations([review.pk])

    assert any("not kept on the review" in problem for problem in found)
    assert any("still approved by the decision" in problem for problem in found)


def test_the_checker_finds_a_provider_approval_after_a_notice(api_client):
    review, request = claimed(api_client)
    # Planted: the notice stored without marking the review, so finalize approves it.
    Report.objects.create(review=review, reporter_id="n", reason="harassment", kind="trusted_flagger")
    finalize(request, "approved")

    found = notice_violations([review.pk])

    assert any("approved by its provider after a notice" in problem for problem in found)


def test_the_notices_queue_says_its_order_and_no_page_shows_dsa_in_lower_case(api_client, django_user_model):
    """Issue 49: the DSA queue's order was not explained, and the review page showed "dsa_notice"."""
    import html as markup
    import re

    review = decided(api_client, "approved")
    services.report_file(review_id=review.pk, reporter_id="u1", reason="other", kind="dsa_notice")
    moderator = staff_browser(django_user_model, "mia", "moderator")

    notices = moderator.get("/admin/moderation/contentreview/queues/?queue=notices").content.decode()
    plain = moderator.get("/admin/moderation/contentreview/queues/?queue=low_confidence").content.decode()
    page = moderator.get(f"/admin/moderation/contentreview/{review.pk}/timeline/").content.decode()

    order = markup.unescape(notices.split('id="queue-order"')[1].split("</p>")[0])
    assert "Trusted flaggers' notices (DSA Art. 22) first, whatever their priority, then DSA notices" in order
    assert "every hour waited adds more" in order
    assert "Trusted flaggers" not in plain.split('id="queue-order"')[1].split("</p>")[0]
    for shown in (notices, page):
        words = markup.unescape(re.sub(r"<[^>]+>", " ", shown.split("<body")[1]))
        assert not re.search(r"\bdsa", words), re.search(r".{0,40}\bdsa.{0,40}", words).group(0)
    assert "system: DSA notice (Art. 16)" in page
    # The only review there is leased to mia now: Review next says the queue is empty, in proper case.
    moderator.post("/admin/moderation/contentreview/review-next/", {"queue": "notices"})
    other = staff_browser(django_user_model, "sam", "moderator")
    said = other.post("/admin/moderation/contentreview/review-next/", {"queue": "notices"}, follow=True)
    assert "The DSA notices and trusted flaggers queue is empty." in [str(m) for m in said.context["messages"]]
