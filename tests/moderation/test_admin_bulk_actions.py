"""A bulk action's confirmation posts the version of each review it showed: a version that is
not a version number is refused with a clear message, and no review of the batch is touched."""

from __future__ import annotations

import pytest
from django.test import Client

from moderation.models import ContentReview
from tests.helpers import decided, staff_browser
from tests.moderation.test_workplace import LIST, messages_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(django_user_model) -> Client:
    browser = staff_browser(django_user_model, "mia", "moderator")
    browser.raise_request_exception = False
    return browser


@pytest.mark.parametrize("version", ["²", "٣", "¹²", "-1", "1e3", " 3", "9" * 30, "3\x00"])
def test_a_version_that_is_not_a_version_number_refuses_the_whole_batch(moderator, api_client, version):
    good, bad = decided(api_client, "manual_review"), decided(api_client, "manual_review")
    data = {"action": "override_selected", "_selected_action": [str(good.pk), str(bad.pk)], "apply": "1",
            "label": "rejected", "category": "spam", "reason": "spam wave",
            f"version_{good.pk}": str(good.version), f"version_{bad.pk}": version}

    response = moderator.post(LIST, data, follow=True)

    assert response.status_code == 200
    assert messages_of(response) == [f"Nothing was overridden: the version posted for review {bad.short_id} is not a version number."]
    assert sorted(ContentReview.objects.values_list("status", flat=True)) == ["manual_review"] * 2


def test_the_versions_shown_are_applied(moderator, api_client):
    reviews = [decided(api_client, "manual_review") for _ in range(2)]
    data = {"action": "override_selected", "_selected_action": [str(r.pk) for r in reviews], "apply": "1",
            "label": "approved", "reason": "fine", **{f"version_{r.pk}": str(r.version) for r in reviews}}

    assert messages_of(moderator.post(LIST, data, follow=True)) == ["2 overridden."]


def test_the_confirmation_shows_the_content_of_each_review_not_its_id(moderator, api_client):
    from tests.helpers import submit

    review = submit(api_client, text="buy cheap watches at shop.example")
    data = {"action": "escalate_selected", "_selected_action": [str(review.pk)]}

    page = moderator.post(LIST, data).content.decode()

    assert "buy cheap watches at shop.example" in page and "<td>Pending</td>" in page
    assert f"<code>{review.short_id}</code>" not in page
