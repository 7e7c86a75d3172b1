from django.contrib import admin

from audit.admin_base import ReadOnlyAdmin
from callbacks.models import ProviderCallback


@admin.register(ProviderCallback)
class ProviderCallbackAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "provider", "provider_event_id", "outcome", "duplicate_count", "processed_at"]
    list_filter = ["provider", "outcome"]
    search_fields = ["=provider_event_id", "=idempotency_key", "=provider_request_id"]
    show_full_result_count = False
