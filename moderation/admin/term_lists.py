"""The term-list editor of the policy admin: paste or upload terms, see the diff against the
active version and a dry run of the draft, then publish it as the next version."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from moderation import services
from moderation.errors import PolicyChanged
from moderation.models import RuleAction
from moderation.observability.dry_run import MAX_REVIEWS, MAX_TEXTS, policy_dry_run
from moderation.validation import policy_categories, validate_policy
from moderation.rules import merge_terms, parse_terms, term_lists_diff, term_lists_with

MAX_UPLOAD_BYTES = 2 * 1024 * 1024


class TermListForm(forms.Form):
    base_version = forms.IntegerField(widget=forms.HiddenInput)
    category = forms.CharField(max_length=64, help_text="A policy category; a new name creates it.")
    action = forms.ChoiceField(choices=RuleAction.choices)
    language = forms.ChoiceField(required=False, help_text="Empty: the rule applies to every language.")
    mode = forms.ChoiceField(
        choices=[("add", "Add these terms"), ("remove", "Remove these terms"), ("replace", "Replace the list")],
        initial="add",
    )
    terms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 8, "cols": 60}),
                            help_text="One term or phrase per line; # starts a comment; re:<pattern> is an RE2 pattern.")
    upload = forms.FileField(required=False, help_text="A UTF-8 text file in the same format.")
    dry_texts = forms.CharField(required=False, label="Dry run: texts",
                                widget=forms.Textarea(attrs={"rows": 5, "cols": 60}),
                                help_text=f"One text per line (at most {MAX_TEXTS}).")
    dry_last = forms.IntegerField(required=False, min_value=0, max_value=MAX_REVIEWS, label="Dry run: last N reviews")
    notes = forms.CharField(required=False, max_length=500)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["language"].choices = [("", "every language")] + [(c, c) for c in settings.MODERATION_LANGUAGES]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        terms = parse_terms(data.get("terms", ""))
        upload = data.get("upload")
        if upload:
            if upload.size > MAX_UPLOAD_BYTES:
                raise ValidationError(f"the file is larger than {MAX_UPLOAD_BYTES // 1024} KiB")
            try:
                terms = merge_terms(terms, parse_terms(upload.read().decode("utf-8")))
            except UnicodeDecodeError:
                raise ValidationError("the file is not UTF-8 text") from None
        if not terms and data["mode"] != "replace":
            raise ValidationError("paste or upload at least one term")
        data["term_list"] = terms
        return data

    def draft(self, active):
        """The next version with this change; raises ValidationError through the one validator."""
        data = self.cleaned_data
        change = {"add": data["term_list"]} if data["mode"] != "remove" else {"remove": data["term_list"]}
        term_lists = term_lists_with(
            active.term_lists, category=data["category"].strip(), action=data["action"], language=data["language"],
            replace=data["mode"] == "replace", **change,
        )
        draft = services.policy_draft(active, term_lists=term_lists, notes=data["notes"])
        errors = validate_policy(services.policy_fields(draft))
        if errors:
            raise ValidationError(errors)
        return draft


def _draft_or_error(form: TermListForm, active):
    """The draft of a valid form, or None with the reason added to the form."""
    try:
        draft = form.draft(active)
    except ValidationError as exc:
        form.add_error(None, exc)
        return None
    if form.cleaned_data["base_version"] != active.version:
        # The diff the supervisor saw was against another version: show the new one first.
        form.add_error(None, f"{active} was published since this page was loaded: check the diff again")
        form.data = form.data.copy()
        form.data["base_version"] = active.version
        return None
    return draft


def term_lists_view(model_admin, request):
    """GET: the form over the active version. POST "preview": diff and dry run. POST "publish":
    the next version, refused if another version was published since the preview."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    active = services.policy_active()
    form = TermListForm(request.POST or None, request.FILES or None, initial={"base_version": active.version})
    context = {**model_admin.admin_site.each_context(request), "opts": model_admin.model._meta,
               "title": "Edit term lists", "active": active, "form": form,
               "categories": policy_categories(active)}
    if request.method == "POST" and form.is_valid():
        draft = _draft_or_error(form, active)
        if draft is not None and "publish" in request.POST:
            try:
                published = services.policy_publish(**services.policy_fields(draft), notes=draft.notes,
                                                    created_by=request.user, based_on=active.version)
            except PolicyChanged as exc:  # published between this request's read and its publish
                form.add_error(None, f"{exc.reason}: check the diff again")
            else:
                model_admin.message_user(request, f"Published policy version {published.version}.", messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:moderation_moderationpolicy_changelist"))
        if draft is not None and not form.errors:
            data = form.cleaned_data
            texts = [line for line in data["dry_texts"].splitlines() if line.strip()]
            context |= {
                "draft": draft,
                "diff": term_lists_diff(active.term_lists, draft.term_lists),
                "rows": policy_dry_run(draft=draft, active=active, texts=texts, last=data["dry_last"] or 0),
                "form": TermListForm(initial={**data, "upload": None, "terms": "\n".join(data["term_list"])}),
            }
    return TemplateResponse(request, "admin/moderation/moderationpolicy/term_lists.html", context)
