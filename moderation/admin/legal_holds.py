"""Legal holds and preservation snapshots in the admin (docs/legal-holds.md).

Only the `legal` role (moderation.roles) sees them, and only a holder of
`moderation.place_legal_hold` places, extends or lifts a hold: every view asks, not only the
links. A snapshot's page shows what it is (review, category, hash, expiry), never its content;
opening the content asks why and logs who, when and why first
(moderation.services.preservation.snapshot_view). An image's bytes are never shown from a
snapshot: its hashes are (the image viewer's rule that a `never_display` match is shown to
nobody, made stricter: a snapshot holds exactly the images that must not be looked at lightly).
"""

from __future__ import annotations

import json
import uuid

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from audit.admin_base import ReadOnlyAdmin
from moderation.admin.review_page import workplace_page
from moderation.admin.visibility import visible_review_or_404
from moderation.models import (
    HOLD_REFERENCE_MAX,
    HOLD_TEXT_MAX,
    Author,
    AuthorityReport,
    LawEnforcementRequest,
    LegalHold,
    LegalHoldEvent,
    PreservationSnapshot,
)
from moderation.privacy.holds import hold_extend, hold_lift, hold_place
from moderation.privacy.hotline import NoSnapshot, authorities_inform
from moderation.privacy.requests import request_handover, request_register
from moderation.services.preservation import SNAPSHOT_WHY_MAX, snapshot_view

PLACE = "moderation.place_legal_hold"
OPEN_SNAPSHOT = "moderation.view_snapshot_content"
DECIDE = "moderation.override_review"  # who may decide an urgent review may report it
FORM_PAGE = "admin/moderation/legalhold/form.html"


def _require(request, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied(f"only the legal role may do this ({permission})")


class PlaceForm(forms.Form):
    reviews = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                              help_text="Review ids, one a line; or leave empty and name an author.")
    client = forms.CharField(required=False, max_length=150, help_text="The API client whose author is held.")
    author_id = forms.CharField(required=False, max_length=255)
    created_from = forms.DateTimeField(required=False, help_text="Optional: the author's content from (UTC).")
    created_before = forms.DateTimeField(required=False, help_text="Optional: ... and before (UTC).")
    expires_at = forms.DateTimeField(required=False, help_text="Empty: until lifted.")
    reason = forms.CharField(max_length=HOLD_TEXT_MAX, widget=forms.Textarea(attrs={"rows": 3}))
    reference = forms.CharField(max_length=HOLD_REFERENCE_MAX, help_text="A case or request number.")

    def clean_reviews(self) -> list[uuid.UUID]:
        try:
            return [uuid.UUID(line.strip()) for line in self.cleaned_data["reviews"].splitlines() if line.strip()]
        except ValueError:
            raise ValidationError("review ids are UUIDs, one a line") from None

    def clean(self):
        data = super().clean()
        data["author"] = None
        if data.get("client") or data.get("author_id"):
            data["author"] = Author.objects.filter(client__name=data.get("client", ""),
                                                   author_id=data.get("author_id", "")).first()
            if data["author"] is None:
                raise ValidationError("no such author of that client")
        return data


class ExtendForm(forms.Form):
    expires_at = forms.DateTimeField(required=False, help_text="Empty: until lifted.")
    note = forms.CharField(required=False, max_length=HOLD_TEXT_MAX, widget=forms.Textarea(attrs={"rows": 2}))


class LiftForm(forms.Form):
    reason = forms.CharField(max_length=HOLD_TEXT_MAX, widget=forms.Textarea(attrs={"rows": 3}))


class WhyForm(forms.Form):
    why = forms.CharField(max_length=SNAPSHOT_WHY_MAX, widget=forms.Textarea(attrs={"rows": 2}),
                          help_text="Kept in the snapshot's viewing log with your name and the time.")


class LegalHoldEventInline(admin.TabularInline):
    model = LegalHoldEvent
    fields = ["at", "action", "actor_id", "expires_at", "note"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LegalHold)
