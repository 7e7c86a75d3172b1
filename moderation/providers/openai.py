"""An OpenAI-compatible synchronous `/v1/moderations` endpoint."""

from __future__ import annotations

from django.conf import settings

from moderation.providers import http
from moderation.providers.base import MalformedAnswer, ModerationInput, ModerationResult, UnsupportedContent, image_of


class OpenAIProvider:
    name = "openai"
    # omni-moderation judges text and images. Metadata is refused (UnsupportedContent, a human
    # decides): its values are many strings, and the endpoint answers one result per string.
    kinds = frozenset({"text", "image"})

    def __init__(self) -> None:
        self.url = settings.PROVIDER_URL.rstrip("/") + "/v1/moderations"
        self.http = http.client()

    def moderate(self, request: ModerationInput) -> ModerationResult:
        if request.content_type == "text":
            payload = request.text
        elif request.content_type == "image":
            # The documented form for omni-moderation: a data URL of the bytes (base.image_of).
            encoded, mime = image_of(request)
            payload = [{"type": "image_url", "image_url": {"url": f"data:{mime};base64,{encoded}"}}]
        else:
            raise UnsupportedContent(f"the OpenAI moderation endpoint cannot judge {request.content_type} content")
        status, data = http.post_json(
            self.http,
            self.url,
            {"model": settings.PROVIDER_MODEL, "input": payload},
            {
                "Authorization": f"Bearer {settings.PROVIDER_API_KEY}",
                # Harmless where ignored; lets a gateway in front de-duplicate our retries.
                "Idempotency-Key": request.idempotency_key,
            },
        )
        if status != 200 or not isinstance(data, dict):
            raise MalformedAnswer(f"unexpected HTTP {status} answer from the moderation endpoint", http_status=status)
        return ModerationResult.from_payload(data)
