"""OpenAPI details drf-spectacular cannot infer: our auth scheme and the error body."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from moderation.api.serializers import TEXT_MAX_CHARS
from moderation.web.error_body import ErrorSerializer


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "moderation.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API client's token, from `python manage.py create_api_client NAME`.",
        }


# Response headers, documented where they are sent.
RESPONSE_HEADERS = [
    OpenApiParameter("Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[429],
                     description="Seconds to wait before trying again."),
    OpenApiParameter("WWW-Authenticate", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[401],
                     description='`Bearer realm="api"`.'),
]
REPLAY_HEADER = OpenApiParameter(
    "Idempotent-Replayed", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200, 201],
    description="`true` when this is the stored answer to an earlier request with the same Idempotency-Key.",
)


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


UNAUTHORIZED = error("Missing, malformed, invalid or revoked token.")
NOT_FOUND = error("No such review for this client.")
INVALID = error("The request is not valid; `fields` says which and why.")
TOO_LARGE = error("The body is larger than the limit.")
THROTTLED = error("Too many requests from this client: see the Retry-After header.")


# --- the submission body, one variant per content type ------------------------------------------
# The serializer validates one flat body with cross-field rules; the schema states those rules
# as a discriminated union, so clients (and schemathesis) know exactly what is accepted.

def _submission(name: str, kinds: list[str], **fields) -> type[serializers.Serializer]:
    base = {
        "external_id": serializers.CharField(
            max_length=255, help_text="Your id for the content; unique per client. Not blank."
        ),
        "author_id": serializers.CharField(
            required=False, allow_null=True, min_length=1, max_length=255,
            help_text="Your id of the content's author: 1 to 255 characters, no control characters, taken as "
                      "written. The same id sent by two clients names two authors.",
        ),
        "content_type": serializers.ChoiceField(choices=kinds),
        **fields,
    }
    return type(name, (serializers.Serializer,), base)



TEXT_SUBMISSION = _submission(
    "TextSubmission", ["text"],
    text=serializers.CharField(max_length=TEXT_MAX_CHARS, help_text="Not blank."),
    metadata=serializers.DictField(required=False),
)
MEDIA_SUBMISSION = _submission(
    "MediaSubmission", ["audio"],
    media_url=serializers.URLField(max_length=2048, help_text="An http(s) URL."),
    metadata=serializers.DictField(required=False),
)
IMAGE_SUBMISSION = _submission(
    "ImageSubmission", ["image"],
    media_url=serializers.URLField(
        max_length=2048, required=False,
        help_text="An http(s) URL, fetched by the moderation job through the outbound guard (at most "
                  "MEDIA_MAX_BYTES). Send it or image_base64, not both.",
    ),
    image_base64=serializers.CharField(
        required=False,
        help_text="The image's bytes, base64 (JPEG, PNG, GIF, WebP or BMP; at most MEDIA_MAX_BYTES decoded). "
                  "Bytes that do not decode as an image are a 400.",
    ),
    metadata=serializers.DictField(required=False),
)
METADATA_SUBMISSION = _submission(
    "MetadataSubmission", ["metadata"],
    metadata=serializers.DictField(help_text="A non-empty object; its string values are moderated."),
)


# No control character (Unicode Cc: C0, DEL and C1), as AuthorIdField refuses.
AUTHOR_ID_PATTERN = r"^[^\u0000-\u001f\u007f-\u009f]+$"


def _not_blank(schema: dict) -> dict:
    """Tighten the generated component: what 'not blank' and 'non-empty' mean."""
    props = schema.get("properties", {})
    for name in ("external_id", "text"):
        if name in props:
            props[name]["pattern"] = r"\S"
    if "author_id" in props:
        props["author_id"]["pattern"] = AUTHOR_ID_PATTERN
    if "media_url" in props:
        props["media_url"]["pattern"] = r"^https?://"
    if "image_base64" in props:  # one of the two, not both
        props["image_base64"]["pattern"] = r"^[A-Za-z0-9+/]+={0,2}$"
        schema["oneOf"] = [{"required": ["image_base64"]}, {"required": ["media_url"]}]
    if "metadata" in schema.get("required", []):
        props["metadata"]["minProperties"] = 1
    schema["additionalProperties"] = False  # unknown fields are refused
    return schema


def tighten_submission_components(result, generator, request, public):
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    components = result.get("components", {}).get("schemas", {})
    for name in ("TextSubmissionRequest", "MediaSubmissionRequest", "ImageSubmissionRequest", "MetadataSubmissionRequest"):
        if name in components:
            _not_blank(components[name])
    return result


DEFAULT_ERROR = {
    "description": "Any other error, as the one error body (e.g. 405, 500).",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


def complete_operations(result, generator, request, public):
    """drf-spectacular postprocessing hook: what a generated client needs to work as is.

    Every operation documents a `default` error response (any code it does not list is still the
    error body); a request body the view always reads is required; the `status` filter names the
    review status enum instead of repeating it.
    """
    status_enum = {"$ref": "#/components/schemas/ReviewStatusEnum"}
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            operation["responses"].setdefault("default", DEFAULT_ERROR)
            if method in ("post", "put", "patch") and "requestBody" in operation:
                operation["requestBody"]["required"] = True
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["name"] == "status":
                    parameter["schema"] = status_enum
    return result
