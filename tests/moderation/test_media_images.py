"""Images end to end (docs/design.md, "Images and hash banks"): intake refuses what is not an image
(a 400 saying why, nothing written), the job hashes with PDQ, and the published banks decide:
an exact copy and a resized, recompressed copy match, an unrelated image does not, and a hash of
low quality never matches."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from moderation import tasks
from moderation.media.images import MIN_QUALITY, BankIndex, MediaRefused, hamming, image_inspect, image_read
from moderation.models import Content, ContentReview, ModerationRequest, ReviewMedia, ReviewQueue, ReviewStatus
from moderation.media.invariants import media_violations
from moderation.transparency.reasons import statement_of_reasons
from tests.helpers_media import (
    b64,
    bank_publish,
    bomb_png,
    encoded,
    flat,
    generous_bounds,
    image_hash,
    picture,
    resized_recompressed,
)
from tests.helpers import examples

URL = "/api/v1/reviews/"


@pytest.fixture(autouse=True)
def local_provider(settings):
    """The local model, which judges no images: the banks and image_fallback decide."""
    settings.MODERATION_PROVIDER = "local"



def submit_image(http, data: bytes, external_id: str = "img"):
    return http.post(URL, {"external_id": external_id, "content_type": "image", "image_base64": b64(data)},
                     format="json")


def judged(http, data: bytes, external_id: str = "img") -> ContentReview:
    response = submit_image(http, data, external_id)
    assert response.status_code == 201, response.content
    review_id = response.json()["id"]
    tasks.moderate_review(review_id)
    return ContentReview.objects.select_related("decision__policy", "content__media").get(pk=review_id)


# --- decoding -------------------------------------------------------------------------------------


def test_the_hex_form_is_threatexchanges_bits_most_significant_first():
    """pdqhash's vector, as python-threatexchange's PDQ helper writes it: the bits joined in the
    vector's order and read as one binary number, in 64 lower-case hex digits."""
    import numpy as np
    import pdqhash

    image = picture(3)
    vector, quality = pdqhash.compute(np.asarray(image))
    reference = "%0*x" % (64, int("".join(str(int(b)) for b in vector), 2))  # noqa: UP031 - as threatexchange writes it
    assert image_hash(encoded(image)) == (reference, quality)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP", "BMP"])
def test_each_supported_format_decodes_to_its_type(fmt):
    read = image_read(encoded(picture(1), fmt), bounds=generous_bounds())
    assert (read.header.width, read.header.height) == (320, 240) and read.quality >= MIN_QUALITY
    assert read.header.mime == {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp",
                            "BMP": "image/bmp"}[fmt]


def test_a_decompression_bomb_is_refused_before_its_pixels_are_decoded():
    with pytest.raises(MediaRefused, match="decompression bomb"):
        image_inspect(bomb_png(), bounds=replace(generous_bounds(), max_pixels=40_000_000))


@pytest.mark.parametrize("data, why", [
    (b"", "empty"),
    (b"GIF89a not really", "not an image"),
    (b"%PDF-1.7\n" + b"x" * 100, "not an image"),
    (encoded(picture(1), "PNG")[:400], "cannot be decoded"),  # a truncated file: its header is fine
    (encoded(picture(1), "JPEG")[:400], "cannot be decoded"),  # (a JPEG's damage shows only when decoded)
])
def test_bytes_that_are_not_a_whole_image_are_refused_by_decoding_not_by_the_header(data, why):
    with pytest.raises(MediaRefused, match=why):
        image_read(data, bounds=generous_bounds())


@hsettings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_any_bytes_are_an_image_or_a_refusal_never_a_crash(data):
    try:
        image_read(data, bounds=replace(generous_bounds(), max_pixels=10**6))
    except MediaRefused:
        pass


# --- intake ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("image_base64, why", [
    ("not base64!", "base64"),
    (base64.b64encode(b"just some text, not an image").decode(), "not an image"),
    (b64(encoded(picture(1))[:300]), "cannot be decoded"),
])
def test_an_image_that_does_not_decode_is_a_400_that_says_why_and_writes_nothing(http, image_base64, why):
    response = http.post(URL, {"external_id": "x", "content_type": "image", "image_base64": image_base64},
                         format="json")

    assert response.status_code == 400, response.content
    assert why in " ".join(response.json()["fields"]["image_base64"])
    assert not Content.objects.exists() and not ReviewMedia.objects.exists()


def test_a_decompression_bomb_is_a_400(http):
    response = submit_image(http, bomb_png())

    assert response.status_code == 400
    assert "decompression bomb" in " ".join(response.json()["fields"]["image_base64"])
    assert not Content.objects.exists()


