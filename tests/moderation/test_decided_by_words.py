"""The workplace's words tell who decided (issue: "profanity 0.04" was shown on a review a rule
rejected, "by the model" on one a hash bank matched): a rule's or a bank's decision is named as
theirs in the list's top category, the decision and the status words."""

from __future__ import annotations

import pytest

from moderation import services
from moderation.admin import review_page
from moderation.admin.review_words import decision_words, status_words
from moderation.models import ContentReview, ReviewStatus
from tests.helpers import SCORE_FOR, result, submit

pytestmark = pytest.mark.django_db


def finalized(review, score: float) -> ContentReview:
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(score), cause="provider_result")
    return ContentReview.objects.select_related("decision").get(pk=review.pk)


def publish_rule(**rule):
    active = services.policy_active()
    return services.policy_publish(**{**services.policy_fields(active), "term_lists": [rule]})


def test_a_review_a_rule_rejected_is_named_as_the_rules_not_by_the_models_score(api_client):
    publish_rule(category="insult", action="reject", language="", terms=["moron"])
    review = finalized(submit(api_client, text="you absolute moron"), 0.04)

    assert review.status == ReviewStatus.REJECTED
    assert review_page.top_category_text(review) == "insult (rule)"
    assert "by rule insult:reject" in decision_words(review.decision)
    assert status_words(review) == "Rejected by rule insult:reject"


def test_a_review_the_model_decided_keeps_the_models_words(api_client):
    publish_rule(category="insult", action="reject", language="", terms=["moron"])
    other = finalized(submit(api_client, text="a calm remark about the weather"), SCORE_FOR["rejected"])

    assert other.status == ReviewStatus.REJECTED
    assert review_page.top_category_text(other).startswith("harassment 0.95")
    assert "by the model" in decision_words(other.decision) and status_words(other) == "Rejected by the model"


def test_a_hash_bank_match_is_named_as_the_banks():
    from moderation.models import Decision, DecisionSource

    decision = Decision(label=ReviewStatus.REJECTED, source=DecisionSource.PROVIDER, category_scores={},
                        rule_matches=[{"rule": "bank:known-bad", "category": "sexual", "action": "reject",
                                       "language": "", "term": "", "start": None, "end": None, "distance": 4}])
    review = ContentReview(decision=decision)
    assert review_page.top_category_text(review) == "sexual (hash bank)"
    assert "by hash bank known-bad" in decision_words(decision)
