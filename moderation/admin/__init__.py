"""The admin as it stands for the pipeline: read-only records, policy publishing, API clients.

Statuses and decisions are never form fields: only services change them.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from simple_history.admin import SimpleHistoryAdmin

from audit.admin_base import ReadOnlyAdmin
from moderation import services
from moderation.policy import validate_category_thresholds
from moderation.models import (
    ApiClient,
    ContentReview,
    Decision,
    ModerationPolicy,
    ModerationRequest,
    ProviderAttempt,
    ProviderCircuit,
)


class ReviewAdmin(SimpleHistoryAdmin):
    list_display = ["id", "status", "kind", "client", "decision_label", "created_at", "completed_at"]
    list_filter = ["status", "content__kind", "client"]
    search_fields = ["=id", "=content__id", "content__external_id", "=active_idempotency_key", "provider_request_id"]
    list_select_related = ["content", "client", "decision"]
    readonly_fields = [f.name for f in ContentReview._meta.fields]
    show_full_result_count = False

    @admin.display(description="content type", ordering="content__kind")
    def kind(self, review):
        return review.content.kind

    @admin.display(description="decision")
    def decision_label(self, review):
        return review.decision.label if review.decision else "—"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # reviews change through services only (moderator actions have their own views)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def history_form_view(self, request, object_id, version_id, extra_context=None):
        # SIMPLE_HISTORY_REVERT_DISABLED only hides the button: a POST here would still save the
        # old row over the current one, past the state machine and the transition log.
        if request.method != "GET":
            raise PermissionDenied("history is read-only")
        return super().history_form_view(request, object_id, version_id, extra_context)


admin.site.register(ContentReview, ReviewAdmin)


@admin.register(ModerationRequest)
class ModerationRequestAdmin(ReadOnlyAdmin):
    list_display = ["idempotency_key", "review", "provider", "status", "cause", "attempt_no", "generation", "created_at"]
    list_filter = ["status", "provider", "cause"]
    search_fields = ["=idempotency_key", "=review__id", "provider_request_id"]
    show_full_result_count = False


@admin.register(ProviderAttempt)
class ProviderAttemptAdmin(ReadOnlyAdmin):
    list_display = ["request", "attempt_no", "outcome", "worker_id", "latency_ms", "started_at"]
    list_filter = ["outcome"]
    search_fields = ["=request__idempotency_key", "worker_id", "job_id"]
    show_full_result_count = False


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["review", "label", "source", "score", "policy", "moderator", "created_at"]
    list_filter = ["label", "source"]
    search_fields = ["=review__id"]
    show_full_result_count = False


class PolicyForm(forms.ModelForm):
    class Meta:
        model = ModerationPolicy
        fields = ["reject_threshold", "review_threshold", "category_thresholds", "flagged_label", "notes"]

    def clean(self):
        data = super().clean()
        errors = validate_category_thresholds(data.get("category_thresholds") or {})
        review, reject = data.get("review_threshold"), data.get("reject_threshold")
        if review is not None and reject is not None and not 0 <= review <= reject <= 1:
            errors.append("Thresholds must satisfy 0 <= review <= reject <= 1.")
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(ModerationPolicy)
class ModerationPolicyAdmin(SimpleHistoryAdmin):
    """Versions are immutable: "add" publishes a new version, pre-filled from the newest one."""

    form = PolicyForm

    list_display = ["version", "review_threshold", "reject_threshold", "flagged_label", "created_by", "created_at"]
    fields = ["reject_threshold", "review_threshold", "category_thresholds", "flagged_label", "notes"]

    def get_changeform_initial_data(self, request):
        latest = services.policy_active()
        return {field: getattr(latest, field) for field in self.fields if field != "notes"}

    def has_change_permission(self, request, obj=None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        published = services.policy_publish(
            reject_threshold=obj.reject_threshold,
            review_threshold=obj.review_threshold,
            category_thresholds=obj.category_thresholds,
            flagged_label=obj.flagged_label,
            notes=obj.notes,
            created_by=request.user,
        )
        obj.pk, obj.version = published.pk, published.version


@admin.register(ProviderCircuit)
class ProviderCircuitAdmin(ReadOnlyAdmin):
    list_display = ["provider", "state", "opened_at", "probe_started_at", "last_failure_ratio", "changed_at"]


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    list_display = ["name", "token_prefix", "webhook_url", "is_active", "created_at"]
    readonly_fields = ["token_hash", "token_prefix", "created_at", "revoked_at"]
    fields = ["name", "webhook_url", "is_active", "token_prefix", "token_hash", "created_at", "revoked_at"]

    def has_add_permission(self, request) -> bool:
        return False  # clients are created with `manage.py create_api_client`, which shows the token once
