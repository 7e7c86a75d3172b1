"""The routing editor of the policy admin: the active version's routing rules as JSON, a dry run
of a draft over the reviews waiting now (how many would move to each queue), then publish it as
the next version (docs/workplace.md, "Routing rules and queue access")."""

from __future__ import annotations

import json

from django import forms
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse

from moderation import services
from moderation.admin.policy_publishing import publish_from_form
from moderation.admin.review_page import workplace_page
from moderation.observability.routing_dry_run import MAX_REVIEWS, routing_dry_run
from moderation.review_queues import LIST_CONDITIONS, SCORE_CONDITIONS
from moderation.validation import validate_policy

RULES_MAX_CHARS = 200_000


class RoutingForm(forms.Form):
    base_version = forms.IntegerField(widget=forms.HiddenInput)
    rules = forms.CharField(
        required=False, max_length=RULES_MAX_CHARS, label="Routing rules",
        widget=forms.Textarea(attrs={"rows": 16, "cols": 90, "spellcheck": "false"}),
        help_text='A JSON list, first match wins: [{"name": "...", "queue": "<slug>", "when": {...}}]. '
                  f"Conditions: {', '.join(LIST_CONDITIONS)} (lists: any of) and {', '.join(SCORE_CONDITIONS)} "
                  "(the top category's score). Empty: every review waits in its cause's queue.",
    )
    dry_last = forms.IntegerField(min_value=1, max_value=MAX_REVIEWS, initial=500, label="Dry run: last N reviews",
                                  help_text="The reviews waiting for a human, most recently queued first.")
    notes = forms.CharField(required=False, max_length=500)

    def clean_rules(self):
        text = self.cleaned_data["rules"].strip()
        if not text:
            return []
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None

    def draft(self, active):
        """The next version with these rules; ValidationError through the one validator."""
        draft = services.policy_draft(active, routing_rules=self.cleaned_data["rules"], notes=self.cleaned_data["notes"])
        errors = validate_policy(services.policy_fields(draft), queues=services.review_queue_slugs())
        if errors:
            raise ValidationError(errors)
        return draft


def routing_view(model_admin, request):
    """GET: the active rules. POST "preview": the dry run of the draft. POST "publish": the next
    version, refused if another was published since the page was filled."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    active = services.policy_active()
    form = RoutingForm(request.POST or None, initial={
        "base_version": active.version, "rules": json.dumps(active.routing_rules, indent=2, ensure_ascii=False)})
    context = {"active": active, "form": form, "queues": services.review_queues()}
    if request.method == "POST" and form.is_valid():
        try:
            draft = form.draft(active)
        except ValidationError as exc:
            form.add_error(None, exc)
            draft = None
        if draft is not None and form.cleaned_data["base_version"] != active.version:
            form.add_error(None, f"{active} was published since this page was loaded: check the dry run again")
            form.data = form.data.copy()
            form.data["base_version"] = active.version
            draft = None
        if draft is not None and "publish" in request.POST:
            published = publish_from_form(
                model_admin, request, form, lambda: services.policy_publish(
                    **services.policy_fields(draft), notes=draft.notes, created_by=request.user,
                    based_on=active.version),
                again="check the dry run again")
            if published is not None:
                return HttpResponseRedirect(reverse("admin:moderation_moderationpolicy_changelist"))
        if draft is not None and not form.errors:
            context |= {"draft": draft, "run": routing_dry_run(draft=draft, last=form.cleaned_data["dry_last"],
                                                                viewer=request.user)}
    return workplace_page(model_admin, request, "admin/moderation/moderationpolicy/routing.html",
                          "Edit routing rules", **context)
