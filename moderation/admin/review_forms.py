from __future__ import annotations

from django import forms

from moderation.models import ReviewStatus


class OverrideForm(forms.Form):
    label = forms.ChoiceField(
        choices=[(ReviewStatus.APPROVED, "Approve"), (ReviewStatus.REJECTED, "Reject")], widget=forms.RadioSelect
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
    # The version the moderator was looking at: a review that changed since is not overridden blindly.
    version = forms.IntegerField(widget=forms.HiddenInput)


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False)


class BulkOverrideForm(forms.Form):
    label = OverrideForm.base_fields["label"]
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)


class BulkReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)
