"""The admin: reviews (moderation/admin/reviews.py), authors (moderation/admin/authors.py), account appeals
(moderation/admin/account_appeals.py), reporters
(moderation/admin/reporters.py), statements of reasons (moderation/admin/statements.py), read-only pipeline records, policy
publishing, API clients, and the dashboard on the index page.

Statuses and decisions are never form fields: only services change them. Rows of a review are
shown only to those who may see the review (moderation/admin/visibility.py).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.urls import path
from simple_history.admin import SimpleHistoryAdmin

from audit.admin_base import ReadOnlyAdmin, ReadOnlyHistoryMixin
from moderation.admin import erasure  # noqa: F401  (registers the tombstones' admin)
from moderation.admin import hash_banks  # noqa: F401  (registers the hash banks' admin)
from moderation.admin import legal_holds  # noqa: F401  (registers the legal holds' and snapshots' admin)
from moderation.admin import pipeline_records  # noqa: F401  (registers the transitions', events' and callbacks' admin)
from moderation.admin import queues  # noqa: F401  (registers the review queues' admin)
from moderation.admin import qa  # noqa: F401  (registers the QA page)
from moderation.admin import statements  # noqa: F401  (registers the statements of reasons' admin)
from moderation.admin.account_appeals import AccountAppealAdmin
from moderation.admin.authors import AuthorAdmin
from moderation.admin.backtests import BacktestAdmin, activate_view, backtest_start_view, policy_quality_panel
from moderation.admin.bulk_jobs import BulkJobAdmin
from moderation.admin.shadows import ShadowRunAdmin, policy_shadow_panel, shadow_start_view
from moderation.admin.reporters import ReporterAdmin
from moderation.admin.reviews import ReviewAdmin
from moderation.admin.notice_templates import notice_templates_view
from moderation.admin.operating_points import operating_points_panel
from moderation.admin.transparency_report import transparency_report_view
from moderation.admin.visibility import ReviewScoped
from moderation.admin.term_lists import term_lists_view
from moderation.admin.routing import routing_view
from moderation import services
from moderation.validation import AUTHOR_FIELDS, DEFINITION_FIELDS, DSA_FIELDS, EVIDENCE_FIELDS, MEDIA_FIELDS, NOTICE_FIELDS, PART_FIELDS, PRIORITY_WEIGHTS, QA_FIELDS, REASON_FIELDS, REPORT_FIELDS, ROUTING_FIELDS, definitions_kept, validate_policy
from moderation.text.rules import rule_name
from moderation.models import (
    AccountAppeal,
    ApiClient,
    Backtest,
    BulkJob,
    ShadowRun,
    default_dsa_mapping,
    Author,
    ContentReview,
    Decision,
    ModerationPolicy,
    ModerationRequest,
    Reporter,
    ReviewStatus,
    ProviderAttempt,
    ProviderCircuit,
    default_model_languages,
    WebhookCircuit,
)


admin.site.register(ContentReview, ReviewAdmin)
admin.site.register(Author, AuthorAdmin)
admin.site.register(AccountAppeal, AccountAppealAdmin)
admin.site.register(BulkJob, BulkJobAdmin)
admin.site.register(Backtest, BacktestAdmin)
admin.site.register(ShadowRun, ShadowRunAdmin)
admin.site.register(Reporter, ReporterAdmin)
admin.site.index_template = "admin/moderation_index.html"
admin.site.site_header = "Moderation"
admin.site.site_title = "Moderation admin"
admin.site.site_url = None  # no public site to view: Django's "View site" link led to a 404


@admin.register(ModerationRequest)
class ModerationRequestAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["idempotency_key", "review", "provider", "status", "cause", "attempt_no", "generation", "created_at"]
    list_filter = ["status", "provider", "cause"]
    search_fields = ["=idempotency_key", "=review__id", "provider_request_id"]
    show_full_result_count = False


@admin.register(ProviderAttempt)
class ProviderAttemptAdmin(ReviewScoped, ReadOnlyAdmin):
    review_path = "request__review"
    list_display = ["request", "attempt_no", "outcome", "worker_id", "latency_ms", "started_at"]
    list_filter = ["outcome"]
    search_fields = ["=request__idempotency_key", "worker_id", "job_id"]
    show_full_result_count = False


@admin.register(Decision)
class DecisionAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["review", "label", "source", "score", "policy", "moderator", "created_at"]
    list_select_related = ["review", "policy", "moderator"]  # nullable: Django would not join them itself
    list_filter = ["label", "source"]
    search_fields = ["=review__id"]
    show_full_result_count = False

    def get_urls(self):
        # The transparency report counts decisions, notices, appeals and account actions; it is
        # served here, with its own permission (moderation.admin.transparency_report).
        own = [path("transparency-report/",
                    self.admin_site.admin_view(lambda request: transparency_report_view(self, request)),
                    name="moderation_transparency_report")]
        return own + super().get_urls()


class PolicyForm(forms.ModelForm):
    # The version the form was filled from: publishing refuses if another was published since
    # (its changes, e.g. imported terms, would otherwise be dropped).
    based_on = forms.IntegerField(required=False, widget=forms.HiddenInput)
    as_draft = forms.BooleanField(
        required=False, label="Save as a draft",
        help_text="A draft acts on nothing: backtest it on its page, then activate it (docs/quality.md).")

    class Meta:
        model = ModerationPolicy
        fields = ["reject_threshold", "review_threshold", "category_thresholds", "flagged_label", "report_threshold",
                  "categories", *PRIORITY_WEIGHTS, *AUTHOR_FIELDS, *NOTICE_FIELDS, *REPORT_FIELDS, "model_languages", "unjudged_label",
                  "term_lists", *DSA_FIELDS, *REASON_FIELDS, "pdq_distance", "image_fallback", *PART_FIELDS, *ROUTING_FIELDS, *DEFINITION_FIELDS, *QA_FIELDS,
                  *EVIDENCE_FIELDS, "notes"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("unjudged_label", "pdq_distance", "image_fallback", *PART_FIELDS, *QA_FIELDS, *EVIDENCE_FIELDS):
            if name in self.fields:  # a published version's page is read-only: no fields
                self.fields[name].required = False

    def clean(self):
        data = super().clean()
        if self.errors:  # a field already failed; the policy's rules need every field
            return data
        # Fields left out of the post keep their defaults (term lists have their own editor).
        if data.get("model_languages") is None:
            data["model_languages"] = default_model_languages()
        data["term_lists"] = data.get("term_lists") or []
        data["notice_templates"] = data.get("notice_templates") or {}
        data["dsa_mapping"] = data.get("dsa_mapping") or default_dsa_mapping()
        data["unjudged_label"] = data.get("unjudged_label") or ReviewStatus.MANUAL_REVIEW
        data["routing_rules"] = data.get("routing_rules") or []
        active = services.policy_active()
        if data.get("based_on") is not None and data["based_on"] != active.version:
            raise ValidationError(f"{active} was published since this form was filled: reload it")
        # The banks a version lists are the hash_banks command's (docs/images.md, "Hash banks"):
        # the new version keeps the ones it was filled from, and the image fields left out theirs.
        data["hash_banks"] = active.hash_banks
        # (And the evidence fields left out, docs/legal-holds.md: an empty list posted is a choice.)
        for name in ("pdq_distance", "image_fallback", *PART_FIELDS, *QA_FIELDS, *EVIDENCE_FIELDS):
            if data.get(name) in (None, ""):
                data[name] = getattr(active, name)
        # Canned reasons left out (an empty field) keep the active version's; {} offers none.
        if data.get("canned_reasons") is None:
            data["canned_reasons"] = active.canned_reasons
        # Definitions left out keep the active version's, of the categories this one names
        # ({} gives the llm provider none to judge by).
        if data.get("category_definitions") is None:
            data["category_definitions"] = definitions_kept(active.category_definitions, data)
        errors = validate_policy(data, queues=services.review_queue_slugs())
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(ModerationPolicy)
class ModerationPolicyAdmin(ReadOnlyHistoryMixin, SimpleHistoryAdmin):
    """Versions are immutable: "add" publishes a new version, pre-filled from the newest one."""

    form = PolicyForm

    list_display = ["version", "state", "review_threshold", "reject_threshold", "flagged_label", "report_threshold", "rules", "created_by", "created_at"]
    fields = [*PolicyForm.Meta.fields, "based_on", "as_draft"]

    @admin.display(description="state")
    def state(self, policy):
        if policy.is_draft:
            return f"draft of v{policy.drafted_from}"
        return "activated draft" if policy.activated_at else "published"
    change_list_template = "admin/moderation/moderationpolicy/change_list.html"

    @admin.display(description="rules")
    def rules(self, policy):
        return ", ".join(f"{rule_name(r)} ({len(r['terms'])})" for r in policy.term_lists) or "—"

    def get_urls(self):
        own = [path("terms/", self.admin_site.admin_view(lambda request: term_lists_view(self, request)),
                    name="moderation_moderationpolicy_terms"),
               path("routing/", self.admin_site.admin_view(lambda request: routing_view(self, request)),
                    name="moderation_moderationpolicy_routing"),
               path("notices/", self.admin_site.admin_view(lambda request: notice_templates_view(self, request)),
                    name="moderation_moderationpolicy_notices"),
               path("<int:policy_id>/backtest/",
                    self.admin_site.admin_view(lambda request, policy_id: backtest_start_view(self, request, policy_id)),
                    name="moderation_moderationpolicy_backtest"),
               path("<int:policy_id>/activate/",
                    self.admin_site.admin_view(lambda request, policy_id: activate_view(self, request, policy_id)),
                    name="moderation_moderationpolicy_activate"),
               path("<int:policy_id>/shadow/",
                    self.admin_site.admin_view(lambda request, policy_id: shadow_start_view(self, request, policy_id)),
                    name="moderation_moderationpolicy_shadow")]
        return own + super().get_urls()

    def get_fields(self, request, obj=None):
        # A published version is read, not filled: it has no "based on" to carry.
        return self.fields if obj is None else [*PolicyForm.Meta.fields, "hash_banks"]

    def get_changeform_initial_data(self, request):
        latest = services.policy_active()
        return {**{field: getattr(latest, field) for field in PolicyForm.Meta.fields if field != "notes"},
                "based_on": latest.version}

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        # What each threshold costs with the local model, the version's own marked (a new
        # version's form: the active one's, which it starts from). Every role that may read
        # the version sees it (moderation/admin/operating_points.py).
        context["operating_points"] = operating_points_panel(obj or services.policy_active())
        context["quality"] = policy_quality_panel(obj, request)
        context["shadow"] = policy_shadow_panel(obj)
        return super().render_change_form(request, context, add=add, change=change, form_url=form_url, obj=obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        # The image fields and the definitions as clean() completed them (a field left out of the
        # post would otherwise take the model's default: the banks dropped, every shipped definition).
        media = {name: form.cleaned_data[name] for name in (*MEDIA_FIELDS, *DEFINITION_FIELDS)}
        published = services.policy_publish(**{**services.policy_fields(obj), **media}, notes=obj.notes,
                                             created_by=request.user, based_on=form.cleaned_data.get("based_on"),
                                             draft=form.cleaned_data.get("as_draft", False))
        obj.pk, obj.version, obj.is_draft = published.pk, published.version, published.is_draft


@admin.register(ProviderCircuit)
class ProviderCircuitAdmin(ReadOnlyAdmin):
    list_display = ["provider", "state", "opened_at", "probe_started_at", "last_failure_ratio", "changed_at"]


@admin.register(WebhookCircuit)
class WebhookCircuitAdmin(ReadOnlyAdmin):
    list_display = ["client", "state", "failures", "fast", "opened_at", "changed_at"]
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

    def save_model(self, request, obj, form, change) -> None:
        # Through the service, which checks again under the client's lock and records who did it.
        services.api_client_update(client_id=obj.pk, name=form.cleaned_data["name"],
                                   webhook_url=form.cleaned_data["webhook_url"], user=request.user)
