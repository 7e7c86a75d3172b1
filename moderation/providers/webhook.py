"""The generic asynchronous provider (docs/design.md, "Providers and the `webhook` protocol").

`POST {PROVIDER_URL}/v1/moderations` with `Idempotency-Key` and a bearer key. The provider
answers 202 `{"id", "status": "queued"}` and calls back later, or 200 with a result.
"""

from __future__ import annotations

from django.conf import settings

from moderation.providers import http
from moderation.providers.base import Accepted, MalformedAnswer, ModerationInput, ModerationResult


class WebhookProvider:
    name = "webhook"

    def __init__(self) -> None:
        self.url = settings.PROVIDER_URL.rstrip("/") + "/v1/moderations"
        self.http = http.client()

    def moderate(self, request: ModerationInput) -> ModerationResult | Accepted:
        status, data = http.post_json(
            self.http,
            self.url,
            {
                "input": request.media_url if request.media_url else request.text,
                "content_type": request.content_type,
                "callback_url": request.callback_url,
                "metadata": {**request.reference, "content": request.metadata},
            },
            {
                "Idempotency-Key": request.idempotency_key,
                "Authorization": f"Bearer {settings.PROVIDER_API_KEY}",
            },
        )
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
