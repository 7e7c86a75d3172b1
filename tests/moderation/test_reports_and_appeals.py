"""The client contract for reports, appeals and statements of reasons (docs/design.md,
"Reports, appeals and statements of reasons"), through the REST API."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from audit.models import ReviewTransition
from moderation import services
from moderation.transparency import reasons
from moderation.errors import FourEyesRequired
from moderation.models import Appeal, DecisionNotification, NotificationKind, Report
from tests.helpers import decided, result, submit

pytestmark = pytest.mark.django_db


def report(http, review, reporter="user-1", reason="harassment", **extra):
    return http.post(f"/api/v1/reviews/{review.pk}/reports/", {"reporter_id": reporter, "reason": reason, **extra},
                     format="json")


def appeal(http, review, appellant="user-9", statement="It was a joke between friends."):
    return http.post(f"/api/v1/reviews/{review.pk}/appeals/", {"appellant_id": appellant, "statement": statement},
                     format="json")


def test_a_first_report_is_201_and_the_same_reporter_again_gets_the_same_report_with_200(http, api_client):
    review = decided(api_client, "approved")

    first = report(http, review, detail="insults in the second line")
    again = report(http, review, reason="other")

    assert first.status_code == 201 and again.status_code == 200
    body = first.json()
    assert set(body) == {"id", "review_id", "reporter_id", "reason", "kind", "created_at", "report_count"}
    assert body["kind"] == "user"
    assert body["review_id"] == str(review.pk) and body["report_count"] == 1
    assert again.json() == body  # the first report, unchanged
    assert Report.objects.count() == 1


def test_the_threshold_of_distinct_reporters_moves_an_approved_review_to_a_human_once(http, api_client):
    review = decided(api_client, "approved")

    codes = [report(http, review, reporter=f"user-{i}").status_code for i in (1, 2, 2, 3, 4)]

    assert codes == [201, 201, 200, 201, 201]
    review.refresh_from_db()
    assert review.status == "manual_review"
    causes = list(ReviewTransition.objects.filter(review=review).values_list("cause", flat=True))
    assert causes.count("user_reports") == 1
    reported = DecisionNotification.objects.get(kind=NotificationKind.REVIEW_REPORTED)
    assert json.loads(reported.payload) == {"type": "review.reported", "data": {
        "review_id": str(review.pk), "external_id": review.content.external_id, "report_count": 3}}
    detail = http.get(f"/api/v1/reviews/{review.pk}/").json()
    assert detail["report_count"] == 4 and detail["status"] == "manual_review"
    assert detail["decision"]["label"] == "approved"  # the decision the reporters contest


def test_reports_on_a_review_in_another_state_are_stored_and_counted_without_a_transition(http, api_client):
    rejected = decided(api_client, "rejected")
    pending = submit(api_client)

    for i in range(4):
        report(http, rejected, reporter=f"user-{i}")
        report(http, pending, reporter=f"user-{i}")

    for review, status in ((rejected, "rejected"), (pending, "pending")):
        review.refresh_from_db()
        assert review.status == status
        assert http.get(f"/api/v1/reviews/{review.pk}/").json()["report_count"] == 4
    assert not ReviewTransition.objects.filter(cause="user_reports").exists()


def test_a_report_is_validated_field_by_field_and_refused_for_another_clients_review(http, api_client, other_client):
    review = decided(api_client, "approved")
    theirs = decided(other_client, "approved")

    bad = http.post(f"/api/v1/reviews/{review.pk}/reports/",
                    {"reporter_id": "x" * 256, "reason": "not-a-category", "detail": "d" * 2001}, format="json")
    missing = http.post(f"/api/v1/reviews/{review.pk}/reports/", {}, format="json")

    assert bad.status_code == 400 and set(bad.json()["fields"]) == {"reporter_id", "reason", "detail"}
    assert set(missing.json()["fields"]) == {"reporter_id", "reason"}
    assert report(http, theirs).status_code == 404
    assert report(http, review, reason="other").status_code == 201  # "other" is always a reason
    assert Report.objects.count() == 1


def test_an_appeal_sends_a_rejection_to_a_human_once_per_decision(http, api_client):
    review = decided(api_client, "rejected")

    first = appeal(http, review)
    second = appeal(http, review, appellant="someone-else")

    assert first.status_code == 201
    assert set(first.json()) == {"id", "review_id", "status", "created_at"} and first.json()["status"] == "open"
    assert second.status_code == 409 and second.json()["error"] == "appeal_exists"
    # The message speaks of the review the client knows, not of internal decision numbers.
    assert second.json()["detail"] == f"the decision in force on review {review.pk} was already appealed"
    review.refresh_from_db()
    assert review.status == "manual_review"
    assert ReviewTransition.objects.filter(review=review, cause="appeal").count() == 1
    shown = http.get(f"/api/v1/reviews/{review.pk}/").json()["appeal"]
    assert shown == {"id": first.json()["id"], "status": "open", "created_at": first.json()["created_at"],
                     "resolved_at": None}


@pytest.mark.parametrize("label", ["approved", "manual_review"])
def test_only_a_rejection_can_be_appealed(http, api_client, label):
    review = decided(api_client, label)

    answer = appeal(http, review)

    assert answer.status_code == 409 and answer.json()["error"] == "not_appealable"
    assert not Appeal.objects.exists()


def test_an_appeal_is_validated_and_refused_for_another_clients_review(http, api_client, other_client):
    review = decided(api_client, "rejected")

    bad = http.post(f"/api/v1/reviews/{review.pk}/appeals/", {"appellant_id": "", "statement": "s" * 5001},
                    format="json")

    assert bad.status_code == 400 and set(bad.json()["fields"]) == {"appellant_id", "statement"}
    assert appeal(http, decided(other_client, "rejected")).status_code == 404
    assert not Appeal.objects.exists()


def test_a_moderator_other_than_the_one_who_rejected_resolves_the_appeal(http, api_client, django_user_model):
    mia, max_ = (django_user_model.objects.create_user(name) for name in ("mia", "max"))
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="slur", category="hate", moderator=mia)
    appeal_id = appeal(http, review).json()["id"]

    with pytest.raises(FourEyesRequired):
        services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia)
    services.review_override(review_id=review.pk, label="approved", reason="reclaimed word, in context", moderator=max_)

    shown = http.get(f"/api/v1/reviews/{review.pk}/").json()
    assert shown["status"] == "approved" and shown["appeal"]["status"] == "overturned"
    assert shown["appeal"]["resolved_at"] is not None
    resolved = DecisionNotification.objects.get(kind=NotificationKind.APPEAL_RESOLVED)
    body = json.loads(resolved.payload)
    assert body["type"] == "appeal.resolved"
    assert body["data"]["appeal_id"] == appeal_id and body["data"]["outcome"] == "overturned"
    assert body["data"]["decision"]["label"] == "approved" and "max" not in resolved.payload


def test_an_upheld_appeal_is_final_and_its_outcome_cannot_be_appealed_again(http, api_client, django_user_model):
    review = decided(api_client, "rejected")
    appeal(http, review)
    services.review_override(review_id=review.pk, label="rejected", reason="still a threat", category="violence",
                             moderator=django_user_model.objects.create_user("mia"))

    again = appeal(http, review)

    assert Appeal.objects.get().status == "upheld"
    assert again.status_code == 409 and again.json()["error"] == "appeal_exists"


def test_every_decision_a_client_sees_is_the_same_statement_of_reasons_naming_no_moderator_and_no_error(
    http, api_client, django_user_model, settings
):
    settings.MODERATION_MAX_SUPERSEDES = 0  # a reported failure hands the review to a human at once
    provider = decided(api_client, "rejected")
    moderated = decided(api_client, "manual_review")
    services.review_override(review_id=moderated.pk, label="rejected", reason="targets a person", share_reason=True,
                             category="harassment", moderator=django_user_model.objects.create_user("mod1"))
    failed = submit(api_client)
    request = services.review_claim(review_id=failed.pk, worker_id="w")
    services.request_fail_reported(idempotency_key=request.idempotency_key, error="connection_error: [Errno 111]")

    statements = {}
    for review in (provider, moderated, failed):
        review.refresh_from_db()
        api = http.get(f"/api/v1/reviews/{review.pk}/").json()["decision"]
        listed = {r["id"]: r for r in http.get("/api/v1/reviews/").json()["results"]}[str(review.pk)]["decision"]
        timeline = [e for e in http.get(f"/api/v1/reviews/{review.pk}/timeline/").json() if e["kind"] == "decision"]
        webhook = json.loads(review.decision.notification.payload)["data"]["decision"]
        assert api == listed == timeline[-1]["detail"] == webhook
        text = json.dumps([api, timeline])
        assert "mod1" not in text and "Errno" not in text and "connection_error" not in text
        statements[review.pk] = api

    assert statements[provider.pk]["reasons"] == [{"category": "harassment", "score": 0.95}]
    assert (statements[provider.pk]["decided_by"], statements[provider.pk]["automated"]) == ("provider", True)
    assert statements[provider.pk]["policy_version"] == 1
    assert statements[moderated.pk]["reasons"] == [{"category": "harassment", "score": None}]
    assert (statements[moderated.pk]["decided_by"], statements[moderated.pk]["automated"]) == ("moderator", False)
    assert "targets a person" in statements[moderated.pk]["explanation"]
    assert statements[failed.pk]["decided_by"] == "system" and statements[failed.pk]["reasons"] == []
    assert statements[failed.pk]["explanation"] == reasons.SYSTEM_EXPLANATION


def test_operators_still_see_who_decided_and_the_internal_error_on_the_command_line_timeline(api_client, django_user_model):
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="targets a person", category="harassment",
                             moderator=django_user_model.objects.create_user("mod1"))
    services.appeal_file(review_id=review.pk, appellant_id="owner-3", statement="It was irony.")
    out = StringIO()

    call_command("review_timeline", str(review.pk), stdout=out)

    assert "decision: rejected by moderator:mod1" in out.getvalue()
    assert "targets a person" in out.getvalue()
    assert "appeal filed by owner-3" in out.getvalue() and "rejected -> manual_review (appeal)" in out.getvalue()


def test_the_threshold_counts_the_reporters_of_the_decision_in_force_only(http, api_client, django_user_model):
    pending = submit(api_client)
    for reporter in ("a", "b", "c"):  # before any decision: stored and counted, toward no threshold
        report(http, pending, reporter=reporter)
    request = services.review_claim(review_id=pending.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.1), cause="provider_result")
    report(http, pending, reporter="d")
    pending.refresh_from_db()
    assert pending.status == "approved" and http.get(f"/api/v1/reviews/{pending.pk}/").json()["report_count"] == 4

    confirmed = decided(api_client, "approved")
    for reporter in ("a", "b", "c"):
        report(http, confirmed, reporter=reporter)
    services.review_override(review_id=confirmed.pk, label="approved", reason="fair criticism",
                             moderator=django_user_model.objects.create_user("mia"))
    for reporter in ("d", "e"):  # two reporters of the moderator's approval: below the threshold
        report(http, confirmed, reporter=reporter)
    confirmed.refresh_from_db()
    assert confirmed.status == "approved"
    report(http, confirmed, reporter="f")
    confirmed.refresh_from_db()
    assert confirmed.status == "manual_review"
    assert ReviewTransition.objects.filter(review=confirmed, cause="user_reports").count() == 2