class LegalHoldAdmin(ReadOnlyAdmin):
    list_display = ["id", "reference", "scope", "author", "placed_by", "placed_at", "expires_at", "lifted_at"]
    list_filter = ["scope"]
    search_fields = ["reference", "=author__author_id"]
    raw_id_fields = ["author"]
    exclude = ["reviews"]
    readonly_fields = ["held_reviews"]
    inlines = [LegalHoldEventInline]
    change_list_template = "admin/moderation/legalhold/change_list.html"
    change_form_template = "admin/moderation/legalhold/hold_change.html"

    @admin.display(description="reviews named")
    def held_reviews(self, hold) -> str:
        return ", ".join(str(pk) for pk in hold.reviews.values_list("pk", flat=True)) or "—"

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("place/", wrap(self.place_view), name="moderation_legalhold_place"),
            path("<int:hold_id>/extend/", wrap(self.extend_view), name="moderation_legalhold_extend"),
            path("<int:hold_id>/lift/", wrap(self.lift_view), name="moderation_legalhold_lift"),
            *super().get_urls(),
        ]

    def place_view(self, request):
        _require(request, PLACE)
        form = PlaceForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                hold = hold_place(reviews=data["reviews"], author=data["author"], created_from=data["created_from"],
                                  created_before=data["created_before"], expires_at=data["expires_at"],
                                  reason=data["reason"], reference=data["reference"],
                                  placed_by=request.user.get_username())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Legal hold {hold.pk} placed.")
                return HttpResponseRedirect(reverse("admin:moderation_legalhold_change", args=[hold.pk]))
        return workplace_page(self, request, FORM_PAGE, "Place a legal hold", form=form, hold=None, action="place")

    def extend_view(self, request, hold_id: int):
        return self._hold_action(request, hold_id, ExtendForm, "extend", lambda hold, data: hold_extend(
            hold_id=hold.pk, expires_at=data["expires_at"], by=request.user.get_username(), note=data["note"]))

    def lift_view(self, request, hold_id: int):
        return self._hold_action(request, hold_id, LiftForm, "lift", lambda hold, data: hold_lift(
            hold_id=hold.pk, by=request.user.get_username(), reason=data["reason"]))

    def _hold_action(self, request, hold_id, form_class, action, act):
        _require(request, PLACE)
        hold = get_object_or_404(LegalHold, pk=hold_id)
        form = form_class(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                act(hold, form.cleaned_data)
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Legal hold {hold.pk}: {action} done.")
                return HttpResponseRedirect(reverse("admin:moderation_legalhold_change", args=[hold.pk]))
        return workplace_page(self, request, FORM_PAGE, f"{action.capitalize()} legal hold {hold.pk}", form=form,
                              hold=hold, action=action)


def _shown_body(body: dict) -> str:
    """The snapshot's body as indented JSON, an image's bytes replaced by their size."""
    shown = json.loads(json.dumps(body))
    media = (shown.get("content") or {}).get("media")
    if media and "data_base64" in media:
        media["data_base64"] = f"[{media.get('byte_size', '?')} bytes, never shown here: see their hashes]"
    return json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True)


@admin.register(PreservationSnapshot)
class PreservationSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["id", "review", "category", "created_at", "expires_at", "sha256"]
    list_filter = ["category"]
    search_fields = ["=review__id", "sha256"]
    exclude = ["body"]
    change_form_template = "admin/moderation/legalhold/snapshot_change.html"

    def get_urls(self):
        return [path("<int:snapshot_id>/open/", self.admin_site.admin_view(self.open_view),
                     name="moderation_preservationsnapshot_open"), *super().get_urls()]

    def open_view(self, request, snapshot_id: int):
        _require(request, OPEN_SNAPSHOT)
        snapshot = get_object_or_404(PreservationSnapshot, pk=snapshot_id)
        form = WhyForm(request.POST or None)
        shown = None
        if request.method == "POST" and form.is_valid():
            snapshot = snapshot_view(snapshot_id=snapshot.pk, viewer=request.user.get_username(),
                                     why=form.cleaned_data["why"])
            shown = _shown_body(snapshot.body)
        return workplace_page(self, request, FORM_PAGE, f"Snapshot {snapshot.pk} of review {snapshot.review_id}",
                              form=None if shown else form, snapshot=snapshot, shown=shown, action="open")


