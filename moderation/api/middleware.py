"""Under /api/, every failure is a JSON error body, and oversized bodies are refused unread.

Django answers some failures itself, before DRF sees the request: an unknown URL (404), an
exception in a view (500), a body over the limit. Clients of the API get the same
{"error", "detail"} body for those as for everything else, never an HTML page.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.http import JsonResponse
from simple_history.middleware import HistoryRequestMiddleware

from moderation.web.error_body import error_body

logger = logging.getLogger(__name__)

CODES = {400: "invalid", 401: "not_authenticated", 403: "permission_denied", 404: "not_found",
         405: "method_not_allowed", 413: "too_large", 429: "throttled", 500: "server_error"}


def _error(status: int, detail: str = "") -> JsonResponse:
    return JsonResponse(error_body(CODES.get(status, "error"), detail or HTTPStatus(status).phrase), status=status)


SUBMISSIONS_PATH = "/api/v1/reviews/"
API_PREFIX = "/api/"
CALLBACKS_PREFIX = "/api/v1/callbacks/"


class SiteMessageMiddleware(MessageMiddleware):
    """Django's flash messages, for the admin's pages: an /api/ request skips them (they were
    its largest middleware cost with simple-history's, bench.middleware)."""

    def __call__(self, request):
        if request.path_info.startswith(API_PREFIX):
            return self.get_response(request)
        return super().__call__(request)


def site_history_middleware(get_response):
    """simple-history's request for the admin's changes (the staff user behind them): an API
    client's changes carry no user (moderation.models.history_user), so /api/ skips it."""
    site = HistoryRequestMiddleware(get_response)

    def middleware(request):
        if request.path_info.startswith(API_PREFIX):
            return get_response(request)
        return site(request)

    return middleware


# The site's middleware an /api/ request skips, and what each wraps (config/settings.py).
SITE_ONLY = {
    "moderation.api.middleware.SiteMessageMiddleware": "django.contrib.messages.middleware.MessageMiddleware",
    "moderation.api.middleware.site_history_middleware": "simple_history.middleware.HistoryRequestMiddleware",
}


def api_body_limit(method: str, path: str) -> int:
    """The largest body an API request may send: a submission may carry an image as base64
    (SUBMISSION_MAX_BODY_BYTES), a provider's callback CALLBACK_MAX_BYTES, every other API
    request API_MAX_BODY_BYTES. (The web server applies it before Django, with the rest of the
    site's bounds: config/asgi.py.)"""
    if method == "POST" and path == SUBMISSIONS_PATH:
        return settings.SUBMISSION_MAX_BODY_BYTES
    if path.startswith(CALLBACKS_PREFIX):
        return settings.CALLBACK_MAX_BYTES
    return settings.API_MAX_BODY_BYTES


class ApiErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _error(400, "Content-Length is not a number")
        limit = api_body_limit(request.method, request.path)
        if declared > limit:
            return _error(413, f"bodies are limited to {limit} bytes")
        response = self.get_response(request)
        if response.status_code >= 400 and response.get("Content-Type", "").startswith("text/html"):
            return _error(response.status_code)
        return response

    def process_exception(self, request, exception):
        if not request.path.startswith(API_PREFIX):
            return None
        logger.exception("unhandled error on %s %s", request.method, request.path)
        return _error(500, "Something went wrong on our side; it has been logged.")
