from __future__ import annotations

from django import forms

from moderation import services
from moderation.transparency.canned_reasons import canned_choices, canned_text, reasons_key
from moderation.models import APPROVAL_KEY, NOTE_MAX_CHARS, QUEUE_SLUG_MAX, ReviewStatus
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


def _form_policy(form):
    """The active policy, read once per form (its categories and its canned reasons)."""
    if getattr(form, "policy", None) is None:
        form.policy = services.policy_active()
    return form.policy


class CategoryChoicesMixin:
    """The violation categories of the active policy, read when the form is built."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        categories = policy_categories(_form_policy(self))
        self.fields["category"].choices = [("", "—")] + [(c, c) for c in categories]

    def clean(self):
        data = super().clean()
        if data.get("label") == ReviewStatus.REJECTED and not data.get("category"):
            self.add_error("category", "a rejection needs a violation category")
        return data


class ReasonFields(forms.Form):
    """The reason of a decision (docs/workplace.md, "Canned reasons"): canned reasons of the
    active policy, free text, and whether the free text is sent to the user. Shared by the
    decide panel and the bulk override form; the form's `label` and `category` say which canned
    reasons apply. Whether a reason is needed at all is the service's rule (review_override):
    this form only reads what was picked.

    A pick is posted as "KEY:CODE" (KEY: the category, or "_approval"), since codes are unique
    only within a category; `cleaned_data["reason_codes"]` holds the codes."""

    reason_codes = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                             label="Canned reasons (the user reads their text)")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000, required=False,
                             label="Reason in your words (optional)")
    share_reason = forms.BooleanField(required=False, label="Send my words to the user too")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        policy = _form_policy(self)
        self.reason_keys = [APPROVAL_KEY, *policy_categories(policy)]
        self.fields["reason_codes"].choices = [
            (f"{key}:{entry['code']}", f"{entry['code']}: {canned_text(entry, 'en')}")
            for key in self.reason_keys for entry in canned_choices(policy.canned_reasons, key)
        ]

    def clean(self):
        data = super().clean()
        key = reasons_key(data.get("label", ""), data.get("category") or "")
        picked = [value.split(":", 1) for value in data.get("reason_codes") or []]
        elsewhere = [code for where, code in picked if where != key]
        if elsewhere:
            whose = "an approval" if key == APPROVAL_KEY else f"the category {key}"
            self.add_error("reason_codes", f"{', '.join(elsewhere)}: not a reason of {whose}")
        data["reason_codes"] = [code for where, code in picked if where == key]
        return data

    def reason_groups(self) -> list[dict]:
        """The canned reasons by category, for the template: each group shows for one category
        (or for approvals), with its checkboxes."""
        boxes = {box.data["value"]: box for box in self["reason_codes"]}
        groups = []
        for key in self.reason_keys:
            choices = [boxes[value] for value in boxes if value.split(":", 1)[0] == key]
            if choices:
                groups.append({"key": key, "title": "Approval" if key == APPROVAL_KEY else key, "boxes": choices})
        return groups


class DecideForm(CategoryChoicesMixin, ReasonFields):
    """The decide panel: approve or reject, the violation category, the canned reasons and free
    text the client's statement of reasons is built from, and an internal note only moderators see."""

    label = forms.ChoiceField(choices=LABELS, widget=forms.RadioSelect)
    category = _category_field()
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=NOTE_MAX_CHARS, required=False,
                           label="Internal note (optional, never shown to the client)")
    # The version the moderator was looking at: a review that changed since is not decided blindly.
    version = forms.IntegerField(widget=forms.HiddenInput)
    # The review queue the moderator works: "decide and next" takes the next review from it.
    # A queue slug, built-in or custom: "Review next" checks it (moderation.services.routing).
    queue = forms.CharField(max_length=QUEUE_SLUG_MAX, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, reported: bool = False, appealed: bool = False, policy=None, **kwargs):
        self.policy = policy
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


def refused_decide_form(posted, review, **flags) -> DecideForm:
    """The decide panel after a refused decision: what the moderator posted, as typed (label,
    category, canned picks, reason, note), with its errors, carrying the version the page now
    shows: the refusal said what changed, and deciding again is deciding on the review as it is."""
    data = posted.copy()
    data["version"] = review.version
    form = DecideForm(data, **flags)
    form.is_valid()  # binds the errors to their fields
    return form


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


class EscalateForm(ReasonForm):
    """Escalate in one step: one reason; the review stays with the moderator who escalated it
    unless they tick "release it"."""

    release = forms.BooleanField(required=False, label="Release it (return it to the escalations queue)")


class UndoForm(forms.Form):
    """Undo a decision: which one, and the version it left the review at."""

    decision = forms.IntegerField(widget=forms.HiddenInput, min_value=1, max_value=2**63 - 1)
    version = forms.IntegerField(widget=forms.HiddenInput, min_value=0, max_value=2**31 - 1)


class BulkOverrideForm(CategoryChoicesMixin, ReasonFields):
    label = forms.ChoiceField(choices=LABELS, widget=forms.RadioSelect)
    category = _category_field()
    field_order = ["label", "category", "reason_codes", "reason", "share_reason"]


class BulkReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
