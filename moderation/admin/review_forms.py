from __future__ import annotations

from django import forms

from moderation import services
from moderation.models import NOTE_MAX_CHARS, QUEUE_SLUG_MAX, ReviewStatus
from moderation.validation import policy_categories

LABELS = [(ReviewStatus.APPROVED, "Approve"), (ReviewStatus.REJECTED, "Reject")]
# On a review with open reports the same two decisions judge the reporters too (the decide path
# records Report.agreed): rejecting agrees with them, approving disagrees.
REPORTED_LABELS = [(ReviewStatus.APPROVED, "Disagree"), (ReviewStatus.REJECTED, "Agree with reports")]
# On a review under appeal the decision resolves the appeal (moderation/services/appeals.py): a
# rejection upholds the appealed one, an approval overturns it.
APPEAL_LABELS = [(ReviewStatus.APPROVED, "Overturn it (approve)"), (ReviewStatus.REJECTED, "Uphold the rejection")]


def _category_field() -> forms.ChoiceField:
    return forms.ChoiceField(required=False, label="Violation category (a rejection needs one)")


class CategoryChoicesMixin:
    """The violation categories of the active policy, read when the form is built."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        categories = policy_categories(services.policy_active())
        self.fields["category"].choices = [("", "—")] + [(c, c) for c in categories]

    def clean(self):
        data = super().clean()
        if data.get("label") == ReviewStatus.REJECTED and not data.get("category"):
            self.add_error("category", "a rejection needs a violation category")
        return data


class DecideForm(CategoryChoicesMixin, forms.Form):
    """The decide panel: approve or reject, the violation category, the reason the client's
    statement of reasons is built from, and an internal note only moderators see."""

    label = forms.ChoiceField(choices=LABELS, widget=forms.RadioSelect)
    category = _category_field()
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=NOTE_MAX_CHARS, required=False,
                           label="Internal note (optional, never shown to the client)")
    # The version the moderator was looking at: a review that changed since is not decided blindly.
    version = forms.IntegerField(widget=forms.HiddenInput)
    # The review queue the moderator works: "decide and next" takes the next review from it.
    # A queue slug, built-in or custom: "Review next" checks it (moderation.services.routing).
    queue = forms.CharField(max_length=QUEUE_SLUG_MAX, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, reported: bool = False, appealed: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        # An open appeal's wording wins over the reports': what the moderator decides is the
        # appeal (the same decision still judges the reporters).
        self.appealed, self.reported = appealed, reported and not appealed
        # The values stay: the keyboard and the service read approved / rejected.
        if self.appealed:
            self.fields["label"].choices = APPEAL_LABELS
        elif self.reported:
            self.fields["label"].choices = REPORTED_LABELS

    def categories(self) -> list[str]:
        return [value for value, _ in self.fields["category"].choices if value]


def prefilled_category(review, summary, categories: list[str]) -> str:
    """The category the decide panel starts with: the category of the decision in force (an
    appealed rejection's), else the reporters' most common reason when it is one of the policy's
    categories ("other", or a category since removed, prefills nothing). Only a starting value:
    the category the moderator posts is the one decided."""
    current = review.decision.category if review.decision_id and review.decision else ""
    if current in categories:
        return current
    top = summary.top_reason if summary is not None else ""
    return top if top in categories else ""


class NoteForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=NOTE_MAX_CHARS, label="Note")


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)


class BulkOverrideForm(CategoryChoicesMixin, forms.Form):
    label = forms.ChoiceField(choices=LABELS, widget=forms.RadioSelect)
    category = _category_field()
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)


class BulkReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
