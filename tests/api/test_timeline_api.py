from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from moderation.observability.timeline import review_timeline
from tests.helpers import decided


def url(review) -> str:
    return f"/api/v1/reviews/{review.pk}/timeline/"


@pytest.mark.django_db
def test_the_owning_client_gets_the_same_timeline_as_the_admin_page(http, api_client):
    review = decided(api_client, "rejected")

    entries = http.get(url(review)).json()

    assert [(e["kind"], e["source"]) for e in entries] == [(e.kind, e.source) for e in review_timeline(review)]
    # A client does not see who at the platform handled it.
    assert not any("worker_id" in e["ids"] or "actor" in e["detail"] or e["payload"] for e in entries)
    assert entries[0]["kind"] == "submitted" and entries[0]["ids"]["review_id"] == str(review.pk)
    assert any(e["kind"] == "transition" and e["ids"].get("idempotency_key") for e in entries)


@pytest.mark.django_db
def test_another_client_and_anonymous_callers_get_nothing(http, other_client):
    theirs = decided(other_client, "approved")
    assert http.get(url(theirs)).status_code == 404
    assert APIClient().get(url(theirs)).status_code == 401


@pytest.mark.django_db
def test_staff_with_view_permission_may_read_any_timeline(api_client, django_user_model):
    review = decided(api_client, "approved")
    moderator = django_user_model.objects.create_user("mia", is_staff=True)
    moderator.groups.add(Group.objects.get(name="moderator"))
    plain = django_user_model.objects.create_user("joe", is_staff=True)
    session = APIClient()

    session.force_login(moderator)
    assert session.get(url(review)).status_code == 200
    session.force_login(plain)
    assert session.get(url(review)).status_code == 404
