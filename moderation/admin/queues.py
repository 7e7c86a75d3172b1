"""The review queues' admin: custom queues, and the groups allowed to work each one, built-in
queues included (a row with a built-in slug); docs/workplace.md, "Routing rules and queue access"."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Case, Count, IntegerField, OuterRef, Subquery, Value, When
from django.db.models.functions import Coalesce

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
        return "—" if queue.waiting_count is None else queue.waiting_count

    def get_queryset(self, request):
        # Its configuration is everyone's to read; how many wait in a queue only its groups'
        # members may see is theirs (docs/workplace.md, "Routing rules and queue access").
        depth = (ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW, queue=OuterRef("slug")).order_by()
                 .values("queue").annotate(n=Count("pk")).values("n"))
        forbidden = services.queues_forbidden(request.user)
        return super().get_queryset(request).prefetch_related("groups").annotate(waiting_count=Case(
            When(slug__in=sorted(forbidden), then=Value(None)), default=Coalesce(Subquery(depth), 0),
            output_field=IntegerField()))

    def save_model(self, request, obj, form, change) -> None:
        # Through the service, which validates, writes and records who did it (the groups with it:
        # `save_related` has nothing left to save).
        data = form.cleaned_data
        saved = services.review_queue_save(queue_id=obj.pk if change else None, slug=obj.slug, name=data["name"],
                                           description=data["description"], groups=data["groups"],
                                           user=request.user)
        obj.pk, obj.created_at = saved.pk, saved.created_at

    def save_related(self, request, form, formsets, change) -> None:
        pass  # the groups were saved by `save_model`'s service, in its transaction

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
