"""The webhook and OpenAI-compatible adapters against a scripted HTTP server: what is sent,
and how every kind of answer is classified."""

from __future__ import annotations

import json

import pytest

from moderation.providers import Accepted, ModerationInput, ModerationResult, provider_judges
from moderation.providers import base as errors
from moderation.providers.local import LocalProvider
from moderation.providers.openai import OpenAIProvider
from moderation.providers.webhook import WebhookProvider
from tests.helpers import LoopbackJsonServer
from tests.helpers_media import b64, encoded, picture

IMAGE_B64 = b64(encoded(picture(1)))
RESULT = {"id": "modr_1", "model": "m-1", "results": [{"flagged": True, "categories": {"hate": True}, "category_scores": {"hate": 0.97}}]}


class Stub:
    """Answers each POST with the next scripted (status, body, delay); records what it got."""

    def __init__(self):
        self.script, self.received = [], []
        self.http = LoopbackJsonServer(self.respond)
        self.url = self.http.url

    def respond(self, path: str, headers, body: bytes) -> tuple[int, object, float]:
        self.received.append((path, dict(headers), json.loads(body)))
        return self.script.pop(0)


@pytest.fixture
def stub(settings):
    server = Stub()
    settings.PROVIDER_URL, settings.PROVIDER_API_KEY = server.url, "key-1"
    settings.PROVIDER_TIMEOUT_S, settings.PROVIDER_CONNECT_TIMEOUT_S = 0.5, 0.5
    yield server
    server.http.shutdown()


def text(**extra) -> ModerationInput:
    return ModerationInput(idempotency_key="4f6c7a4e-6b1e-4a57-9d38-1d7a1a0d3c11", content_type="text", text="hi",
                           callback_url="http://us/api/v1/callbacks/webhook/", reference={"review_id": "r1"}, **extra)


def test_webhook_sends_the_protocols_request_and_reads_a_202(stub):
    stub.script = [(202, {"id": "modr_9", "status": "queued"}, 0)]

    assert WebhookProvider().moderate(text(metadata={"lang": "en"})) == Accepted("modr_9")

    path, headers, body = stub.received[0]
    assert path == "/v1/moderations"
    assert headers["Idempotency-Key"] == "4f6c7a4e-6b1e-4a57-9d38-1d7a1a0d3c11"
    assert headers["Authorization"] == "Bearer key-1"
    assert body == {"input": "hi", "content_type": "text", "callback_url": "http://us/api/v1/callbacks/webhook/",
                    "metadata": {"review_id": "r1", "content": {"lang": "en"}}}


def test_webhook_reads_a_synchronous_200_result(stub):
    stub.script = [(200, RESULT, 0)]
    answer = WebhookProvider().moderate(text())
    assert answer == ModerationResult(model="m-1", flagged=True, categories={"hate": True},
                                      category_scores={"hate": 0.97}, provider_request_id="modr_1")


@pytest.mark.parametrize(
    ("status", "body", "error", "retryable"),
    [
        (503, {"error": "down"}, errors.ProviderServerError, True),
        (500, b"<html>oops</html>", errors.ProviderServerError, True),
        (429, {"error": "slow down"}, errors.ProviderError, True),
        (401, {"error": "bad key"}, errors.ProviderClientError, False),
        (422, {"error": "bad input"}, errors.ProviderClientError, False),
        (202, {"status": "queued"}, errors.MalformedAnswer, True),
        (202, [1, 2], errors.MalformedAnswer, True),
        (200, b"not json", errors.MalformedAnswer, True),
        (200, {"id": "x", "results": []}, errors.MalformedAnswer, True),
        (204, b"", errors.MalformedAnswer, True),
    ],
)
def test_webhook_classifies_every_failure(stub, status, body, error, retryable):
    stub.script = [(status, body, 0)]
    with pytest.raises(error) as raised:
        WebhookProvider().moderate(text())
    assert type(raised.value) is error and raised.value.retryable is retryable