def test_an_image_over_media_max_bytes_is_refused(http, settings):
    settings.MEDIA_MAX_BYTES = 1000
    response = submit_image(http, encoded(picture(1)))

    assert response.status_code == 400
    assert "larger than 1000 bytes" in " ".join(response.json()["fields"]["image_base64"])


def test_image_base64_and_media_url_together_are_refused(http):
    response = http.post(URL, {"external_id": "x", "content_type": "image", "image_base64": b64(encoded(picture(1))),
                               "media_url": "https://cdn.example/a.png"}, format="json")
    assert response.status_code == 400 and "image_base64" in response.json()["fields"]


def test_image_base64_on_text_content_is_refused(http):
    response = http.post(URL, {"external_id": "x", "content_type": "text", "text": "hi",
                               "image_base64": b64(encoded(picture(1)))}, format="json")
    assert response.status_code == 400 and "image_base64" in response.json()["fields"]


def test_the_bytes_are_stored_with_the_content_and_hashed_by_the_job_not_the_request(http):
    data = encoded(picture(2), "JPEG", quality=90)
    response = submit_image(http, data)
    media = ReviewMedia.objects.get(pk=Content.objects.get().pk)
    assert bytes(media.data) == data and media.mime == "image/jpeg" and (media.width, media.height) == (320, 240)
    assert media.pdq == "" and media.pdq_quality is None  # not in the request

    tasks.moderate_review(response.json()["id"])

    media.refresh_from_db()
    assert (media.pdq, media.pdq_quality) == image_hash(data)


# --- banks ----------------------------------------------------------------------------------------


def test_an_exact_copy_matches_the_bank_and_the_reason_names_it_and_the_distance(http):
    data = encoded(picture(7))
    policy = bank_publish("known-bad", [image_hash(data)[0]], category="sexual", action="reject")

    review = judged(http, data)

    assert review.status == ReviewStatus.REJECTED and review.decision.policy == policy
    body = statement_of_reasons(review.decision)
    assert body["reasons"] == [{"category": "sexual", "score": None, "rule": "bank:known-bad", "distance": 0}]
    assert body["policy_version"] == policy.version
    assert media_violations([review.pk]) == []


def test_a_resized_recompressed_copy_matches_within_pdq_distance(http):
    original = picture(8)
    policy = bank_publish("known-bad", [image_hash(encoded(original))[0]], action="manual_review")
    copy = resized_recompressed(original, scale=0.5, quality=50)
    distance = hamming(image_hash(copy)[0], image_hash(encoded(original))[0])
    assert 0 < distance <= policy.pdq_distance  # a different file, a near hash

    review = judged(http, copy)

    assert review.status == ReviewStatus.MANUAL_REVIEW
    (reason,) = statement_of_reasons(review.decision)["reasons"]
    assert reason["rule"] == "bank:known-bad" and reason["distance"] == distance
    assert media_violations([review.pk]) == []


def test_an_unrelated_image_does_not_match_and_takes_the_image_fallback(http):
    bank_publish("known-bad", [image_hash(encoded(picture(9)))[0]])

    review = judged(http, encoded(picture(10)))

    assert review.status == ReviewStatus.MANUAL_REVIEW and review.queue == ReviewQueue.IMAGES
    assert statement_of_reasons(review.decision)["reasons"] == []
    assert "image_fallback" in review.decision.explanation
    assert media_violations([review.pk]) == []


def test_the_policy_may_approve_what_no_bank_matched(http):
    from moderation import services

    services.policy_publish_change(lambda active: {"image_fallback": "approved"})

    assert judged(http, encoded(picture(11))).status == ReviewStatus.APPROVED


def test_a_low_quality_hash_never_matches_even_its_own_entry(http):
    data = encoded(flat())
    pdq, quality = image_hash(data)
    assert quality < MIN_QUALITY
    bank_publish("flat", [pdq])

    review = judged(http, data)

    assert review.status == ReviewStatus.MANUAL_REVIEW  # the fallback: nothing matched
    assert statement_of_reasons(review.decision)["reasons"] == []
    assert f"quality is {quality}" in review.decision.explanation
    assert media_violations([review.pk]) == []


