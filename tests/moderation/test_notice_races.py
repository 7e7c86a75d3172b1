"""Notices under real concurrency (docs/design.md, "Reports"): real threads on PostgreSQL, released
together by a barrier, each with its own connection. The review's row lock orders a notice
against a result and a moderator's decision; after each collision the checker finds nothing."""

from __future__ import annotations

import pytest

from audit.models import ReviewTransition
from moderation import services
from moderation.invariants import violations
from moderation.models import Report
from tests.helpers import SCORE_FOR, claimed, collide, decided, result
from tests.helpers import outcome_of, raised

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 10


def test_a_dsa_notice_racing_the_providers_approving_result_never_leaves_the_review_approved(api_client):
    for _ in range(ROUNDS):
        review, request = claimed(api_client)
        calls = [
            lambda: services.report_file(review_id=review.pk, reporter_id="n", reason="harassment",
                                         kind="dsa_notice"),
            lambda: services.review_finalize(idempotency_key=request.idempotency_key,
                                             result=result(SCORE_FOR["approved"]), cause="provider_result"),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        assert results[1] == "applied"
        review.refresh_from_db()
        # Either the notice came first and the result went to a human, or the approval came
        # first and the notice moved it (cause notice): never approved.
        assert (review.status, review.notice_kind) == ("manual_review", "dsa_notice")
        causes = list(ReviewTransition.objects.filter(review=review).order_by("id").values_list("cause", flat=True))
        assert causes[-1] in ("provider_result", "notice")
        assert violations([review.pk]) == []


def test_a_trusted_flagger_racing_a_moderators_approval_is_either_seen_by_the_moderator_or_sends_it_back(
    api_client, django_user_model
):
    moderator = django_user_model.objects.create_user("mia")
    for _ in range(ROUNDS):
        review = decided(api_client, "manual_review")
        calls = [
            lambda: services.report_file(review_id=review.pk, reporter_id="tf", reason="harassment",
                                         kind="trusted_flagger"),
            lambda: services.review_override(review_id=review.pk, label="approved", reason="a quote",
                                             moderator=moderator),
        ]

        results = collide(2, lambda i: outcome_of(calls[i]))

        assert raised(results) == [], results
        review.refresh_from_db()
        notice = Report.objects.get(review=review)
        approval = ReviewTransition.objects.get(review=review, cause="manual_override")
        moved = ReviewTransition.objects.filter(review=review, cause="notice").first()
        if notice.created_at < approval.created_at:
            # The notice was on the review when the moderator decided: not moved again.
            assert review.status == "approved" and moved is None
            assert notice.decision_id != review.decision_id
        else:
            # The approval came first: the notice sends the approved review back to a human.
            assert review.status == "manual_review" and moved is not None and moved.id > approval.id
            assert notice.decision_id == review.decision_id  # it contests the moderator's approval
        assert review.notice_kind == "trusted_flagger"
        assert violations([review.pk]) == []
