"""The admin's Content-Security-Policy (moderation/admin/csp.py): every response under /admin/
carries it, the pages with an inline script carry it with their own nonce, a view's stricter
policy is kept, and nothing outside the admin is touched. (Every page of every role carries it:
tests/moderation/test_admin_crawl.py; nothing on them breaks it in a browser:
tests/browser/test_admin_pages.py.)"""

from __future__ import annotations

import re

import pytest

from moderation.admin import csp
from tests.helpers import decided, staff_browser
from tests.moderation.test_admin_media import image_review

pytestmark = pytest.mark.django_db


def directives(header: str) -> dict[str, str]:
    return {name: value.strip() for name, _, value in (part.strip().partition(" ") for part in header.split(";"))}


def test_the_policy_loads_from_this_origin_only_and_runs_no_inline_script():
    policy = directives(csp.policy())
    assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'"
    assert policy["object-src"] == policy["base-uri"] == policy["frame-ancestors"] == policy["frame-src"] == "'none'"
    assert policy["img-src"] == "'self' data:" and policy["media-src"] == "'self'"
    assert directives(csp.policy("n0nce"))["script-src"] == "'self' 'nonce-n0nce'"


@pytest.mark.parametrize("url", ["/admin/login/", "/admin/", "/admin/moderation/contentreview/", "/admin/no-such-page/"])
def test_a_logged_out_visitor_gets_the_policy_on_the_login_page_its_redirects_and_the_404s(client, url):
    response = client.get(url)
    assert response.status_code in (200, 302, 404)
    assert response[csp.HEADER] == csp.policy()


@pytest.mark.parametrize("url", ["/admin/", "/admin/moderation/contentreview/", "/admin/moderation/moderationpolicy/terms/",
                                 "/admin/moderation/moderationpolicy/", "/admin/audit/reviewtransition/",
                                 "/admin/moderation/contentreview/queues/"])
def test_the_lists_the_index_and_the_term_editor_send_the_policy(django_user_model, url):
    response = staff_browser(django_user_model, "sam", "supervisor").get(url)
    assert response.status_code == 200
    assert response[csp.HEADER] in (csp.policy(), csp.policy(nonce_of(response[csp.HEADER])))


def nonce_of(header: str) -> str:
    found = re.search(r"'nonce-([^']+)'", header)
    return found.group(1) if found else ""


def test_the_review_page_keeps_its_own_nonce_and_its_script_carries_it(django_user_model, api_client):
    review = decided(api_client, "approved")
    browser = staff_browser(django_user_model, "mia", "moderator")
    first, second = (browser.get(f"/admin/moderation/contentreview/{review.pk}/timeline/") for _ in range(2))
    nonce = nonce_of(first[csp.HEADER])
    assert nonce and nonce != nonce_of(second[csp.HEADER])  # one per response
    assert first[csp.HEADER] == csp.policy(nonce)
    scripts = re.findall(r"<script\b[^>]*>", first.content.decode())
    assert scripts and all(f'nonce="{nonce}"' in tag or "src=" in tag for tag in scripts), scripts


def test_the_media_viewer_keeps_its_sandbox(django_user_model, api_client, settings):
    settings.MODERATION_PROVIDER = "local"
    review = image_review(api_client)
    response = staff_browser(django_user_model, "mia", "moderator").get(f"/admin/moderation/contentreview/{review.pk}/media/")
    assert response.status_code == 200 and response[csp.HEADER] == "default-src 'none'; sandbox"


def test_nothing_outside_the_admin_gets_the_admins_policy(client):
    for url in ("/healthz", "/api/schema/"):
        response = client.get(url)
        assert response.status_code == 200 and csp.HEADER not in response, url