def test_a_slow_answer_is_a_timeout(stub):
    stub.script = [(202, {"id": "late"}, 1.5)]
    with pytest.raises(errors.ProviderTimeout):
        WebhookProvider().moderate(text())


def test_a_refused_connection_is_a_connection_error(settings):
    settings.PROVIDER_URL = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(errors.ProviderConnectionError):
        WebhookProvider().moderate(text())


def test_openai_sends_model_and_input_and_reads_the_result(stub, settings):
    settings.PROVIDER_MODEL = "omni-moderation-latest"
    stub.script = [(200, RESULT, 0)]

    answer = OpenAIProvider().moderate(text())

    assert answer.category_scores == {"hate": 0.97} and answer.flagged
    _, headers, body = stub.received[0]
    assert body == {"model": "omni-moderation-latest", "input": "hi"}
    assert headers["Authorization"] == "Bearer key-1"


def image(**extra) -> ModerationInput:
    """An image as the job hands it over: its bytes read, the client's URL beside them."""
    fields = {"media_url": "https://cdn.example.test/cat.png", "image_base64": IMAGE_B64, "media_mime": "image/png",
              "callback_url": "http://us/api/v1/callbacks/webhook/", "reference": {"review_id": "r1"}, **extra}
    return ModerationInput(idempotency_key="4f6c7a4e-6b1e-4a57-9d38-1d7a1a0d3c11", content_type="image", **fields)


def test_openai_sends_an_image_as_a_data_url_of_its_bytes_never_its_url(stub, settings):
    settings.PROVIDER_MODEL = "omni-moderation-latest"
    stub.script = [(200, RESULT, 0)]

    OpenAIProvider().moderate(image())

    _, _, body = stub.received[0]
    assert body == {"model": "omni-moderation-latest",
                    "input": [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE_B64}"}}]}
    assert "cdn.example.test" not in json.dumps(body)


def test_webhook_sends_an_image_as_its_bytes_beside_the_protocols_fields(stub):
    stub.script = [(202, {"id": "modr_9", "status": "queued"}, 0)]

    assert WebhookProvider().moderate(image(metadata={"album": "pets"})) == Accepted("modr_9")

    _, _, body = stub.received[0]
    assert body == {"input": "", "content_type": "image", "callback_url": "http://us/api/v1/callbacks/webhook/",
                    "metadata": {"review_id": "r1", "content": {"album": "pets"}},
                    "image": {"base64": IMAGE_B64, "mime_type": "image/png"}}
    assert "cdn.example.test" not in json.dumps(body)


@pytest.mark.parametrize("adapter", [OpenAIProvider, WebhookProvider])
def test_an_image_without_its_bytes_or_audio_is_refused_unsent(stub, adapter):
    for refused in (image(image_base64=""), ModerationInput(idempotency_key="k", content_type="audio",
                                                            media_url="https://x/a.mp3", image_base64="",
                                                            media_mime="audio/mpeg")):
        with pytest.raises(errors.UnsupportedContent):
            adapter().moderate(refused)
    assert stub.received == []


def test_each_adapter_declares_the_kinds_it_judges(settings):
    assert {kind for kind in ("text", "metadata", "image", "audio") if provider_judges(OpenAIProvider(), kind)} == {
        "text", "image"}
    assert WebhookProvider().kinds == {"text", "metadata", "image"}
    settings.PROVIDER_KINDS = ("text", "metadata")  # a generic provider that sees no images
    assert not provider_judges(WebhookProvider(), "image") and provider_judges(WebhookProvider(), "metadata")
    assert provider_judges(LocalProvider(), "text") and not provider_judges(LocalProvider(), "image")


def test_openai_treats_a_202_as_malformed(stub):
    stub.script = [(202, {"id": "x"}, 0)]
    with pytest.raises(errors.MalformedAnswer):
        OpenAIProvider().moderate(text())
