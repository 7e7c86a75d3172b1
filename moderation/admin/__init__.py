"""The admin: reviews (moderation/admin/reviews.py), read-only pipeline records, policy
publishing, API clients, and the dashboard on the index page.

Statuses and decisions are never form fields: only services change them.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from simple_history.admin import SimpleHistoryAdmin

from audit.admin_base import ReadOnlyAdmin, ReadOnlyHistoryMixin
from moderation.admin.reviews import ReviewAdmin
from moderation import services
from moderation.policy import validate_policy
from moderation.models import (
    ApiClient,
    ContentReview,
    Decision,
    ModerationPolicy,
    ModerationRequest,
    ProviderAttempt,
    ProviderCircuit,
    WebhookCircuit,
)


admin.site.register(ContentReview, ReviewAdmin)
admin.site.index_template = "admin/moderation_index.html"
admin.site.site_header = "Moderation"
admin.site.site_title = "Moderation admin"


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
    list_select_related = ["review", "policy", "moderator"]  # nullable: Django would not join them itself
    list_filter = ["label", "source"]
    search_fields = ["=review__id"]
    show_full_result_count = False


class PolicyForm(forms.ModelForm):
    class Meta:
        model = ModerationPolicy
        fields = ["reject_threshold", "review_threshold", "category_thresholds", "flagged_label", "notes"]

    def clean(self):
        data = super().clean()
        if self.errors:  # a field already failed; the policy's rules need every field
            return data
        errors = validate_policy(data)
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(ModerationPolicy)
class ModerationPolicyAdmin(ReadOnlyHistoryMixin, SimpleHistoryAdmin):
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


@admin.register(WebhookCircuit)
class WebhookCircuitAdmin(ReadOnlyAdmin):
    list_display = ["client", "state", "failures", "opened_at", "changed_at"]
    list_select_related = ["client"]


class ApiClientForm(forms.ModelForm):
    webhook_url = forms.URLField(max_length=2048, required=False, assume_scheme="https")

    class Meta:
        model = ApiClient
        fields = ["name", "webhook_url"]

    def clean_webhook_url(self):
        url = self.cleaned_data["webhook_url"]
        if url:
            services.api_client_check_webhook_url(url)  # no server-side request forgery
        return url


@admin.register(ApiClient)
class ApiClientAdmin(admin.ModelAdmin):
    form = ApiClientForm
    list_display = ["name", "token_prefix", "webhook_url", "is_active", "created_at"]
    # Revocation goes through `revoke_api_client` (it records when); the admin only shows it.
    readonly_fields = ["token_hash", "token_prefix", "is_active", "created_at", "revoked_at"]
    fields = ["name", "webhook_url", "is_active", "token_prefix", "token_hash", "created_at", "revoked_at"]

    def has_add_permission(self, request) -> bool:
        return False  # clients are created with `manage.py create_api_client`, which shows the token once
