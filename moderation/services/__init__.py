"""Services: the code that writes reviews, requests and decisions (docs/design.md, "Layers",
item 3, and the paragraph after that list on how a service is written). Above them only
erasure (`moderation/privacy/erasure.py`) and retention (`moderation/privacy/retention.py`) also write.

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
    api_client_update,
)
from moderation.services.bulk import (
    BULK_MAX_REVIEWS,
    BULK_SLICE_S,
    BulkProgress,
    bulk_job_cancel,
    bulk_job_draft,
    bulk_job_progress,
    bulk_job_run,
    bulk_job_start,
    bulk_jobs_resume,
)
from moderation.services.heartbeat import SWEEPER, heartbeat_beat, notifier, notifier_schedule_ensure
from moderation.services.idempotency import idempotency_records_expire, idempotent_call
from moderation.services.moderator import (
    review_escalate,
    review_note_add,
    review_override,
    review_release,
    review_reprocess,
    review_second_look,
    review_take_next,
    review_undo,
    reviews_waiting_for_another,
)
from moderation.services.dispatch import DispatchReport, request_dispatch
from moderation.services.qa import (
    golden_mark,
    golden_retire,
    qa_answer,
    qa_disagreement_settle,
    qa_item_shown,
    qa_note_add,
)
from moderation.services.batch import requests_dispatch_batch
from moderation.services.pipeline import (
    Claim,
    request_fail_reported,
    review_claim,
    review_claimed_by_batch,
    reviews_claim,
)
from moderation.services.results import review_finalize
from moderation.services.media import media_preference_set
from moderation.services.notifications import notification_deliver, notifications_resend, notifications_resendable
from moderation.services.routing import (
    QueueInfo,
    queue_check_access,
    queues_forbidden,
    review_queue_label,
    review_queue_save,
    review_queue_slugs,
    review_queues,
    route_facts,
)
from moderation.services.policy import content_language, policy_activate, policy_active, policy_draft, policy_fields, policy_publish, policy_publish_change, policy_publish_previewed
from moderation.services.reconcile import review_reconcile, review_supersede, reviews_sweep, reviews_worker_lost
from moderation.services.submission import review_submit
from moderation.services.reports import ReportFiled, report_file
from moderation.services.report_outcomes import reports_expire_due
from moderation.services.reporters import reporter_mute
from moderation.services.appeals import appeal_file
from moderation.services.statement_sending import SendReport, statements_submit
from moderation.services.statements import statement_requeue
from moderation.services.authors import author_ensure
from moderation.services.strikes import authors_sweep, strikes_lapse_due
from moderation.services.account_actions import author_act, author_lift, restrictions_expire_due
from moderation.services.account_appeals import account_appeal_file, account_appeal_resolve
from moderation.services.second_looks import second_look_confirm

__all__ = [
    "account_appeal_file",
    "BULK_MAX_REVIEWS",
    "BULK_SLICE_S",
    "BulkProgress",
    "bulk_job_cancel",
    "bulk_job_draft",
    "bulk_job_progress",
    "bulk_job_run",
    "bulk_job_start",
    "bulk_jobs_resume",
    "account_appeal_resolve",
    "author_act",
    "author_ensure",
    "author_lift",
    "authors_sweep",
    "restrictions_expire_due",
    "strikes_lapse_due",
    "Claim",
    "DispatchReport",
    "SWEEPER",
    "heartbeat_beat",
    "notifier",
    "notifier_schedule_ensure",
    "ReportFiled",
    "appeal_file",
    "SendReport",
    "statements_submit",
    "statement_requeue",
    "report_file",
    "reports_expire_due",
    "reporter_mute",
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
    "api_client_update",
    "idempotency_records_expire",
    "idempotent_call",
    "media_preference_set",
    "notification_deliver",
    "notifications_resend",
    "notifications_resendable",
    "content_language",
    "policy_activate",
    "policy_active",
    "policy_draft",
    "policy_fields",
    "request_fail_reported",
    "policy_publish",
    "policy_publish_previewed",
    "policy_publish_change",
    "request_dispatch",
    "requests_dispatch_batch",
    "review_claimed_by_batch",
    "golden_mark",
    "golden_retire",
    "qa_answer",
    "qa_disagreement_settle",
    "qa_item_shown",
    "qa_note_add",
    "reviews_claim",
    "review_claim",
    "review_finalize",
    "review_escalate",
    "review_second_look",
    "second_look_confirm",
    "review_undo",
    "review_note_add",
    "review_override",
    "review_release",
    "review_take_next",
    "reviews_waiting_for_another",
    "review_reconcile",
    "review_reprocess",
    "review_submit",
    "review_supersede",
    "reviews_sweep",
    "reviews_worker_lost",
    "QueueInfo",
    "queue_check_access",
    "queues_forbidden",
    "review_queue_label",
    "review_queue_save",
    "review_queue_slugs",
    "review_queues",
    "route_facts",
]
