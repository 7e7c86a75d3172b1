"""The API answers JSON whatever the client says it accepts: a browser's `Accept: text/html`
gets the same JSON body (DRF's browsable HTML renderer is not installed), never a 500.

Every endpoint under /api/v1/ is found from the URL configuration, so a new one is covered
without being listed here.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tests.helpers import decided

pytestmark = pytest.mark.django_db

ACCEPTS = ["text/html", "text/html,application/xhtml+xml,application/xml;q=0.9", "application/xml", "image/png"]


def api_endpoints() -> list[tuple[str, str]]:
    """(route, method) of every view under /api/v1/."""
    found = []

    def walk(patterns, prefix):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
                view = pattern.callback.cls
                found.extend((route, method) for method in ("get", "post", "delete") if hasattr(view, method))

    walk(get_resolver().url_patterns, "")
    return found


def test_every_api_endpoint_is_found():
    routes = {route for route, _ in api_endpoints()}
    assert {"api/v1/reviews/", "api/v1/reviews/<uuid:pk>/timeline/", "api/v1/callbacks/<slug:provider>/"} <= routes


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize(("route", "method"), api_endpoints())
def test_every_endpoint_answers_json_to_a_client_that_asks_for_html(route, method, accept, http, api_client):
    review = decided(api_client, "rejected")
    path = "/" + route.replace("<uuid:pk>", str(review.pk)).replace("<slug:provider>", "webhook")
    body = {"external_id": "x", "content_type": "text", "text": "hello", "reporter_id": "u1", "reason": "spam",
            "appellant_id": "u2", "statement": "no"}

    response = getattr(http, method)(path, body, format="json", HTTP_ACCEPT=accept)

    assert response.status_code < 500, response.content[:300]
    assert response["Content-Type"] == "application/json", (response.status_code, response.content[:200])
    response.json()


def test_the_timeline_answers_json_to_staff_asking_for_html(api_client, django_user_model):
    review = decided(api_client, "approved")
    staff = APIClient()
    staff.force_login(django_user_model.objects.create_superuser("boss", password="pw-long-enough-1"))

    response = staff.get(f"/api/v1/reviews/{review.pk}/timeline/", HTTP_ACCEPT="text/html")

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json()[0]["kind"] == "submitted"


def test_the_schema_answers_a_client_that_asks_for_html(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and "openapi" in response["Content-Type"]