@admin.register(AuthorityReport)
class AuthorityReportAdmin(ReadOnlyAdmin):
    """Reports to the authorities (DSA Art. 18): made in one step from the urgent queue by whoever
    may decide the review; each kept as made, with its JSON and a printable page."""

    list_display = ["id", "review", "recipient", "sent_by", "sent_at", "sha256"]
    search_fields = ["=review__id", "recipient"]
    exclude = ["body"]

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("inform/<uuid:review_id>/", wrap(self.inform_view), name="moderation_authorityreport_inform"),
            path("<int:report_id>/print/", wrap(self.print_view), name="moderation_authorityreport_print"),
            path("<int:report_id>/json/", wrap(self.json_view), name="moderation_authorityreport_json"),
            *super().get_urls(),
        ]

    def inform_view(self, request, review_id):
        if request.method != "POST":
            raise PermissionDenied("a report is made by a POST")
        _require(request, DECIDE)
        review = visible_review_or_404(request, review_id)
        try:
            report = authorities_inform(review_id=review.pk, operator=request.user.get_username(),
                                        recipient=request.POST.get("recipient", ""))
        except (ValueError, NoSnapshot) as exc:
            messages.error(request, f"No report made: {exc}")
            return HttpResponseRedirect(reverse("admin:moderation_contentreview_queues") + "?queue=urgent")
        messages.success(request, f"Report {report.pk} to {report.recipient} recorded, and a legal hold placed. "
                                  "Nothing was sent: hand it over through your own channel.")
        return HttpResponseRedirect(reverse("admin:moderation_authorityreport_print", args=[report.pk]))

    def _report(self, request, report_id) -> AuthorityReport:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(AuthorityReport, pk=report_id)

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(DECIDE) or super().has_view_permission(request, obj)

    def print_view(self, request, report_id: int):
        report = self._report(request, report_id)
        return workplace_page(self, request, "admin/moderation/legalhold/authority_report.html",
                              f"Report to {report.recipient}", report=report, body=report.body)

    def json_view(self, request, report_id: int):
        report = self._report(request, report_id)
        response = HttpResponse(json.dumps(report.body, indent=2, ensure_ascii=False, sort_keys=True),
                                content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="authority-report-{report.pk}.json"'
        response["Cache-Control"] = "no-store"
        return response


REGISTER = "moderation.register_request"


class RequestForm(PlaceForm):
    agency = forms.CharField(max_length=HOLD_REFERENCE_MAX, help_text="The requesting body.")
    asked = forms.CharField(max_length=HOLD_TEXT_MAX, widget=forms.Textarea(attrs={"rows": 3}),
                            help_text="What the request asks for.")
    received_at = forms.DateTimeField(help_text="When the request arrived (UTC).")
    reason = None  # the hold's reason is the request's `asked`


class HandoverForm(forms.Form):
    reviews = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="Review ids handed over, one a line.")
    clean_reviews = PlaceForm.clean_reviews


@admin.register(LawEnforcementRequest)
class LawEnforcementRequestAdmin(ReadOnlyAdmin):
    """The register (moderation/privacy/requests.py): only the legal role sees it, registers a
    request (placing its hold) or records a hand-over (its manifest of hashes)."""

    list_display = ["id", "agency", "reference", "received_at", "registered_by", "hold"]
    search_fields = ["agency", "reference"]
    readonly_fields = ["handovers_made"]
    change_form_template = "admin/moderation/legalhold/request_change.html"
    change_list_template = "admin/moderation/legalhold/request_list.html"

    @admin.display(description="hand-overs")
    def handovers_made(self, request_row) -> str:
        return "; ".join(f"{h.handed_at:%Y-%m-%d %H:%M} by {h.handed_by}: {len(h.manifest['items'])} items, "
                         f"manifest SHA-256 {h.sha256}" for h in request_row.handovers.all()) or "none"

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("register/", wrap(self.register_view), name="moderation_lawenforcementrequest_register"),
                path("<int:request_id>/handover/", wrap(self.handover_view),
                     name="moderation_lawenforcementrequest_handover"),
                *super().get_urls()]

    def register_view(self, request):
        _require(request, REGISTER)
        form = RequestForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                registered = request_register(
                    agency=data["agency"], reference=data["reference"], asked=data["asked"],
                    received_at=data["received_at"], registered_by=request.user.get_username(),
                    reviews=data["reviews"], author=data["author"], created_from=data["created_from"],
                    created_before=data["created_before"], expires_at=data["expires_at"])
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Request {registered} registered; legal hold {registered.hold_id} placed.")
                return HttpResponseRedirect(reverse("admin:moderation_lawenforcementrequest_change",
                                                    args=[registered.pk]))
        return workplace_page(self, request, FORM_PAGE, "Register a law-enforcement request", form=form,
                              action="register")

    def handover_view(self, request, request_id: int):
        _require(request, REGISTER)
        registered = get_object_or_404(LawEnforcementRequest, pk=request_id)
        form = HandoverForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                handover = request_handover(request_id=registered.pk, review_ids=form.cleaned_data["reviews"],
                                            handed_by=request.user.get_username())
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, f"Hand-over recorded: manifest SHA-256 {handover.sha256}.")
                return HttpResponseRedirect(reverse("admin:moderation_lawenforcementrequest_change",
                                                    args=[registered.pk]))
        return workplace_page(self, request, FORM_PAGE, f"Hand over items for {registered}", form=form,
                              action="handover")
