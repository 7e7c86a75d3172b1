"""The one JSON error body of every HTTP failure, and its OpenAPI component.

Body: {"error": "<code>", "detail": "<message>", "fields": {...}} (fields only for 400s). The API's
exception handler and middleware (moderation/api/), the callback endpoint (callbacks/views.py) and
the web server's own refusals (config/asgi.py) all build it here.
"""

from __future__ import annotations

from rest_framework import serializers


def error_body(code: str, detail: str, **extra) -> dict:
    """The one error body: a stable code, a message for people, and any extra fields."""
    return {"error": code, "detail": detail, **extra}


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code: invalid, not_found, not_authenticated, ...")
    detail = serializers.CharField(help_text="What went wrong, for people.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Per-field messages (400 invalid only).",
    )
