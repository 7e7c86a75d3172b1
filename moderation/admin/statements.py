"""Statements of reasons for the DSA Transparency Database in the admin (docs/transparency.md):
the list by state, the statement page (its body as sent, its facts, and what the database said
of a refused one), and "Re-queue with the active policy" for refused ones.

Statements are written by the services with the restriction they state and sent by the sender:
nothing here adds, edits or deletes one. The re-queue goes through `statement_requeue`, one
statement at a time, for users with moderation.requeue_statement only.

The database's errors are its text, not ours: they are shown escaped, never marked safe.
"""

from __future__ import annotations

import json
import re

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from audit.admin_base import ReadOnlyAdmin
from moderation.admin.filters import happened_filter
from moderation.admin.paginator import EstimatedCountPaginator
from moderation.admin.reviews import refuse_nul
from moderation.admin.visibility import ReviewScoped
from moderation.errors import NotRequeueable
from moderation.models import StatementStatus, TransparencyStatement
from moderation.services.policy import policy_active
from moderation.services.statements import statement_requeue

REQUEUE_PERMISSION = "moderation.requeue_statement"
# The database names a refused statement by its place in the batch ("statement_3"): a batch's
# detail, not the statement's.
BATCH_POSITION = re.compile(r"statement_[0-9]+")


OverturnedFilter = happened_filter("overturned_at", "overturned", yes="Yes (a correction recorded)", no="No")


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def error_lines(errors) -> list[tuple[str, list[str]]]:
    """The database's errors as (field, messages), whatever shape they arrived in: a field's
    messages, a batch position's fields (the position dropped), or anything else as JSON."""
    if isinstance(errors, dict) and len(errors) == 1:
        (key, value), = errors.items()
        if BATCH_POSITION.fullmatch(str(key)) and isinstance(value, dict):
            errors = value
    if not isinstance(errors, dict):
        return [("", [_pretty(errors)])] if errors else []
    lines = []
    for field, found in errors.items():
        if isinstance(found, dict):
            lines += [(f"{field} › {inner}", texts) for inner, texts in error_lines(found)]
            continue
        found = found if isinstance(found, list) else [found]
        lines.append((str(field), [m if isinstance(m, str) else _pretty(m) for m in found]))
    return lines


@admin.register(TransparencyStatement)
class TransparencyStatementAdmin(ReviewScoped, ReadOnlyAdmin):
    list_display = ["puid", "states", "dsa_category", "automated_decision", "source_type", "status", "attempts",
                    "next_attempt_at", "created_at", "submitted_at"]
    list_filter = ["status", OverturnedFilter]
    list_select_related = ["account_action__author"]  # nullable: Django would not join it itself
    search_fields = ["puid"]
    search_help_text = "The statement's puid exactly: its decision's or account action's id."
    # A statement a restriction: millions. No count(*) of them (moderation/admin/paginator.py).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    ordering = ["-created_at"]  # statement_created_idx; with a status, statement_status_idx
    actions = ["requeue"]
    change_form_template = "admin/moderation/transparencystatement/change_form.html"
    fields = ["puid", "states", "status", "attempts", "next_attempt_at", "last_error", "database_errors",
              "already_stored", "tdb_uuid", "created_at", "submitted_at", "requeued_at", "overturned_at",
              "overturned_by", "policy", "dsa_category", "automated_decision", "source_type", "facts_json",
              "body_json"]
    readonly_fields = fields

    def changelist_view(self, request, extra_context=None):
        return refuse_nul(request) or super().changelist_view(request, extra_context)

    def get_search_results(self, request, queryset, search_term):
        # The unique index on puid, one descent: `=puid` would compare UPPER() of every row.
        term = search_term.strip()
        return (queryset.filter(puid=term), False) if term else (queryset, False)

    # --- columns and fields ---------------------------------------------------------------------

    @admin.display(description="states")
    def states(self, statement: TransparencyStatement) -> str:
        if statement.review_id is not None:
            return format_html('<a href="{}">decision {} on review {}</a>',
                               reverse("admin:moderation_contentreview_change", args=[statement.review_id]),
                               statement.decision_id, statement.review_id.hex[-8:])
        action = statement.account_action
        return format_html('<a href="{}">{} of author {}</a>',
                           reverse("admin:moderation_author_change", args=[action.author_id]),
                           action.get_action_display().lower(), action.author.author_id)

    @admin.display(description="body (as sent)")
    def body_json(self, statement: TransparencyStatement) -> str:
        return format_html("<pre class=\"statement-json\">{}</pre>", _pretty(statement.body))

    @admin.display(description="facts")
    def facts_json(self, statement: TransparencyStatement) -> str:
        return format_html("<pre class=\"statement-json\">{}</pre>", _pretty(statement.facts))

    @admin.display(description="the database's errors")
    def database_errors(self, statement: TransparencyStatement) -> str:
        lines = error_lines(statement.errors)
        if not lines:
            return "—"
        rows = format_html_join("", "<li><code>{}</code>: {}</li>", (
            (field or "(no field)", format_html_join("", "<span class=\"tdb-message\">{}</span> ",
                                                     ((text,) for text in texts)))
            for field, texts in lines))
        return format_html("<ul class=\"tdb-errors\">{}</ul>", rows)

    # --- the re-queue ---------------------------------------------------------------------------

    def has_requeue_permission(self, request) -> bool:
        return request.user.has_perm(REQUEUE_PERMISSION)

    def get_urls(self):
        own = [path("<int:object_id>/requeue/", self.admin_site.admin_view(self.requeue_view),
                    name="moderation_transparencystatement_requeue")]
        return own + super().get_urls()

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["can_requeue"] = (obj is not None and obj.status == StatementStatus.REJECTED
                                  and self.has_requeue_permission(request))
        return super().render_change_form(request, context, add, change, form_url, obj)

    @admin.action(description="Re-queue with the active policy", permissions=["requeue"])
    def requeue(self, request, queryset):
        self._requeue(request, list(queryset.values_list("pk", "puid", "status")))

    def requeue_view(self, request, object_id):
        if request.method != "POST" or not self.has_requeue_permission(request):
            raise PermissionDenied
        statement = get_object_or_404(self.get_queryset(request), pk=object_id)
        self._requeue(request, [(statement.pk, statement.puid, statement.status)])
        return HttpResponseRedirect(reverse("admin:moderation_transparencystatement_change", args=[statement.pk]))

    def _requeue(self, request, selected: list[tuple[int, str, str]]) -> None:
        """Each refused statement through the service; the others (and any that stopped being
        refused since the page was drawn: the service checks under the row's lock) named back."""
        done, refused = 0, []
        for pk, puid, status in selected:
            try:
                statement_requeue(statement_id=pk, by=request.user)
                done += 1
            except NotRequeueable:
                refused.append(f"{puid} ({status})")
        if done:
            version = policy_active().version
            self.message_user(request, f"Re-queued {done} statement{'s' if done != 1 else ''} with the active "
                                       f"policy (v{version}).", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not re-queued: {', '.join(refused)}. Only statements the database "
                                       "refused can be re-queued.", messages.WARNING)
