"""What decoding an image may cost (docs/images.md, "What decoding costs"): the request reads the
header only and refuses, with a 400 saying why, an image whose decode would cost more than the
bounds allow; the job decodes each image once, at most MEDIA_DECODE_CONCURRENCY at a time in a
process, and keeps its hash and thumbnail, so nothing decodes it again."""

from __future__ import annotations

import io
import os
import sys
import threading
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from PIL import Image, ImageFile

from moderation import services, tasks
from moderation.media import images
from moderation.media.images import MediaRefused, image_inspect, image_read
from moderation.models import Content, ContentReview, ModerationRequest, ReviewMedia, ReviewStatus
from moderation.services import media as media_services
from tests.helpers_media import b64, bomb_png, encoded, generous_bounds, picture
from tests.helpers import examples

URL = "/api/v1/reviews/"


@pytest.fixture(autouse=True)
def local_provider(settings):
    """The local model, which judges no images: the banks and image_fallback decide."""
    settings.MODERATION_PROVIDER = "local"


class Decodes:
    """A spy on Pillow's decoding of pixels: ImageFile.load of an image whose tiles are still to
    decode (reading a header never calls it; a loaded image's load decodes nothing)."""

    def __init__(self, monkeypatch, during=None):
        self.count, self.active, self.peak = 0, 0, 0
        self._lock, self._during = threading.Lock(), during
        real = ImageFile.ImageFile.load

        def load(image):
            if not image.tile:
                return real(image)
            with self._lock:
                self.count += 1
                self.active += 1
                self.peak = max(self.peak, self.active)
            try:
                if self._during:
                    self._during(self)
                return real(image)
            finally:
                with self._lock:
                    self.active -= 1

        monkeypatch.setattr(ImageFile.ImageFile, "load", load)


def submit(http, data: bytes, external_id: str = "img"):
    return http.post(URL, {"external_id": external_id, "content_type": "image", "image_base64": b64(data)},
                     format="json")


def refusal(response) -> str:
    assert response.status_code == 400, response.content
    return " ".join(response.json()["fields"]["image_base64"])


# --- the request: the header only ------------------------------------------------------------------


def test_the_issues_bomb_is_a_400_at_submission_and_no_pixel_of_it_is_decoded(http, monkeypatch):
    """6300 x 6300 RGBA in 154 KB: under MEDIA_MAX_PIXELS, about 260 pixels a byte."""
    decodes = Decodes(monkeypatch)

    why = refusal(submit(http, bomb_png(6300, "RGBA")))

    assert "decompression bomb" in why and "6300x6300" in why
    assert decodes.count == 0
    assert not Content.objects.exists()


@pytest.mark.parametrize("bound, value, why", [
    ("MEDIA_MAX_PIXELS", 1_000_000, "at most 1000000 are decoded"),
    ("MEDIA_DECODE_MAX_BYTES", 16 * 1024 * 1024, "bytes to decode; at most 16777216 are spent"),
    ("MEDIA_MAX_PIXELS_PER_BYTE", 64, "at most 64 a byte are decoded"),
])
def test_each_bound_alone_refuses_an_image_that_costs_more_unread(http, settings, monkeypatch, bound, value, why):
    """A flat 2500 x 2500 RGB PNG (6.25 megapixels, 25 MB decoded, in 19 KB: ~330 pixels a byte)
    passes every default bound but one, the one lowered here; the ratio applies over
    MEDIA_RATIO_FROM_PIXELS, lowered for it."""
    data = bomb_png(2500, "RGB")
    assert submit(http, data, "passes").status_code == 201
    settings.MEDIA_RATIO_FROM_PIXELS = 1_000_000
    settings.MEDIA_MAX_PIXELS_PER_BYTE = 1_000
    setattr(settings, bound, value)
    decodes = Decodes(monkeypatch)

    assert why in refusal(submit(http, data, "refused"))
    assert decodes.count == 0


def test_a_small_image_is_taken_whatever_its_pixels_a_byte(http):
    """Under MEDIA_RATIO_FROM_PIXELS an image is cheap to decode however well it compresses."""
    data = encoded(Image.new("RGB", (1000, 1000), "white"))
    assert 1_000_000 / len(data) > 64

    assert submit(http, data).status_code == 201


def test_the_memory_a_decode_takes_counts_its_mode():
    """RGB is reduced as decoded (4 bytes a pixel); any other mode is converted to RGB first."""
    bounds = replace(generous_bounds(), max_decode_bytes=4 * 1000 * 1000)
    assert image_inspect(encoded(Image.new("RGB", (1000, 1000))), bounds=bounds).decode_bytes == 4_000_000
    with pytest.raises(MediaRefused, match="8000000 bytes to decode"):
        image_inspect(encoded(Image.new("RGBA", (1000, 1000))), bounds=bounds)


@hsettings(max_examples=examples(40), deadline=None,
           suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.one_of(
    st.binary(max_size=1500),
    # A real header with anything after it: the parsers' deeper paths.
    st.tuples(st.sampled_from([encoded(picture(1), fmt) for fmt in ("PNG", "JPEG", "GIF", "WEBP", "BMP")]),
              st.integers(0, 3000), st.binary(max_size=200)).map(lambda t: t[0][:t[1]] + t[2]),
))
def test_any_bytes_as_image_base64_are_a_201_or_a_400_never_a_500(http, data):
    response = submit(http, data, external_id=f"any-{len(data)}-{hash(data)}")

    assert response.status_code in (200, 201, 400), response.content
    if response.status_code == 201:  # the job then reads it, or says why not: never a crash
        tasks.moderate_review(response.json()["id"])
        assert ContentReview.objects.get(pk=response.json()["id"]).status in (ReviewStatus.MANUAL_REVIEW,
                                                                              ReviewStatus.APPROVED)


