"""The generic asynchronous provider (docs/design.md, "Providers and the `webhook` protocol").

`POST {PROVIDER_URL}/v1/moderations` with `Idempotency-Key` and a bearer key. The provider
answers 202 `{"id", "status": "queued"}` and calls back later, or 200 with a result.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from django.conf import settings

from moderation.providers import http

from moderation.providers.base import (
    Accepted,
    MalformedAnswer,
    ModerationInput,
    ModerationResult,
    OperationStatus,
    ProviderError,
    UnsupportedContent,
    image_of,
)

logger = logging.getLogger(__name__)


def request_body(request: ModerationInput) -> dict:
    """The protocol's request body (docs/design.md, "Request"). An image travels as its bytes, in
    `image` (base.image_of says why never its URL), and `input` is then "": still a string, as
    every provider of the protocol reads it, and empty rather than the URL, so that a provider
    reading only `input` judges nothing it would have to fetch."""
    body = {
        "input": request.text,
        "content_type": request.content_type,
        "callback_url": request.callback_url,
        "metadata": {**request.reference, "content": request.metadata},
    }
    if request.content_type == "image":
        data, mime = image_of(request)
        body["image"] = {"base64": data, "mime_type": mime}
    elif request.content_type not in ("text", "metadata"):
        raise UnsupportedContent(f"the webhook protocol does not carry {request.content_type} content")
    return body


class WebhookProvider:
    name = "webhook"
    calls_back = True  # it may answer 202 and call back later (base.provider_answers_inline)

    def __init__(self) -> None:
        self.url = settings.PROVIDER_URL.rstrip("/") + "/v1/moderations"
        self.http = http.client()
        # What this deployment's provider judges (PROVIDER_KINDS): a generic one may see no images.
        self.kinds = frozenset(settings.PROVIDER_KINDS)

    def moderate(self, request: ModerationInput) -> ModerationResult | Accepted:
        status, data = http.post_json(self.http, self.url, request_body(request), {
            "Idempotency-Key": request.idempotency_key,
            "Authorization": f"Bearer {settings.PROVIDER_API_KEY}",
        })
        return self._answer(request, status, data)

    def _answer(self, request: ModerationInput, status: int, data) -> ModerationResult | Accepted:
        if not isinstance(data, dict):
            raise MalformedAnswer(f"HTTP {status} answer is not a JSON object", http_status=status)
        if status == 202:
            provider_id = data.get("id")
            if not isinstance(provider_id, str) or not provider_id:
                raise MalformedAnswer("202 answer without a provider request id", http_status=status)
            return Accepted(provider_request_id=provider_id)
        if status == 200:
            answered_for = data.get("idempotency_key", request.idempotency_key)
            if answered_for != request.idempotency_key:
                raise MalformedAnswer(f"200 answer for another operation ({answered_for!r})", http_status=status)
            return ModerationResult.from_payload(data)
        raise MalformedAnswer(f"unexpected HTTP {status} from the provider", http_status=status)

    def status(self, *, provider_request_id: str, idempotency_key: str) -> OperationStatus | None:
        """`GET {PROVIDER_URL}/v1/moderations/{id}` (docs/design.md, "Provider status and reconcile"). None for
        a 404 (unknown id, or not implemented), no answer, or an answer we cannot trust."""
        if not provider_request_id:
            return None
        try:
            status, data = http.get_json(
                self.http, f"{self.url}/{quote(provider_request_id, safe='')}",
                {"Authorization": f"Bearer {settings.PROVIDER_API_KEY}"},
            )
        except ProviderError as exc:
            logger.info("status of %s: no answer (%s)", provider_request_id, exc)
            return None
        if status != 200 or not isinstance(data, dict):
            return None
        state = data.get("status")
        if state == "queued":
            return OperationStatus("queued")
        if state == "failed":
            error = data.get("error")
            return OperationStatus("failed", error=error if isinstance(error, str) else "reported failed")
        result = data.get("result")
        if state != "completed" or not isinstance(result, dict):
            return None
        if result.get("idempotency_key", idempotency_key) != idempotency_key:
            logger.warning("status of %s answered for another operation", provider_request_id)
            return None
        try:
            return OperationStatus("completed", result=ModerationResult.from_payload(result))
        except MalformedAnswer as exc:
            logger.warning("status of %s: %s", provider_request_id, exc)
            return None
