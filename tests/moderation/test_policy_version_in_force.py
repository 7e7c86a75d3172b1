"""Every decision names the policy version in force when it was made (docs/design.md, invariant
9): a moderator's, an escalation, an appeal's resolution and the system's, as a client reads them
(`policy_version` in the API's statement of reasons and in the webhook)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from audit.models import Actor
from moderation import services
from moderation.privacy.erasure import content_erase
from moderation.models import ModerationPolicy, TransparencyStatement
from tests.helpers import claimed, decided

pytestmark = pytest.mark.django_db


def publish(**fields) -> ModerationPolicy:
    """A new version, published after the review's first decision: the one now in force."""
    return services.policy_publish(reject_threshold=0.9, review_threshold=0.5, **fields)


def shown(http, review) -> dict:
    return http.get(f"/api/v1/reviews/{review.pk}/").json()["decision"]


def webhook(review) -> dict:
    review.refresh_from_db()
    return json.loads(review.decision.notification.payload)["data"]["decision"]


def test_a_moderators_decision_names_the_version_in_force_not_the_models(http, api_client, django_user_model):
    review = decided(api_client, "manual_review")  # the model's decision, under version 1
    in_force = publish()

    services.review_override(review_id=review.pk, label="approved", reason="fine",
                             moderator=django_user_model.objects.create_user("mia"))

    assert in_force.version == 2
    assert shown(http, review)["policy_version"] == 2 == webhook(review)["policy_version"]
    assert review.decisions.order_by("id").first().policy.version == 1  # the model's keeps its own


def test_a_moderators_rejection_is_noticed_and_stated_under_the_version_in_force(http, api_client, django_user_model):
    review = decided(api_client, "manual_review")
    publish(appeal_window_days=30)

    services.review_override(review_id=review.pk, label="rejected", reason="a threat", category="violence",
                             moderator=django_user_model.objects.create_user("mia"))

    review.refresh_from_db()
    decision = shown(http, review)
    # Its appeal window is that version's, no longer the default one of a decision without a version.
    assert decision["appealable_until"] == (review.decision.created_at + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    assert TransparencyStatement.objects.get(decision=review.decision).policy.version == 2


def test_an_escalation_names_the_version_in_force(http, api_client, django_user_model):
    review, _ = claimed(api_client)
    publish()

    services.review_escalate(review_id=review.pk, reason="look at this", moderator=django_user_model.objects.create_user("mia"))

    decision = shown(http, review)
    assert (decision["label"], decision["policy_version"]) == ("manual_review", 2)


def test_an_appeals_resolution_names_the_version_in_force(http, api_client, django_user_model):
    mia, max_ = (django_user_model.objects.create_user(name) for name in ("mia", "max"))
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="slur", category="hate", moderator=mia)
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a reclaimed word")
    publish()

    services.review_override(review_id=review.pk, label="approved", reason="reclaimed, in context", moderator=max_)

    review.refresh_from_db()
    appealed, resolution = review.appeals.get().decision, review.decision
    assert (appealed.policy.version, resolution.policy.version) == (1, 2)
    assert shown(http, review)["policy_version"] == 2 == webhook(review)["policy_version"]


def test_system_decisions_name_the_version_in_force(http, api_client, settings):
    settings.MODERATION_MAX_SUPERSEDES = 0  # a reported failure hands the review to a human at once
    failed, request = claimed(api_client)
    erased, _ = claimed(api_client)
    publish()

    services.request_fail_reported(idempotency_key=request.idempotency_key, error="connection_error")
    content_erase(review_id=erased.pk, actor=Actor.ADMIN, actor_id="dpo", reason="the author asked")

    assert (shown(http, failed)["decided_by"], shown(http, failed)["policy_version"]) == ("system", 2)
    erased.refresh_from_db()
    assert (erased.decision.source, erased.decision.policy.version) == ("system", 2)
