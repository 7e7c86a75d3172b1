"""Images through the moderation job to a provider that judges them (docs/design.md, "Images and
hash banks"): the provider gets the bytes the job read, never the client's URL; a bank match and
the provider's verdict are both weighed, and the strictest wins."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from moderation import providers, services, tasks
from moderation.models import HashBank, HashBankEntry, ReviewStatus
from tests.helpers import result
from tests.helpers_media import b64, encoded, image_hash, image_header, picture
from tests.moderation.test_http_providers import RESULT, Stub

IMAGE = encoded(picture(7))
JUDGES_IMAGES = frozenset({"text", "metadata", "image"})


def submitted(api_client, data: bytes = IMAGE, external_id: str = "img-1"):
    review, _ = services.review_submit(client=api_client, external_id=external_id, kind="image",
                                       image=(data, image_header(data)))
    return review


def bank_of(data: bytes, *, action: str, name: str = "known", category: str = "csam") -> None:
    """A bank holding `data`'s hash, published in a new policy version."""
    pdq, _ = image_hash(data)
    entry = HashBankEntry.objects.create(bank=HashBank.objects.create(name=name), pdq=pdq)
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, hash_banks=[
        {"name": name, "category": category, "action": action, "never_display": False, "through": entry.pk}])


@pytest.mark.usefixtures("on_commit_callbacks_run")
@pytest.mark.parametrize(
    ("bank_action", "score", "label"),
    [
        ("reject", 0.05, ReviewStatus.REJECTED),  # the bank is stricter than the model
        ("manual_review", 0.97, ReviewStatus.REJECTED),  # the model is stricter than the bank
        ("manual_review", 0.05, ReviewStatus.MANUAL_REVIEW),
        (None, 0.05, ReviewStatus.APPROVED),  # the model judged it: no image_fallback
        (None, 0.6, ReviewStatus.MANUAL_REVIEW),
    ],
)
def test_a_bank_match_and_the_providers_verdict_are_weighed_and_the_strictest_wins(api_client, scripted, bank_action,
                                                                                   score, label):
    scripted.kinds = JUDGES_IMAGES
    if bank_action:
        bank_of(IMAGE, action=bank_action)
    else:
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5)  # image_fallback stays manual_review
    scripted.script = [result(score)]
    review = submitted(api_client)

    tasks.moderate_review(review.pk)

    review.refresh_from_db()
    assert review.status == label, review.decision.explanation
    (call,) = scripted.calls
    assert (call.image_base64, call.media_mime, call.text) == (b64(IMAGE), "image/png", "")
    matches = review.decision.rule_matches
    if bank_action:
        assert [(m["rule"], m["action"], m["distance"]) for m in matches] == [("bank:known", bank_action, 0)]
        assert "hash bank known matched at distance 0" in review.decision.explanation
    else:
        assert matches == [] and "image_fallback" not in review.decision.explanation
    assert review.decision.model_used is True


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_a_provider_that_judges_no_images_is_never_sent_one(api_client, scripted):
    bank_of(IMAGE, action="manual_review")
    review = submitted(api_client)

    tasks.moderate_review(review.pk)

    review.refresh_from_db()
    assert scripted.calls == []  # (the scripted provider declares no kinds: text and metadata)
    assert review.status == ReviewStatus.MANUAL_REVIEW and review.decision.model_used is None


class ImageHost:
    """A client's image host on loopback: GET answers the image, counting the requests."""

    def __init__(self, data: bytes):
        host = self
        self.gets = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                host.gets += 1
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/uploads/cat.png"

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def openai_stub(settings):
    stub = Stub()
    settings.MODERATION_PROVIDER, settings.PROVIDER_URL, settings.PROVIDER_API_KEY = "openai", stub.url, "key-1"
    settings.PROVIDER_TIMEOUT_S = settings.PROVIDER_CONNECT_TIMEOUT_S = 2
    providers.unregister("openai")
    providers.register("openai", providers._openai)
    yield stub
    stub.http.shutdown()
    providers.unregister("openai")
    providers.register("openai", providers._openai)


@pytest.mark.django_db(transaction=True)
def test_an_image_capable_provider_gets_the_bytes_the_job_fetched_never_the_clients_url(api_client, openai_stub):
    host = ImageHost(IMAGE)
    try:
        review, _ = services.review_submit(client=api_client, external_id="by-url", kind="image", media_url=host.url)
        openai_stub.script = [(200, RESULT, 0)]  # hate 0.97

        tasks.moderate_review(review.pk)
    finally:
        host.shutdown()

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED, review.decision.explanation
    assert host.gets == 1  # the job fetched it, once
    (_, _, body), = openai_stub.received
    assert body["input"] == [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(IMAGE)}"}}]
    assert host.url not in json.dumps(body) and "127.0.0.1" not in json.dumps(body)