def test_the_strictest_bank_wins(http):
    data = encoded(picture(12))
    pdq = image_hash(data)[0]
    bank_publish("watch", [pdq], category="violence", action="manual_review")
    bank_publish("csam", [pdq], category="sexual", action="reject", never_display=True)

    review = judged(http, data)

    assert review.status == ReviewStatus.REJECTED
    assert {r["rule"] for r in statement_of_reasons(review.decision)["reasons"]} == {"bank:watch", "bank:csam"}
    assert review.content.media.never_display  # hidden from every screen from now on
    assert ModerationRequest.objects.get(review=review).media["never_display"] is True


def test_a_version_published_before_an_import_does_not_take_its_entries(http):
    """Banks belong to the version: entries added after a version's `through` are not its."""
    from moderation.models import HashBank, HashBankEntry

    first = encoded(picture(13))
    bank_publish("known-bad", [image_hash(first)[0]])
    later = encoded(picture(14))
    HashBankEntry.objects.create(bank=HashBank.objects.get(name="known-bad"), pdq=image_hash(later)[0])  # a draft

    assert judged(http, later, "later").status == ReviewStatus.MANUAL_REVIEW  # not matched: not published
    assert judged(http, first, "first").status == ReviewStatus.REJECTED


def test_the_checker_finds_a_decision_whose_matches_are_not_its_versions(http):
    data = encoded(picture(15))
    bank_publish("known-bad", [image_hash(data)[0]])
    review = judged(http, data)
    decision = review.decision
    decision.rule_matches = [{**decision.rule_matches[0], "distance": 5}]
    decision.save(update_fields=["rule_matches"])
    ModerationRequest.objects.filter(pk=decision.request_id).update(media={"matches": decision.rule_matches})

    (problem,) = media_violations([review.pk])
    assert "distance 5 stated, 0 real" in problem


def test_the_checker_finds_a_match_the_version_should_have_made(http):
    data = encoded(picture(16))
    review = judged(http, data)  # no bank yet: the fallback
    policy = bank_publish("known-bad", [image_hash(data)[0]])
    ModerationRequest.objects.filter(pk=review.decision.request_id).update(policy=policy)
    review.decision.__class__.objects.filter(pk=review.decision.pk).update(policy=policy)

    (problem,) = media_violations([review.pk])
    assert "within 0 bits but did not match" in problem


def test_the_index_matches_per_bank_nearest_first():
    base = "f" * 64
    near = "e" + "f" * 63  # 1 bit off
    index = BankIndex.build({"a": ([1, 2], [base, near]), "b": ([3], ["0" * 64])})

    found = index.match(base, max_distance=31, quality=100)

    assert [(m.bank, m.entry_id, m.distance) for m in found] == [("a", 1, 0), ("a", 2, 1)]
    assert index.match(base, max_distance=31, quality=MIN_QUALITY - 1) == []


def test_time_in_the_images_queue_is_counted_under_images(http, django_user_model):
    from moderation import services
    from moderation.observability.workplace import time_in_review_queue

    review = judged(http, encoded(picture(17)))
    assert review.queue == ReviewQueue.IMAGES
    services.review_override(review_id=review.pk, label="approved", reason="a cat",
                             moderator=django_user_model.objects.create_user("mod"))

    assert [(q.queue, q.left) for q in time_in_review_queue()] == [("images", 1)]


def test_an_image_whose_bytes_retention_removed_is_still_matched_by_its_hash_on_reprocess(http, django_user_model):
    from django.utils import timezone

    from moderation import services

    data = encoded(picture(18))
    review = judged(http, data)  # no bank yet: a human
    ReviewMedia.objects.filter(pk=review.content_id).update(data=None, removed_at=timezone.now(), removed_why="retention")
    bank_publish("known-bad", [image_hash(data)[0]])
    services.review_reprocess(review_id=review.pk, actor="moderator", actor_id="boss", reason="new bank",
                              user=django_user_model.objects.create_user("boss"))
    tasks.moderate_review(review.pk)

    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    assert media_violations([review.pk]) == []


def test_a_web_process_validating_an_image_imports_neither_numpy_nor_pdqhash():
    """The request decodes (Pillow) but never hashes: a web worker need not hold numpy or pdqhash."""
    import subprocess
    import sys

    code = ("import sys, django; django.setup(); import config.urls; "
            "from moderation.api.serializers import ReviewSubmitSerializer; from tests.helpers_media import b64, encoded, picture; "
            "s = ReviewSubmitSerializer(data={'external_id': 'x', 'content_type': 'image', 'image_base64': b64(encoded(picture(1)))}); "
            "print(s.is_valid(), sorted(m for m in ('numpy', 'pdqhash') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "config.settings"})
    assert run.stdout.strip().splitlines()[-1] == "True []"
