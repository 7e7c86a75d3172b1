"""Legal holds and snapshots in the admin (moderation/admin/legal_holds.py): only the legal role
places, extends or lifts a hold, or opens a snapshot, and opening one is logged first."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from moderation import services
from moderation.models import LegalHold, LegalHoldEvent, PreservationSnapshot, ReviewStatus, SnapshotView
from moderation.privacy.holds import hold_place, review_holds
from tests.helpers import decided, staff_browser, submit

OTHER_ROLES = ["moderator", "supervisor", "auditor", None]


def place(browser, review):
    return browser.post(reverse("admin:moderation_legalhold_place"), {
        "reviews": str(review.pk), "reason": "preserve <b>all</b> of it \u202e\u200b", "reference": "LE-1"})


@pytest.mark.parametrize("role", OTHER_ROLES)
def test_no_role_but_legal_may_place_extend_or_lift_a_hold_or_see_them(api_client, django_user_model, role):
    review = submit(api_client)
    hold = hold_place(reviews=[review.pk], reason="case", reference="LE-0", placed_by="counsel")
    browser = staff_browser(django_user_model, f"user-{role}", role)
    assert place(browser, review).status_code == 403
    for action, data in (("extend", {"expires_at": ""}), ("lift", {"reason": "done"})):
        assert browser.post(reverse(f"admin:moderation_legalhold_{action}", args=[hold.pk]), data).status_code == 403
    assert browser.get(reverse("admin:moderation_legalhold_changelist")).status_code == 403
    assert list(LegalHold.objects.values_list("pk", "lifted_at")) == [(hold.pk, None)]
    assert LegalHoldEvent.objects.count() == 1


def test_the_legal_role_places_and_lifts_a_hold_through_the_admin_audited(api_client, django_user_model):
    review = submit(api_client)
    counsel = staff_browser(django_user_model, "counsel", "legal")
    assert counsel.get(reverse("admin:moderation_legalhold_changelist")).status_code == 200
    response = place(counsel, review)
    assert response.status_code == 302, response.content.decode()[:2000]
    hold = LegalHold.objects.get()
    assert review_holds(review.pk) == [hold.pk] and hold.placed_by == "counsel"
    page = counsel.get(reverse("admin:moderation_legalhold_change", args=[hold.pk])).content.decode()
    assert "preserve &lt;b&gt;all&lt;/b&gt;" in page and 'id="lift-hold"' in page
    bad = counsel.post(reverse("admin:moderation_legalhold_lift", args=[hold.pk]), {"reason": ""})
    assert bad.status_code == 200 and "This field is required" in bad.content.decode()
    assert counsel.post(reverse("admin:moderation_legalhold_lift", args=[hold.pk]), {"reason": "court order 5"}
                        ).status_code == 302
    assert review_holds(review.pk) == []
    assert list(LegalHoldEvent.objects.values_list("action", "actor_id")) == [("placed", "counsel"), ("lifted", "counsel")]


def test_a_hold_on_an_unknown_author_or_naming_nothing_is_refused_with_its_reason(api_client, django_user_model):
    counsel = staff_browser(django_user_model, "counsel", "legal")
    url = reverse("admin:moderation_legalhold_place")
    page = counsel.post(url, {"client": "acme", "author_id": "ghost", "reason": "r", "reference": "x"}).content.decode()
    assert "no such author of that client" in page
    page = counsel.post(url, {"reason": "r", "reference": "x"}).content.decode()
    assert "names reviews, or an author" in page and not LegalHold.objects.exists()


def test_opening_a_snapshot_asks_why_logs_it_and_never_shows_it_to_another_role(api_client, django_user_model):
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=["harassment"])
    snapshot = PreservationSnapshot.objects.get(review=decided(api_client, ReviewStatus.REJECTED))
    url = reverse("admin:moderation_preservationsnapshot_open", args=[snapshot.pk])
    for role in OTHER_ROLES:
        other = staff_browser(django_user_model, f"other-{role}", role)
        assert other.post(url, {"why": "curious"}).status_code == 403
    counsel = staff_browser(django_user_model, "counsel", "legal")
    change = counsel.get(reverse("admin:moderation_preservationsnapshot_change", args=[snapshot.pk])).content.decode()
    assert "thanks for the lovely dinner, see you at the party" not in change and 'id="open-snapshot"' in change
    asked = counsel.get(url).content.decode()
    assert 'id="open-form"' in asked and "thanks for the lovely dinner, see you at the party" not in asked
    assert not SnapshotView.objects.exists()
    shown = counsel.post(url, {"why": "warrant 77"}).content.decode()
    assert "thanks for the lovely dinner, see you at the party" in shown
    assert list(SnapshotView.objects.values_list("viewer", "why")) == [("counsel", "warrant 77")]


def test_the_legal_group_holds_the_hold_permissions_and_no_other_group_does(db):
    holders = Group.objects.filter(permissions__codename__in=["place_legal_hold", "view_snapshot_content"]).distinct()
    assert [group.name for group in holders] == ["legal"]


def test_only_the_legal_role_registers_a_request_and_records_a_handover(api_client, django_user_model):
    from moderation.models import Handover, LawEnforcementRequest

    review = submit(api_client)
    url = reverse("admin:moderation_lawenforcementrequest_register")
    data = {"agency": "Polda Metro Jaya", "reference": "B/118", "asked": "the thread", "reviews": str(review.pk),
            "received_at": "2026-01-05 10:00"}
    for role in OTHER_ROLES:
        assert staff_browser(django_user_model, f"x-{role}", role).post(url, data).status_code == 403
    counsel = staff_browser(django_user_model, "counsel", "legal")
    assert counsel.post(url, data).status_code == 302
    registered = LawEnforcementRequest.objects.get()
    assert review_holds(review.pk) == [registered.hold_id] and registered.registered_by == "counsel"
    handover = reverse("admin:moderation_lawenforcementrequest_handover", args=[registered.pk])
    assert staff_browser(django_user_model, "sup", "supervisor").post(handover, {"reviews": str(review.pk)}
                                                                      ).status_code == 403
    assert counsel.post(handover, {"reviews": str(review.pk)}).status_code == 302
    page = counsel.get(reverse("admin:moderation_lawenforcementrequest_change", args=[registered.pk])).content.decode()
    assert Handover.objects.get().sha256 in page
