"""Services: the only code that writes reviews, requests and decisions (see STYLE.md).

Views, serializers, admin actions, tasks and management commands all call these.
"""

from moderation.services.breaker import (
    breaker_allows,
    breaker_may_claim,
    breaker_record,
    circuit_get,
    review_wait_for_provider,
)
from moderation.services.clients import api_client_authenticate, api_client_create
from moderation.services.moderator import review_override, review_reprocess
from moderation.services.pipeline import (
    DispatchReport,
    FinalizeOutcome,
    request_dispatch,
    review_claim,
    review_finalize,
)
from moderation.services.policy import policy_active, policy_publish
from moderation.services.reconcile import review_reconcile, review_supersede, reviews_sweep
from moderation.services.submission import review_submit

__all__ = [
    "DispatchReport",
    "FinalizeOutcome",
    "api_client_authenticate",
    "breaker_allows",
    "breaker_may_claim",
    "breaker_record",
    "circuit_get",
    "review_wait_for_provider",
    "api_client_create",
    "policy_active",
    "policy_publish",
    "request_dispatch",
    "review_claim",
    "review_finalize",
    "review_override",
    "review_reconcile",
    "review_reprocess",
    "review_submit",
    "review_supersede",
    "reviews_sweep",
]
