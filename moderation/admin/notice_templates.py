"""The notice-template editor of the policy admin: edit the text an affected user reads per
language, preview it for a real review, then publish it as the next version.

A preview renders with the draft through the same code the statement of reasons uses
(`moderation.transparency.reasons.decision_notice`) and writes nothing: no policy version, no row. A template
with an error (an unknown placeholder, a brace without its pair) is a form error, never a page
error, and cannot be published: the one policy validator refuses it here as on every other path.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django import forms
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from moderation import services
from moderation.admin.policy_publishing import publish_from_form
from moderation.models import SHORT_ID_LENGTH, ContentReview, ReviewStatus
from moderation.transparency.notices import BUILT_IN_TEMPLATES, NOTICE_LANGUAGE_DEFAULT, PLACEHOLDERS, TEMPLATE_MAX_CHARS
from moderation.observability.search import by_short_id
from moderation.transparency.reasons import decision_notice, reasons
from moderation.selectors import reviews_visible_to
from moderation.validation import validate_policy


def notice_languages() -> list[str]:
    """Every language a notice may be written in (what `validate_notice_templates` accepts)."""
    return sorted({*settings.MODERATION_LANGUAGES, *BUILT_IN_TEMPLATES})


def template_field(code: str) -> str:
    return f"template_{code}"


class NoticeTemplatesForm(forms.Form):
    base_version = forms.IntegerField(widget=forms.HiddenInput)
    review = forms.CharField(
        required=False, max_length=64, label="Preview for review",
        help_text=f"A review id or its short id ({SHORT_ID_LENGTH} characters, as the lists show it); "
                  "empty: the newest rejected review.",
    )
    notes = forms.CharField(required=False, max_length=500)

    def __init__(self, *args, viewer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.viewer = viewer  # a review to preview is one they may see
        for code in notice_languages():
            built_in = BUILT_IN_TEMPLATES.get(code)
            self.fields[template_field(code)] = forms.CharField(
                required=False, max_length=TEMPLATE_MAX_CHARS, label=f"Template: {code}", strip=False,
                widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
                help_text=(f"Empty: the built-in text ({built_in})" if built_in else
                           f"Empty: no template for {code}; its users read the {NOTICE_LANGUAGE_DEFAULT} notice"),
            )

    def templates(self) -> dict[str, str]:
        """The posted templates, {language: text}, leaving out the empty ones."""
        return {code: self.cleaned_data[template_field(code)] for code in notice_languages()
                if self.cleaned_data.get(template_field(code), "").strip()}

    def clean_review(self) -> ContentReview:
        return review_for_preview(self.cleaned_data["review"], viewer=self.viewer)

    def clean(self):
        data = super().clean()
        if any(name.startswith("template_") for name in self.errors):
            return data  # a template that is no text (a NUL, too long) already says why
        templates = self.templates()
        for message in validate_policy({**services.policy_fields(services.policy_active()),
                                        "notice_templates": templates}):
            code = message.removeprefix("notice_templates.").split(":")[0]
            self.add_error(template_field(code) if code in notice_languages() else None, message)
        data["notice_templates"] = templates
        return data


def review_for_preview(term: str, *, viewer) -> ContentReview:
    """The review a moderator names by its id or short id, else the newest rejected one, of those
    `viewer` may see (another is not found, as one that does not exist)."""
    reviews = reviews_visible_to(viewer, ContentReview.objects.select_related("content", "decision__policy"))
    term = term.strip()
    if not term:
        # The status index, newest first: one row read however many reviews there are.
        review = reviews.filter(status=ReviewStatus.REJECTED).order_by("-created_at").first()
        if review is None:
            raise ValidationError("no review is rejected yet: name a review to preview the notice for")
        return review
    try:
        found = list(reviews.filter(pk=uuid.UUID(term))) if len(term) > SHORT_ID_LENGTH else \
            list(by_short_id(reviews, term)[:2])
    except ValueError:
        found = []
    if not found:
        raise ValidationError(f"no review has the id {term!r}")
    if len(found) > 1:
        raise ValidationError(f"more than one review has the short id {term!r}: give the whole id")
    return found[0]


@dataclass(frozen=True)
class PreviewRow:
    language: str
    text: str
    own: bool  # written for this language (else it falls back to the default language's)
    the_users: bool  # the language the review's author reads it in


def preview(review: ContentReview, draft) -> tuple[list[PreviewRow], str]:
    """The notice of `review` under `draft`, in every language, and a note when the review has no
    rejection of its own (then it is shown with the categories of its decision, as a rejection)."""
    decision = review.decision
    note = ""
    if decision is None:
        raise ValidationError("the review has no decision yet: there are no reasons to put in a notice")
    if decision.label != ReviewStatus.REJECTED:
        note = (f"This review's decision is {decision.label}: its author is sent no notice. Shown as the "
                "notice of a rejection with the same reasons.")
    found = reasons(decision)
    rows = []
    own_templates = {**BUILT_IN_TEMPLATES, **draft.notice_templates}
    for code in notice_languages():
        _, stated = decision_notice(decision, found, policy=draft, language=code)
        rows.append(PreviewRow(language=code, text=stated["text"], own=code in own_templates,
                               the_users=code == (review.content.language if review.content.language in own_templates
                                                  else NOTICE_LANGUAGE_DEFAULT)))
    return rows, note


def notice_templates_view(model_admin, request):
    """GET: the form over the active version's templates. POST "preview": the notice for a real
    review, publishing nothing. POST "publish": the next version with these templates, refused if
    another version was published since the form was loaded."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    active = services.policy_active()
    initial = {"base_version": active.version,
               **{template_field(code): text for code, text in (active.notice_templates or {}).items()}}
    form = NoticeTemplatesForm(request.POST or None, initial=initial, viewer=request.user)
    context = {**model_admin.admin_site.each_context(request), "opts": model_admin.model._meta,
               "title": "Edit notice templates", "active": active, "form": form, "placeholders": PLACEHOLDERS}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        draft = services.policy_draft(active, notice_templates=data["notice_templates"], notes=data["notes"])
        try:
            rows, note = preview(data["review"], draft)
        except ValidationError as exc:
            form.add_error("review", exc)
        else:
            context |= {"draft": draft, "rows": rows, "note": note, "review": data["review"]}
        if not form.errors and "publish" in request.POST:
            published = _publish(model_admin, request, form, draft, active)
            if published:
                return HttpResponseRedirect(reverse("admin:moderation_moderationpolicy_changelist"))
    return TemplateResponse(request, "admin/moderation/moderationpolicy/notice_templates.html", context)


def _publish(model_admin, request, form, draft, active):
    """Publish the previewed draft; None, with the reason on the form, if it may not be."""
    if form.cleaned_data["base_version"] != active.version:
        form.add_error(None, f"{active} was published since this page was loaded: preview the notice again")
        form.data = form.data.copy()
        form.data["base_version"] = active.version
        return None
    return publish_from_form(
        model_admin, request, form, again="preview the notice again",
        publish=lambda: services.policy_publish(**services.policy_fields(draft), notes=draft.notes,
                                                created_by=request.user, based_on=active.version),
    )
