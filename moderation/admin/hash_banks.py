"""Hash banks in the admin (docs/images.md, "Hash banks"): the banks (entry counts, which active
version takes them), a bank's page (its change log, disable or enable with a reason, the dry
run), the entries (found by their exact hash; a false positive removed with a reason) and the
change log, read-only.

Importing and publishing are the command's (`manage.py hash_banks`): a bank's list in a version
is never edited here. The controls go through the services and need moderation.control_hash_bank;
every page needs the model's view permission. No page shows an image: the dry run names reviews
by id, with the distance.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from audit.admin_base import ReadOnlyAdmin, ReadOnlyPermissionsMixin
from moderation.admin import review_page
from moderation.admin.filters import happened_filter
from moderation.admin.paginator import rows_page
from moderation.errors import ReasonRequired
from moderation.media.images import hash_normalize
from moderation.models import HashBank, HashBankChange, HashBankEntry
from moderation.services.hash_banks import (
    DryRunScope,
    bank_dry_run,
    bank_entry_remove,
    bank_set_enabled,
    banks_overview,
)
from moderation.services.policy import policy_active

CONTROL_PERMISSION = "moderation.control_hash_bank"
PAGE_ROWS = 25
BUTTONS = {"disable": False, "enable": True}


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)


def can_control(request) -> bool:
    return request.user.has_perm(CONTROL_PERMISSION)


def _detail(detail: dict) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(detail.items()) if value not in (None, ""))


def _refusal(form: forms.Form) -> str:
    return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())


@admin.register(HashBank)
class HashBankAdmin(ReadOnlyPermissionsMixin, admin.ModelAdmin):
    list_display = ["name", "enabled", "entry_count", "live_count", "active_version"]
    search_fields = ["name"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            entry_total=Count("entries"), entry_live=Count("entries", filter=Q(entries__removed_at__isnull=True)))

    @admin.display(description="entries", ordering="entry_total")
    def entry_count(self, bank: HashBank) -> int:
        return bank.entry_total

    @admin.display(description="not removed", ordering="entry_live")
    def live_count(self, bank: HashBank) -> int:
        return bank.entry_live

    @admin.display(description="active version")
    def active_version(self, bank: HashBank) -> str:
        policy = policy_active()  # a query a row: banks are few
        listed = next((b for b in policy.hash_banks if b["name"] == bank.name), None)
        if listed is None:
            return "draft (in no version)"
        return f"v{policy.version} through entry {listed['through']} ({listed['category']}, {listed['action']})"

    def get_urls(self):
        view = self.admin_site.admin_view
        own = [path("<int:object_id>/dry-run/", view(self.dry_run_view), name="moderation_hashbank_dry_run"),
               path("<int:object_id>/control/<str:button>/", view(self.control_view),
                    name="moderation_hashbank_control")]
        return own + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The bank page: what the active version takes of it, the controls, its change log."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        bank = get_object_or_404(HashBank, pk=object_id)
        policy = policy_active()
        row = next(r for r in banks_overview(policy) if r.bank.pk == bank.pk)
        changes = HashBankChange.objects.filter(bank=bank).select_related("actor", "entry").order_by("-id")
        button = "disable" if bank.enabled else "enable"
        return review_page.workplace_page(
            self, request, "admin/moderation/hashbank/bank_page.html", f"Hash bank {bank.name}",
            bank=bank, row=row, policy=policy,
            changes=rows_page(request.GET, "changes_page", PAGE_ROWS,
                              lambda offset, limit: [(change, _detail(change.detail))
                                                     for change in changes[offset:offset + limit]]),
            control=(button, ReasonForm()) if can_control(request) else None,
        )

    def control_view(self, request, object_id, button):
        if request.method != "POST" or button not in BUTTONS or not can_control(request):
            raise PermissionDenied
        bank = get_object_or_404(HashBank, pk=object_id)
        form = ReasonForm(request.POST)
        done = "enabled" if BUTTONS[button] else "disabled"
        if not form.is_valid():
            self.message_user(request, f"Not {done}: {_refusal(form)}", messages.ERROR)
        elif bank_set_enabled(name=bank.name, enabled=BUTTONS[button], reason=form.cleaned_data["reason"],
                              actor=request.user):
            self.message_user(request, f"Bank {bank.name} {done}: it acts at once, under every version.",
                              messages.SUCCESS)
        else:
            self.message_user(request, f"Bank {bank.name} was already {done}; nothing changed.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:moderation_hashbank_change", args=[bank.pk]))

    def dry_run_view(self, request, object_id):
        """Which recent images the bank's draft entries (or all of them) would match: ids and distances."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        bank = get_object_or_404(HashBank, pk=object_id)
        scope = DryRunScope.BANK if request.GET.get("scope") == DryRunScope.BANK else DryRunScope.DRAFT
        return review_page.workplace_page(
            self, request, "admin/moderation/hashbank/dry_run.html", f"Dry run of hash bank {bank.name}",
            bank=bank, run=bank_dry_run(name=bank.name, scope=scope, viewer=request.user), scopes=list(DryRunScope),
        )


