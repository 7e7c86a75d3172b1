"""Erasure tombstones in the admin: read-only (erasing is `erase_content` or the client's API)."""

from __future__ import annotations

from django.contrib import admin

from audit.admin_base import ReadOnlyAdmin
from moderation.admin.visibility import ReviewScoped
from moderation.models import ContentErasure


@admin.register(ContentErasure)
class ContentErasureAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["review", "content", "erased_at", "actor", "actor_id", "stopped_moderation"]
    list_filter = ["actor", "stopped_moderation"]
    search_fields = ["=review__id", "=content__id", "actor_id"]
    list_select_related = ["review", "content"]
    show_full_result_count = False
