"""`POST /api/v1/callbacks/<provider>/`: verify, store, then process (docs/design.md, "Signed callback").

Answers: 2xx once stored, also for duplicates and for stale or already-final results (the
provider must stop re-delivering); 401 for a bad or missing signature, nothing stored; 400 for
a malformed body with a valid signature, stored as `invalid`; 413 for a body over the limit;
408 (from the web server, config/asgi.py) for a body that did not arrive in time.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import context
from callbacks import services
from callbacks.payload import InvalidCallback, named_key, parse, storable_body
from moderation.models import ResultOutcome
from moderation.signing import InvalidSignature, verify
from moderation.web.error_body import ErrorSerializer as ERROR_BODY
from moderation.web.error_body import error_body
from moderation.web.throttles import CallbackRateThrottle

# The answer's outcome for a delivery stored earlier and not processed yet (the sweeper will).
ACCEPTED = "accepted"
KEPT_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent")

_result = inline_serializer("ModerationResultItem", {
    "flagged": serializers.BooleanField(),
    "categories": serializers.DictField(child=serializers.BooleanField()),
    "category_scores": serializers.DictField(child=serializers.FloatField(min_value=0, max_value=1)),
})
_CALLBACK_SCHEMA = extend_schema(
    summary="Provider callback (Standard Webhooks)",
    description=(
        "Signed per Standard Webhooks with the provider's `whsec_` secret. Answered 2xx once stored, "
        "also for duplicates and stale results; 401 (nothing stored) for a bad or missing signature "
        "or a timestamp outside the tolerance; 400 for a malformed body (stored as invalid); 413 "
        "above the size limit; 408 for a body not received within REQUEST_BODY_TIMEOUT_S."
    ),
    auth=[],
    parameters=[
        OpenApiParameter("webhook-id", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                         description="The provider's event id: de-duplicates deliveries."),
        OpenApiParameter("webhook-timestamp", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                         description="Unix seconds when it was signed."),
        OpenApiParameter("webhook-signature", OpenApiTypes.STR, OpenApiParameter.HEADER, required=True,
                         description="`v1,<base64 HMAC-SHA256>`; several separated by spaces."),
        OpenApiParameter("Retry-After", OpenApiTypes.INT, OpenApiParameter.HEADER, response=[429],
                         description="Seconds to wait before delivering again."),
    ],
    request=inline_serializer("ProviderCallbackBody", {
        "type": serializers.ChoiceField(choices=["moderation.completed", "moderation.failed"]),
        "data": inline_serializer("ProviderCallbackData", {
            "id": serializers.CharField(max_length=255),
            "idempotency_key": serializers.UUIDField(),
            "model": serializers.CharField(required=False),
            "results": _result.__class__(many=True, required=False),
            "error": serializers.CharField(required=False),
        }),
    }),
    responses={
        200: inline_serializer("ProviderCallbackAck", {
            "id": serializers.IntegerField(help_text="The inbox row."),
            "duplicate": serializers.BooleanField(),
            "outcome": serializers.ChoiceField(choices=[*ResultOutcome.values, ACCEPTED]),
        }),
        400: ERROR_BODY,
        401: ERROR_BODY,
        404: ERROR_BODY,
        408: ERROR_BODY,
        413: ERROR_BODY,
        429: ERROR_BODY,
    },
)


class ProviderCallbackView(APIView):
    authentication_classes: list = []  # the Standard Webhooks signature is the authentication
    permission_classes = [AllowAny]
    throttle_classes = [CallbackRateThrottle]
    # Declared for the schema only: the view reads the raw body (what was signed) and never
    # touches request.data, so no parser ever runs.
    parser_classes = [JSONParser]

    @_CALLBACK_SCHEMA
    def post(self, request, provider: str):
        if provider not in settings.CALLBACK_SECRETS:
            return _error(status.HTTP_404_NOT_FOUND, "not_found", f"no callbacks are accepted for {provider!r}")
        body = _read_body(request)
        if body is None:
            return _error(
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "too_large", f"bodies are limited to {settings.CALLBACK_MAX_BYTES} bytes"
            )
        headers = {name: request.headers.get(name, "") for name in KEPT_HEADERS}
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            # Not UTF-8, so not JSON, and the signature library cannot even read it: refuse
            # without storing anything we could not authenticate.
            return _error(status.HTTP_400_BAD_REQUEST, "invalid", "the body is not UTF-8")
        try:
            verify(provider, body, headers)
        except InvalidSignature as exc:
            return _error(status.HTTP_401_UNAUTHORIZED, "invalid_signature", str(exc))
        event_id = headers["webhook-id"]
        if len(event_id) > 255:
            return _error(status.HTTP_400_BAD_REQUEST, "invalid", "webhook-id is longer than 255 characters")
        if any("\x00" in value for value in headers.values()):
            return _error(status.HTTP_400_BAD_REQUEST, "invalid", "a webhook header contains a NUL character")
        try:
            event, reason = parse(text), ""
        except InvalidCallback as exc:
            event, reason = None, str(exc)
        body = storable_body(text)
        if body is not text:
            reason += " (the body holds NUL characters: stored as base64 of its bytes)"
        # An invalid body is still linked to the operation it names (so erasure finds it).
        key = event.idempotency_key if event else named_key(text)
        with context.bind(provider_event_id=event_id, idempotency_key=key):
            stored = services.callback_store(
                provider=provider, event_id=event_id, body=body,
                headers=headers, event=event, invalid_reason=reason, named_key=key,
            )
            if event is None:
                return _error(status.HTTP_400_BAD_REQUEST, "invalid", reason, id=stored.id)
            outcome = stored.outcome
            if stored.created:
                with context.bind(review_id=stored.review_id):
                    outcome = services.callback_process_safely(callback_id=stored.id) or ""
        return Response(
            {"id": stored.id, "duplicate": not stored.created, "outcome": outcome or ACCEPTED},
            status=status.HTTP_200_OK,
        )


def _read_body(request) -> bytes | None:
    """The body, or None when it is larger than CALLBACK_MAX_BYTES (checked before reading it
    when the client says its length).

    The web server has read it already (config/asgi.py): whole, within REQUEST_BODY_TIMEOUT_S
    (408 otherwise, and this view never runs), so a client that trickles its body holds no
    worker while the signature waits for it (docs/operations.md, "Slow clients")."""
    limit = settings.CALLBACK_MAX_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    try:
        body = request.body
    except RequestDataTooBig:
        return None
    return None if len(body) > limit else body


def _error(http_status: int, code: str, detail: str, **extra) -> Response:
    return Response(error_body(code, detail, **extra), status=http_status)
