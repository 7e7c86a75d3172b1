"""Changelist filters for reviews, and `happened_filter` for any list."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.db.models import Exists, OuterRef

from audit.models import EventKind, PipelineEvent
from callbacks.models import ProviderCallback
from moderation.models import ModerationRequest
from moderation.selectors import stuck_requests


def happened_filter(field: str, title: str, *, yes: str, no: str) -> type[admin.SimpleListFilter]:
    """A yes/no filter on whether the moment `field` records is set (a statement overturned, a
    bank entry removed)."""

    class HappenedFilter(admin.SimpleListFilter):
        parameter_name = title.replace(" ", "_")

        def lookups(self, request, model_admin):
            return [("yes", yes), ("no", no)]

        def queryset(self, request, queryset):
            if self.value() in ("yes", "no"):
                return queryset.filter(**{f"{field}__isnull": self.value() == "no"})
            return queryset

    HappenedFilter.title = title
    return HappenedFilter


class DecisionSourceFilter(admin.SimpleListFilter):
    title = "decision source"
    parameter_name = "decided_by"

    def lookups(self, request, model_admin):
        return [("provider", "Provider"), ("moderator", "Moderator"), ("system", "System"), ("none", "No decision")]

    def queryset(self, request, queryset):
        if self.value() == "none":
            return queryset.filter(decision__isnull=True)
        if self.value():
            return queryset.filter(decision__source=self.value())
        return queryset


class CallbackTroubleFilter(admin.SimpleListFilter):
    """Reviews that saw what this platform exists to survive: stale or duplicate results."""

    title = "callbacks seen"
    parameter_name = "callbacks"

    def lookups(self, request, model_admin):
        return [("stale", "Stale results"), ("duplicate", "Duplicate deliveries or results")]

    def queryset(self, request, queryset):
        if self.value() == "stale":
            return queryset.filter(
                Exists(PipelineEvent.objects.filter(review=OuterRef("pk"), kind=EventKind.STALE_RESULT))
            )
        if self.value() == "duplicate":
            keys = ModerationRequest.objects.filter(review=OuterRef(OuterRef("pk"))).values("idempotency_key")
            redelivered = ProviderCallback.objects.filter(idempotency_key__in=keys, duplicate_count__gt=0)
            duplicate_result = PipelineEvent.objects.filter(review=OuterRef("pk"), kind=EventKind.DUPLICATE_RESULT)
            return queryset.filter(Exists(duplicate_result) | Exists(redelivered))
        return queryset


class StuckFilter(admin.SimpleListFilter):
    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("processing", f"Operation silent for over {settings.MODERATION_STUCK_AFTER_S:g}s")]

    def queryset(self, request, queryset):
        if self.value() == "processing":
            return queryset.filter(pk__in=stuck_requests().values("review_id"))
        return queryset
