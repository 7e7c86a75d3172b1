"""Domain errors to HTTP, in one place, answered with the one JSON error body (moderation/web/error_body.py)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from moderation.web.error_body import error_body
from moderation.errors import (
    AppealExists,
    AppealOpen,
    AppealWindowClosed,
    FourEyesRequired,
    IdempotencyKeyReused,
    IllegalTransition,
    LeasedToOther,
    NotAppealable,
    NotApplicable,
    ReasonRequired,
    StaleVersion,
)

_DOMAIN = {
    IllegalTransition: (status.HTTP_409_CONFLICT, "illegal_transition"),
    StaleVersion: (status.HTTP_409_CONFLICT, "stale_version"),
    LeasedToOther: (status.HTTP_409_CONFLICT, "leased_to_other"),
    NotApplicable: (status.HTTP_409_CONFLICT, "not_applicable"),
    IdempotencyKeyReused: (status.HTTP_422_UNPROCESSABLE_ENTITY, "idempotency_key_reused"),
    ReasonRequired: (status.HTTP_400_BAD_REQUEST, "reason_required"),
    AppealExists: (status.HTTP_409_CONFLICT, "appeal_exists"),
    NotAppealable: (status.HTTP_409_CONFLICT, "not_appealable"),
    AppealWindowClosed: (status.HTTP_409_CONFLICT, "appeal_window_closed"),
    FourEyesRequired: (status.HTTP_409_CONFLICT, "four_eyes_required"),
    AppealOpen: (status.HTTP_409_CONFLICT, "appeal_open"),
}


def exception_handler(exc, context):
    for error_class, (http_status, code) in _DOMAIN.items():
        if isinstance(exc, error_class):
            return Response(error_body(code, str(exc)), status=http_status)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body("invalid", "The request is not valid.", fields=fields)
    else:
        code = exc.get_codes()
        response.data = error_body(code if isinstance(code, str) else "error", str(exc.detail))
    return response