# --- the job: one decode, its hash and thumbnail kept ---------------------------------------------


def test_the_job_decodes_an_image_once_and_keeps_its_hash_and_thumbnail(http, monkeypatch, django_user_model):
    decodes = Decodes(monkeypatch)
    review_id = submit(http, encoded(picture(4), "JPEG")).json()["id"]
    assert decodes.count == 0  # not in the request

    tasks.moderate_review(review_id)

    media = ReviewMedia.objects.get(content__review__pk=review_id)
    assert decodes.count == 1
    assert media.pdq and media.pdq_quality >= 50
    thumbnail = Image.open(io.BytesIO(bytes(media.thumbnail)))
    assert thumbnail.format == "JPEG" and thumbnail.size == (96, 72)

    services.review_reprocess(review_id=review_id, actor="moderator", actor_id="boss", reason="again",
                              user=django_user_model.objects.create_user("boss"))
    tasks.moderate_review(review_id)
    assert decodes.count == 1  # the reprocess matched the kept hash


def test_a_large_image_is_hashed_from_a_reduction_as_the_reference_does():
    """Over HASH_SIDE the hash is read from a 512-pixel reduction: the same picture, a few bits
    apart at most from the full-size hash, in a fraction of the memory."""
    import numpy as np
    import pdqhash

    from moderation.media.images import hamming

    large = picture(6, (2400, 1800))
    full_vector, _ = pdqhash.compute(np.asarray(large))
    full = np.packbits(full_vector.astype(np.uint8)).tobytes().hex()

    read = image_read(encoded(large), bounds=generous_bounds())

    assert hamming(read.pdq, full) <= 16 and read.quality >= 50


def test_a_bomb_behind_a_media_url_is_manual_review_that_says_why_and_never_decoded(api_client, monkeypatch):
    decodes = Decodes(monkeypatch)
    monkeypatch.setattr(media_services, "media_fetch", lambda url: (bomb_png(6300, "RGBA"), "image/png"))
    review, _ = services.review_submit(client=api_client, external_id="by-url", kind="image",
                                       media_url="https://cdn.example.test/bomb.png")

    tasks.moderate_review(review.pk)

    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW
    assert "decompression bomb" in review.decision.explanation
    assert "decompression bomb" in ModerationRequest.objects.get(review=review).media["error"]
    assert decodes.count == 0 and not ReviewMedia.objects.filter(pk=review.content_id).exists()


def test_damage_only_a_decode_finds_is_manual_review_that_says_why(http):
    """A truncated JPEG has a sound header: the request takes it, the job's decode refuses it."""
    whole = encoded(picture(1), "JPEG")
    response = submit(http, whole[:len(whole) // 2])
    assert response.status_code == 201

    tasks.moderate_review(response.json()["id"])

    review = ContentReview.objects.select_related("decision").get(pk=response.json()["id"])
    assert review.status == ReviewStatus.MANUAL_REVIEW and "cannot be decoded" in review.decision.explanation


def test_no_more_decodes_run_at_once_than_the_bound_allows():
    """Six threads decode at once (a barrier lines them up); each decode waits inside for the
    others to arrive, which only a missing bound lets them do."""
    limit, threads = 2, 6
    everyone_inside = threading.Event()

    def during(decodes):
        if decodes.active == threads:
            everyone_inside.set()
        everyone_inside.wait(timeout=0.3)

    with pytest.MonkeyPatch.context() as monkeypatch:
        decodes = Decodes(monkeypatch, during=during)
        bounds = replace(generous_bounds(), concurrency=limit)
        data = [encoded(picture(n)) for n in range(threads)]
        start = threading.Barrier(threads)
        errors = []

        def decode(n):
            start.wait()
            try:
                image_read(data[n], bounds=bounds)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        workers = [threading.Thread(target=decode, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    assert errors == []
    assert decodes.count == threads and decodes.peak == limit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads are niced alone on Linux only")
@pytest.mark.parametrize("nice", [0, 5])
def test_decodes_run_on_threads_of_their_own_niced_below_the_process(monkeypatch, nice):
    """(A web worker on the same cores then goes first: docs/benchmarks.md, "Image bombs".)"""
    seen, real = [], images._decoded_small

    def spy(data):
        thread = threading.get_native_id()
        seen.append((thread, os.getpriority(os.PRIO_PROCESS, thread)))
        return real(data)

    monkeypatch.setattr(images, "_decoded_small", spy)
    image_read(encoded(picture(1)), bounds=replace(generous_bounds(), nice=nice))

    [(thread, priority)] = seen
    assert thread != threading.get_native_id()
    assert priority == min(19, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) + nice)


def test_a_decode_slot_is_given_back_when_the_decode_fails():
    bounds = replace(generous_bounds(), concurrency=1)
    whole = encoded(picture(1), "JPEG")
    for _ in range(3):
        with pytest.raises(MediaRefused, match="cannot be decoded"):
            image_read(whole[:len(whole) // 2], bounds=bounds)
    assert image_read(encoded(picture(1)), bounds=bounds).pdq



def test_a_lone_surrogate_in_image_base64_is_a_400_not_a_500(http):
    """The field skips DRF's per-character surrogate check: base64 decoding refuses it instead."""
    body = '{"external_id": "s", "content_type": "image", "image_base64": "iVBO\\ud800RK5CYII="}'

    response = http.post(URL, body, content_type="application/json")

    assert "Not valid base64" in refusal(response)
