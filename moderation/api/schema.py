"""OpenAPI details drf-spectacular cannot infer: our auth scheme and the error body."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "moderation.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API client's token, from `python manage.py create_api_client NAME`.",
        }


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code: invalid, not_found, not_authenticated, ...")
    detail = serializers.CharField(help_text="What went wrong, for people.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Per-field messages (400 invalid only).",
    )


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


UNAUTHORIZED = error("Missing, malformed, invalid or revoked token.")
NOT_FOUND = error("No such review for this client.")
INVALID = error("The request is not valid; `fields` says which and why.")
TOO_LARGE = error("The body is larger than the limit.")
