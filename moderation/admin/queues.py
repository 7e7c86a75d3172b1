"""The review queues' admin: custom queues, and the groups allowed to work each one, built-in
queues included (a row with a built-in slug); docs/workplace.md, "Routing rules and queue access"."""

from __future__ import annotations

from django.contrib import admin

from moderation import services
from moderation.models import ContentReview, ModerationQueue, ReviewQueue, ReviewStatus


@admin.register(ModerationQueue)
class ModerationQueueAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "kind", "allowed_groups", "waiting"]
    fields = ["slug", "name", "description", "groups"]
    filter_horizontal = ["groups"]
    search_fields = ["slug", "name"]

    @admin.display(description="queue")
    def kind(self, queue):
        return "built-in" if queue.slug in ReviewQueue.values else "custom"

    @admin.display(description="who may take it")
    def allowed_groups(self, queue):
        return ", ".join(g.name for g in queue.groups.all()) or "every moderator"

    @admin.display(description="waiting")
    def waiting(self, queue):
        return ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, queue=queue.slug).count()

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    def get_readonly_fields(self, request, obj=None):
        # Reviews and the policy's rules store the slug: it never changes once created.
        return ["slug"] if obj is not None else []

    def has_delete_permission(self, request, obj=None) -> bool:
        """A queue the active rules name, or where reviews wait, stays: its reviews would wait
        in a queue nobody can pick, and the rules would send more there."""
        if obj is not None and (
            any(rule.get("queue") == obj.slug for rule in services.policy_active().routing_rules)
            or ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, queue=obj.slug).exists()
        ):
            return False
        return super().has_delete_permission(request, obj)
