"""An OpenAI-compatible synchronous `/v1/moderations` endpoint."""

from __future__ import annotations

from django.conf import settings

from moderation.providers import http
from moderation.providers.base import MalformedAnswer, ModerationInput, ModerationResult, UnsupportedContent


class OpenAIProvider:
    name = "openai"

    def __init__(self) -> None:
        self.url = settings.PROVIDER_URL.rstrip("/") + "/v1/moderations"
        self.http = http.client()

    def moderate(self, request: ModerationInput) -> ModerationResult:
        if request.content_type == "text":
            payload = request.text
        elif request.content_type == "image":
            payload = [{"type": "image_url", "image_url": {"url": request.media_url}}]
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
