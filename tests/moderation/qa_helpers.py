"""Moderator QA test data, built through the real services (docs/qa.md)."""

from __future__ import annotations

from django.db import transaction

from moderation import services
from moderation.models import ContentReview
from tests.helpers import decided


def qa_rates(*, golden: float = 0.0, double: float = 0.0) -> None:
    """Publish the next policy version with these QA rates (every other field as the active one's)."""
    with transaction.atomic():
        services.policy_publish_change(lambda active: {"qa_golden_rate": golden, "qa_double_review_rate": double})


def waiting(client) -> ContentReview:
    """A review the model sent to a human."""
    return decided(client, "manual_review")


def golden(client, *, decider, lead, label: str = "rejected", category: str = "harassment"):
    """A review `decider` decided (`label`, `category`), then marked golden by `lead` with that
    decision expected."""
    review = waiting(client)
    services.review_override(review_id=review.pk, label=label, category=category if label == "rejected" else "",
                             reason="the golden reason", moderator=decider)
    return services.golden_mark(review_id=review.pk, expected_label=label,
                                expected_category=category if label == "rejected" else "", lead=lead)


def decided_by(client, moderator, *, label: str = "rejected", category: str = "harassment", reason: str = "first"):
    """A waiting review `moderator` decides (with the policy's double-review rate deciding whether
    it gets a second review); returns the decision."""
    review = waiting(client)
    return services.review_override(review_id=review.pk, label=label, category=category if label == "rejected" else "",
                                    reason=reason, moderator=moderator)
