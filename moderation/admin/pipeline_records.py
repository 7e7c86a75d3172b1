"""The pipeline's records of reviews in the admin, read-only: the transition log and the
pipeline's events (the audit app's models) and the callback inbox (the callbacks app's).

They are registered here, not in their own apps: the audit records import no other app, and
each row is of a review, whose queue decides who may see it (moderation/admin/visibility.py).
"""

from __future__ import annotations

from django.contrib import admin

from audit.admin_base import ReadOnlyAdmin
from audit.models import PipelineEvent, ReviewTransition
from callbacks.models import ProviderCallback
from moderation.admin.visibility import ReviewScoped
from moderation.models import ModerationRequest
from moderation.selectors import hidden_from


@admin.register(ReviewTransition)
class ReviewTransitionAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["created_at", "review", "from_status", "to_status", "cause", "actor", "actor_id", "attempt_no"]
    list_filter = ["cause", "actor", "to_status"]
    search_fields = ["=review__id", "=idempotency_key", "job_id", "actor_id"]
    list_select_related = ["review"]
    show_full_result_count = False


@admin.register(PipelineEvent)
class PipelineEventAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["created_at", "kind", "review", "idempotency_key", "worker_id", "job_id"]
    list_select_related = ["review"]  # nullable: Django would not join it itself
    list_filter = ["kind"]
    search_fields = ["=review__id", "=idempotency_key", "job_id"]
    show_full_result_count = False


@admin.register(ProviderCallback)
class ProviderCallbackAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["received_at", "provider", "provider_event_id", "outcome", "duplicate_count", "processed_at"]
    list_filter = ["provider", "outcome"]
    search_fields = ["=provider_event_id", "=idempotency_key", "=provider_request_id"]
    show_full_result_count = False

    def visible_rows(self, user, rows):
        # A callback names its review through the operation's key, not a foreign key: the keys of
        # the operations of reviews the user may not see are left out (a callback naming no
        # known operation is no review's).
        hidden = hidden_from(user, through="review")
        if hidden is None:
            return rows
        return rows.exclude(idempotency_key__in=ModerationRequest.objects.filter(hidden).values("idempotency_key"))
