"""Every role that can see policies can open each published version: the version behind a
decision is read-only in the admin, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from moderation import services
from moderation.models import ModerationPolicy
from tests.helpers import staff_browser

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model) -> dict[str, Client]:
    boss = Client(raise_request_exception=False)
    boss.force_login(django_user_model.objects.create_superuser("boss", password="pw-long-enough-1"))
    return {"superuser": boss, **{role: staff_browser(django_user_model, f"{role}-1", role)
                                  for role in ("moderator", "supervisor", "auditor")}}


def test_every_role_can_read_every_policy_version_and_none_can_change_it(people):
    active = services.policy_active()
    services.policy_publish(**{**services.policy_fields(active), "reject_threshold": 0.8,
                               "term_lists": [{"category": "spam", "action": "reject", "language": "", "terms": ["<b>buy</b>", "re:fr[e]+"]}]},
                            notes="<script>alert(1)</script>")
    for role, browser in people.items():
        for policy in ModerationPolicy.objects.order_by("version"):
            page = browser.get(f"/admin/moderation/moderationpolicy/{policy.pk}/change/")

            assert page.status_code == 200, (role, policy.version, page.status_code)
            html = page.content.decode()
            assert f"{policy.reject_threshold}" in html and 'name="_save"' not in html, role
            assert "<script>alert(1)</script>" not in html and "<b>buy</b>" not in html
    newest = ModerationPolicy.objects.order_by("-version").first()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in people["auditor"].get(
        f"/admin/moderation/moderationpolicy/{newest.pk}/change/").content.decode()


def test_posting_to_a_published_version_changes_nothing(people):
    policy = ModerationPolicy.objects.get()
    people["supervisor"].post(f"/admin/moderation/moderationpolicy/{policy.pk}/change/", {"reject_threshold": 0.1})
    policy.refresh_from_db()
    assert policy.reject_threshold == 0.9 and ModerationPolicy.objects.count() == 1