RemovedFilter = happened_filter("removed_at", "removed", yes="Removed (a false positive)", no="Not removed")


@admin.register(HashBankEntry)
class HashBankEntryAdmin(ReadOnlyPermissionsMixin, admin.ModelAdmin):
    list_display = ["id", "bank", "pdq", "label", "added_at", "removed_at"]
    list_filter = ["bank", RemovedFilter]
    list_select_related = ["bank"]
    search_fields = ["pdq"]
    search_help_text = "A PDQ hash, exactly (64 hex digits)."
    show_full_result_count = False
    ordering = ["-id"]
    fields = ["id", "bank", "pdq", "label", "added_at", "removed_at", "removed_by", "removed_reason"]
    readonly_fields = fields
    change_form_template = "admin/moderation/hashbankentry/change_form.html"

    def get_search_results(self, request, queryset, search_term):
        # bank_entry_uniq's index, by the exact hash; anything else is no hash and finds nothing.
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(pdq=hash_normalize(term)), False
        except ValueError:
            return queryset.none(), False

    def get_urls(self):
        own = [path("<int:object_id>/remove/", self.admin_site.admin_view(self.remove_view),
                    name="moderation_hashbankentry_remove")]
        return own + super().get_urls()

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None and obj.removed_at is None and can_control(request):
            context["remove_form"] = ReasonForm()
        return super().render_change_form(request, context, add, change, form_url, obj)

    def remove_view(self, request, object_id):
        if request.method != "POST" or not can_control(request):
            raise PermissionDenied
        entry = get_object_or_404(HashBankEntry.objects.select_related("bank"), pk=object_id)
        form = ReasonForm(request.POST)
        if not form.is_valid():
            self.message_user(request, f"Not removed: {_refusal(form)}", messages.ERROR)
        else:
            try:
                removed = bank_entry_remove(entry_id=entry.pk, reason=form.cleaned_data["reason"], actor=request.user)
            except ReasonRequired as exc:
                self.message_user(request, f"Not removed: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"Entry {entry.pk} removed from bank {entry.bank.name}: it matches "
                                           "nothing from now on." if removed else
                                  f"Entry {entry.pk} was already removed; nothing changed.",
                                  messages.SUCCESS if removed else messages.WARNING)
        return HttpResponseRedirect(reverse("admin:moderation_hashbankentry_change", args=[entry.pk]))


@admin.register(HashBankChange)
class HashBankChangeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "bank", "kind", "entry", "who", "reason"]
    list_filter = ["kind", "bank"]
    list_select_related = ["bank", "actor", "entry"]
    show_full_result_count = False

    @admin.display(description="by")
    def who(self, change: HashBankChange) -> str:
        return str(change.actor) if change.actor_id else change.actor_name or "—"
