"""`media_url` is fetched by the moderation job through the outbound guard (moderation/media/fetch.py):
a loopback test server stands in for the client's host. Refusals end in `manual_review` with the
reason, never a crash; nothing but loopback is ever connected to (the resolver is patched and
every connect is checked: tests/moderation/test_netguard.py's `guarded`)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from moderation import services, tasks
from moderation.media.fetch import FETCH_FAILED, media_fetch
from moderation.media.images import MediaRefused
from moderation.models import ContentReview, ModerationRequest, ReviewMedia, ReviewQueue, ReviewStatus
from tests.helpers import staff_browser
from tests.helpers_media import bank_publish, encoded, image_hash, picture
from tests.moderation.test_netguard import guarded  # noqa: F401 - a fixture

PNG = encoded(picture(21))


@pytest.fixture(autouse=True)
def local_provider(settings):
    """The local model, which judges no images: the banks and image_fallback decide."""
    settings.MODERATION_PROVIDER = "local"



class Server:
    """A loopback HTTP server answering from `routes`: path -> (status, headers, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict, bytes]] = {}
        self.requests: list[tuple[str, dict]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                owner.requests.append((self.path, dict(self.headers)))
                status, headers, body = owner.routes.get(self.path, (404, {}, b"no"))
                self.send_response(status)
                for name, value in headers.items():
                    if name != "X-Test-No-Length":
                        self.send_header(name, value)
                if "X-Test-No-Length" not in headers:  # else HTTP/1.0: the body ends at the close
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def escape_hatch(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the loopback test server: a local trial's setting


def job(api_client, url: str, external_id: str = "u1") -> ContentReview:
    review, _ = services.review_submit(client=api_client, external_id=external_id, kind="image", media_url=url)
    tasks.moderate_review(review.pk)
    return ContentReview.objects.select_related("decision").get(pk=review.pk)


def test_an_image_at_a_media_url_is_fetched_hashed_and_matched(api_client, server, escape_hatch):
    server.routes["/cat.png"] = (200, {"Content-Type": "image/png", "Set-Cookie": "track=1"}, PNG)
    bank_publish("known-bad", [image_hash(PNG)[0]])

    review = job(api_client, f"{server.url}/cat.png")

    assert review.status == ReviewStatus.REJECTED
    media = ReviewMedia.objects.get(pk=review.content_id)
    assert bytes(media.data) == PNG and media.source == "url" and media.pdq == image_hash(PNG)[0]
    assert len(server.requests) == 1


def test_redirects_are_followed_each_hop_checked_and_no_cookie_is_sent(api_client, server, escape_hatch):
    server.routes["/a"] = (302, {"Location": "/b", "Set-Cookie": "session=secret"}, b"")
    server.routes["/b"] = (200, {"Content-Type": "image/png"}, PNG)

    review = job(api_client, f"{server.url}/a")

    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert [path for path, _ in server.requests] == ["/a", "/b"]
    assert "Cookie" not in server.requests[1][1] and "cookie" not in server.requests[1][1]


@pytest.mark.parametrize("route, why", [
    ((200, {"Content-Type": "image/png"}, b"<html>not an image</html>"), "not an image"),
    ((200, {"Content-Type": "image/png"}, PNG[:500]), "cannot be decoded"),
])
def test_a_url_that_gives_no_image_is_manual_review_whose_reason_says_why(api_client, server, escape_hatch, route, why):
    server.routes["/x"] = route

    review = job(api_client, f"{server.url}/x")

    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert why in review.decision.explanation
    assert why in ModerationRequest.objects.get(review=review).media["error"]
    assert not ReviewMedia.objects.filter(pk=review.content_id).exists()  # nothing half-written


def test_a_url_that_fails_to_fetch_tells_the_client_only_that_and_staff_and_the_log_why(
        api_client, server, escape_hatch, caplog, django_user_model):
    server.routes["/x"] = (404, {}, b"gone")

    review = job(api_client, f"{server.url}/x")

    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert f"could not be read: {FETCH_FAILED}" in review.decision.explanation
    assert "404" not in review.decision.explanation
    operation = ModerationRequest.objects.get(review=review)
    assert operation.media["error"] == FETCH_FAILED and "HTTP 404" in operation.media["error_detail"]
    assert any("HTTP 404" in r.getMessage() and r.review_id == str(review.pk) for r in caplog.records)
    staff = staff_browser(django_user_model, "sam", None)
    staff.user.is_superuser = True
    staff.user.save()
    assert "HTTP 404" in staff.get(f"/admin/moderation/moderationrequest/{operation.pk}/change/").content.decode()


def test_a_body_over_media_max_bytes_is_refused_as_it_arrives(server, escape_hatch, settings):
    settings.MEDIA_MAX_BYTES = 1000
    server.routes["/big"] = (200, {"Content-Type": "image/png"}, PNG)  # declared: refused unread
    with pytest.raises(MediaRefused, match="at most 1000"):
        media_fetch(f"{server.url}/big")
    # Undeclared (no Content-Length): counted as the bytes arrive.
    server.routes["/stream"] = (200, {"Content-Type": "image/png", "X-Test-No-Length": "1"}, PNG)
    with pytest.raises(MediaRefused, match="larger than 1000 bytes"):
        media_fetch(f"{server.url}/stream")


def test_too_many_redirects_are_refused(server, escape_hatch, settings):
    settings.MEDIA_FETCH_MAX_REDIRECTS = 2
    for n in range(5):
        server.routes[f"/r{n}"] = (302, {"Location": f"/r{n + 1}"}, b"")
    with pytest.raises(MediaRefused, match="more than 2 times"):
        media_fetch(f"{server.url}/r0")
    assert len(server.requests) == 3


def test_a_slow_server_is_cut_off_at_the_time_cap(escape_hatch, settings):
    import socket

    settings.MEDIA_FETCH_TIMEOUT_S = 0.5
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts the connection, never answers
    try:
        with pytest.raises(MediaRefused, match="longer than 0.5 s"):
            media_fetch(f"http://127.0.0.1:{listener.getsockname()[1]}/slow.png")
    finally:
        listener.close()


def test_without_the_escape_hatch_a_loopback_url_is_refused_before_connecting(api_client, guarded):  # noqa: F811
    guarded["cdn.example"] = ["127.0.0.1"]

    review = job(api_client, "http://cdn.example/cat.png")

    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert FETCH_FAILED in review.decision.explanation  # how the resolver sees the name is not the client's
    assert "127.0.0.1" not in review.decision.explanation and "loopback" not in review.decision.explanation
    detail = ModerationRequest.objects.get(review=review).media["error_detail"]
    assert "cdn.example resolves to 127.0.0.1" in detail and "loopback" in detail


@pytest.mark.parametrize("target, refused", [
    ("http://internal.example/meta", "10.0.0.5"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("http://[::1]:5432/", "::1"),
])
def test_a_redirect_to_a_refused_address_is_refused_and_nothing_connects_to_it(
        api_client, server, guarded, monkeypatch, target, refused):  # noqa: F811
    """The first hop is the loopback server standing in for a public host (the guard lets it
    through, as it would a public address); its redirect points into the platform's network."""
    from moderation import netguard

    real = netguard._refusal
    monkeypatch.setattr(netguard, "_refusal", lambda address: "" if address == "127.0.0.1" else real(address))
    guarded.update({"cdn.example": ["127.0.0.1"], "internal.example": ["10.0.0.5"],
                    "169.254.169.254": ["169.254.169.254"], "::1": ["::1"]})
    server.routes["/cat.png"] = (302, {"Location": target}, b"")

    review = job(api_client, f"http://cdn.example:{server.httpd.server_port}/cat.png")

    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert refused in ModerationRequest.objects.get(review=review).media["error_detail"]
    assert refused not in review.decision.explanation and FETCH_FAILED in review.decision.explanation
    assert [path for path, _ in server.requests] == ["/cat.png"]


def test_audio_is_fetched_and_stored_for_the_player_and_always_waits_for_a_human(api_client, server, escape_hatch):
    server.routes["/clip.ogg"] = (200, {"Content-Type": "audio/ogg"}, b"OggS" + b"\0" * 200)
    server.routes["/page"] = (200, {"Content-Type": "text/html"}, b"<html></html>")
    review, _ = services.review_submit(client=api_client, external_id="a1", kind="audio",
                                       media_url=f"{server.url}/clip.ogg")
    tasks.moderate_review(review.pk)
    review = ContentReview.objects.select_related("decision").get(pk=review.pk)

    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert "audio always waits for a human" in review.decision.explanation
    media = ReviewMedia.objects.get(pk=review.content_id)
    assert media.mime == "audio/ogg" and media.pdq == ""

    other, _ = services.review_submit(client=api_client, external_id="a2", kind="audio", media_url=f"{server.url}/page")
    tasks.moderate_review(other.pk)
    other = ContentReview.objects.select_related("decision").get(pk=other.pk)
    assert other.status == ReviewStatus.MANUAL_REVIEW and "did not serve audio" in other.decision.explanation
