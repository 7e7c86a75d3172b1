"""Services: the only code that writes reviews, requests and decisions (see STYLE.md).

Views, serializers, admin actions, tasks and management commands all call these.
"""

from moderation.services.breaker import (
    TRIAL,
    breaker_admit,
    breaker_allows,
    breaker_may_claim,
    breaker_record,
    circuit_get,
    review_wait_for_provider,
)
from moderation.services.clients import (
    api_client_authenticate,
    api_client_check_webhook_url,
    api_client_create,
    api_client_revoke,
)
from moderation.services.idempotency import idempotency_records_expire, idempotent_call
from moderation.services.moderator import (
    review_escalate,
    review_override,
    review_release,
    review_reprocess,
    review_take_next,
)
from moderation.services.dispatch import DispatchReport, request_dispatch
from moderation.services.pipeline import request_fail_reported, review_claim, review_finalize
from moderation.services.notifications import notification_deliver, notifications_resend, notifications_resendable
from moderation.services.policy import policy_active, policy_publish
from moderation.services.reconcile import review_reconcile, review_supersede, reviews_sweep
from moderation.services.submission import review_submit

__all__ = [
    "DispatchReport",
    "api_client_authenticate",
    "TRIAL",
    "breaker_admit",
    "breaker_allows",
    "breaker_may_claim",
    "breaker_record",
    "circuit_get",
    "review_wait_for_provider",
    "api_client_check_webhook_url",
    "api_client_create",
    "api_client_revoke",
    "idempotency_records_expire",
    "idempotent_call",
    "notification_deliver",
    "notifications_resend",
    "notifications_resendable",
    "policy_active",
    "request_fail_reported",
    "policy_publish",
    "request_dispatch",
    "review_claim",
    "review_finalize",
    "review_escalate",
    "review_override",
    "review_release",
    "review_take_next",
    "review_reconcile",
    "review_reprocess",
    "review_submit",
    "review_supersede",
    "reviews_sweep",
]
