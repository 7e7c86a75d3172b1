"""The front door: the root URL leads to the admin (never a 404 listing every URL pattern), and
/favicon.ico is an icon, not a 404 in every browser's console."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_the_root_url_leads_to_the_admin(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert client.get("/", follow=True).redirect_chain[-1][0].startswith("/admin/login/")


def test_the_favicon_is_the_platforms_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("moderation/favicon.svg")
    icon = client.get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content if icon.streaming else [icon.content])
