from django.contrib import admin

from audit.admin_base import ReadOnlyAdmin
from audit.models import PipelineEvent, ReviewTransition


@admin.register(ReviewTransition)
class ReviewTransitionAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "review", "from_status", "to_status", "cause", "actor", "actor_id", "attempt_no"]
    list_filter = ["cause", "actor", "to_status"]
    search_fields = ["=review__id", "=idempotency_key", "job_id", "actor_id"]
    list_select_related = ["review"]
    show_full_result_count = False


@admin.register(PipelineEvent)
class PipelineEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "kind", "review", "idempotency_key", "worker_id", "job_id"]
    list_select_related = ["review"]  # nullable: Django would not join it itself
    list_filter = ["kind"]
    search_fields = ["=review__id", "=idempotency_key", "job_id"]
    show_full_result_count = False
