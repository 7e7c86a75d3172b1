"""The term-list editor of the policy admin: edit (paste or upload terms), preview (the diff
against the active version and a dry run of the draft, with its summary), then publish.

Publishing is bound to the preview (docs/workplace.md, "The term editor"): a preview signs the
digest of the draft's term lists (`term_lists_digest`) and the version it was made against into
the form (`preview_token`), and publishing re-derives the draft from what is posted and publishes
it only if it is that draft, over that version (`services.policy_publish_previewed`). Any refusal
shows the page again with what was typed, why, and a fresh preview of it.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from moderation import services
from moderation.admin.policy_publishing import publish_from_form
from moderation.models import RuleAction
from moderation.observability.dry_run import MAX_REVIEWS, MAX_TEXTS, dry_run_summary, policy_dry_run
from moderation.validation import policy_categories, validate_policy
from moderation.text.rules import merge_terms, parse_terms, term_lists_diff, term_lists_digest, term_lists_with

MAX_UPLOAD_BYTES = 2 * 1024 * 1024
PREVIEW_SALT = "moderation.admin.term_lists.preview"


def preview_token(draft, active) -> str:
    """What a preview puts in the form: the draft's digest and the version it was previewed
    against, signed, so a publish cannot name a preview the server never showed."""
    return signing.dumps({"sha256": term_lists_digest(draft.term_lists), "version": active.version}, salt=PREVIEW_SALT)


def previewed(token: str) -> tuple[str | None, int | None]:
    """The digest and version a `preview_token` carries; (None, None) for none or a forged one."""
    try:
        value = signing.loads(token, salt=PREVIEW_SALT) if token else {}
    except signing.BadSignature:
        return None, None
    return value.get("sha256"), value.get("version")


class TermListForm(forms.Form):
    preview_token = forms.CharField(required=False, widget=forms.HiddenInput)
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
    dry_last = forms.IntegerField(required=False, min_value=0, max_value=MAX_REVIEWS, initial=MAX_REVIEWS,
                                  label="Dry run: last N reviews",
                                  help_text=f"At most {MAX_REVIEWS}: the newest reviews a provider decided, "
                                            "re-judged with their stored scores.")
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
        return form.draft(active)
    except ValidationError as exc:
        form.add_error(None, exc)
        return None


def _publish(model_admin, request, form: TermListForm, draft, active):
    """Publish the previewed draft; None, with the reason on the form, if it may not be."""
    digest, version = previewed(form.cleaned_data["preview_token"])
    if version is not None and version != active.version:
        # Checked first: over a new version the draft differs too, and this says why.
        form.add_error(None, f"Not published: {active} was published since the preview (against v{version}): "
                             "check the diff and dry run below, then publish again")
        return None
    return publish_from_form(
        model_admin, request, form, again="check the diff and dry run below, then publish again",
        publish=lambda: services.policy_publish_previewed(draft=draft, previewed_digest=digest,
                                                          previewed_version=version, created_by=request.user),
    )


def _preview(form: TermListForm, draft, active, viewer) -> dict:
    """The context of a preview of `draft`: its diff, dry run and summary, and the form again
    with what was typed (an uploaded file's terms in the text box), this preview's token, and
    the reasons a publish was refused, if it was."""
    data = form.cleaned_data
    texts = [line for line in data["dry_texts"].splitlines() if line.strip()]
    rows = policy_dry_run(draft=draft, active=active, texts=texts, last=data["dry_last"] or 0, viewer=viewer)
    typed = {**data, "upload": None, "terms": "\n".join(data["term_list"]), "preview_token": preview_token(draft, active)}
    return {
        "draft": draft, "form": TermListForm(initial=typed), "refusals": form.non_field_errors(),
        "digest": term_lists_digest(draft.term_lists),
        "diff": term_lists_diff(active.term_lists, draft.term_lists), "rows": rows,
        "texts_summary": dry_run_summary([row for row in rows if row.review_id is None]),
        "reviews_summary": dry_run_summary([row for row in rows if row.review_id is not None]),
    }


def term_lists_view(model_admin, request):
    """GET: the form over the active version. POST "preview": the diff, the dry run and its
    summary, and the publish button. POST "publish": the next version, if it is the draft
    previewed over the version still active; else the page again, saying why, with a new preview."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    active = services.policy_active()
    form = TermListForm(request.POST or None, request.FILES or None)
    context = {**model_admin.admin_site.each_context(request), "opts": model_admin.model._meta,
               "title": "Edit term lists", "active": active, "form": form,
               "categories": policy_categories(active), "max_reviews": MAX_REVIEWS}
    if request.method == "POST" and form.is_valid():
        draft = _draft_or_error(form, active)
        if draft is not None and "publish" in request.POST:
            if _publish(model_admin, request, form, draft, active):
                return HttpResponseRedirect(reverse("admin:moderation_moderationpolicy_changelist"))
            active = services.policy_active()  # a refusal previews against the version now active
            draft = _draft_or_error(form, active)
            context["active"] = active
        if draft is not None:
            context |= _preview(form, draft, active, request.user)
    return TemplateResponse(request, "admin/moderation/moderationpolicy/term_lists.html", context)
