"""`POST /api/v1/callbacks/<provider>/`: verify, store, then process (DESIGN "Callback").

Answers: 2xx once stored, also for duplicates and for stale or already-final results (the
provider must stop re-delivering); 401 for a bad or missing signature, nothing stored; 400 for
a malformed body with a valid signature, stored as `invalid`; 413 for a body over the limit.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import context
from callbacks import services
from callbacks.payload import InvalidCallback, parse
from callbacks.signing import InvalidSignature, verify

KEPT_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent")


class ProviderCallbackView(APIView):
    authentication_classes: list = []  # the Standard Webhooks signature is the authentication
    permission_classes = [AllowAny]
    parser_classes: list = []  # the raw body is what was signed: never let a parser touch it

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
        with context.bind(provider_event_id=event_id):
            try:
                event, reason = parse(text), ""
            except InvalidCallback as exc:
                event, reason = None, str(exc)
            # PostgreSQL text cannot hold NUL; such a body is not valid JSON anyway.
            stored = services.callback_store(
                provider=provider, event_id=event_id, body=text.replace("\x00", "\\u0000"),
                headers=headers, event=event, invalid_reason=reason,
            )
            if event is None:
                return _error(status.HTTP_400_BAD_REQUEST, "invalid", reason, id=stored.id)
            outcome = stored.outcome
            if stored.created:
                outcome = services.callback_process_safely(callback_id=stored.id) or ""
        return Response(
            {"id": stored.id, "duplicate": not stored.created, "outcome": outcome or "accepted"},
            status=status.HTTP_200_OK,
        )


def _read_body(request) -> bytes | None:
    """The body, or None when it is larger than CALLBACK_MAX_BYTES (checked before reading it
    when the client says its length)."""
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
    return Response({"error": code, "detail": detail, **extra}, status=http_status)
