"""The moderator's viewer: a review's image or audio served from our own copy to staff holding
`view_media_bytes` only, blurred and grey on the review page, a never_display image shown to
nobody, and small blurred thumbnails in the list and the queues."""

from __future__ import annotations

import io
import itertools
import re

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st
from PIL import Image, ImageFile

from moderation import services, tasks
from moderation.media.images import MIME_TYPES
from moderation.models import (
    ContentReview,
    HashBank,
    HashBankEntry,
    MediaPreference,
    MediaRemoval,
    ReviewMedia,
    ReviewQueue,
)
from moderation.templatetags.moderation_rules import highlight_terms
from tests.helpers import examples, staff_browser
from tests.helpers_media import encoded, image_header, picture

LIST = "/admin/moderation/contentreview/"
QUEUES = f"{LIST}queues/"


def page_of(review) -> str:
    return f"{LIST}{review.pk}/timeline/"


def media_of(review, size: str = "") -> str:
    return f"{LIST}{review.pk}/media/" + (f"?size={size}" if size else "")


def image_review(api_client, seed: int = 1, *, external_id: str | None = None, fmt: str = "PNG",
                 caption: str = "") -> ContentReview:
    """An uploaded image, moderated by the local provider (which judges no image): it waits in
    the Images queue, its bytes stored and hashed."""
    data = encoded(picture(seed), fmt)
    review, _ = services.review_submit(
        client=api_client, external_id=external_id or f"img-{seed}", kind="image", text=caption,
        image=(data, image_header(data)),
    )
    tasks.moderate_review(review.pk)
    return ContentReview.objects.select_related("content", "decision").get(pk=review.pk)


def bank_of(seed: int, *, name: str = "known-bad", never_display: bool = False, action: str = "manual_review") -> None:
    """A hash bank holding the PDQ hash of `picture(seed)`, published in a new policy version.
    (The records are written here as `hash_banks import --publish` writes them.)"""
    from moderation.media.images import pdq_hash

    bank = HashBank.objects.create(name=name)
    entry = HashBankEntry.objects.create(bank=bank, pdq=pdq_hash(picture(seed))[0], label="test entry")
    spec = {"name": name, "category": "csam" if never_display else "violence", "action": action,
            "never_display": never_display, "through": entry.pk}
    services.policy_publish_change(lambda active: {"hash_banks": [*active.hash_banks, spec]}, notes="a bank")


@pytest.fixture(autouse=True)
def local_provider(settings):
    settings.MODERATION_PROVIDER = "local"


@pytest.fixture
def viewer(db, django_user_model):
    """A moderator: the role sees the media of reviews (moderation/roles.py)."""
    browser = staff_browser(django_user_model, "mia", "moderator")
    assert browser.user.has_perm("moderation.view_media_bytes")
    return browser


@pytest.fixture
def blind(db, django_user_model):
    """An auditor: reads every decision, never the images' bytes."""
    browser = staff_browser(django_user_model, "bo", "auditor")
    assert not browser.user.has_perm("moderation.view_media_bytes")
    return browser


def content_panel(html: str) -> str:
    return html.split('class="content-panel" id="content">')[1].split('class="review-summary"')[0]


def img_sources(html: str) -> list[str]:
    return re.findall(r'<img[^>]*\ssrc="([^"]*)"', html)


@pytest.mark.django_db
class TestTheMediaView:
    def test_a_user_without_the_permission_is_refused_and_one_with_it_gets_the_stored_bytes(
        self, viewer, blind, api_client
    ):
        review = image_review(api_client)
        assert blind.get(media_of(review)).status_code == 403
        assert blind.get(media_of(review, "thumb")).status_code == 403
        response = viewer.get(media_of(review))
        assert response.status_code == 200
        assert response.content == bytes(review.content.media.data) and response["Content-Type"] == "image/png"

    def test_the_bytes_are_never_kept_sniffed_or_run(self, viewer, api_client):
        response = viewer.get(media_of(image_review(api_client)))
        assert "no-store" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Content-Disposition"] == "inline"
        assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"

    def test_a_logged_out_visitor_is_sent_to_the_login_page(self, client, api_client):
        response = client.get(media_of(image_review(api_client)))
        assert response.status_code == 302 and "/admin/login/" in response["Location"]

    def test_an_image_matched_in_a_never_display_bank_is_served_to_nobody(self, viewer, api_client):
        bank_of(3, never_display=True, action="reject")
        review = image_review(api_client, 3)
        assert review.content.media.never_display and review.content.media.data is not None
        assert viewer.get(media_of(review)).status_code == 404
        assert viewer.get(media_of(review, "thumb")).status_code == 404

    def test_removed_bytes_are_not_found_and_an_unknown_review_neither(self, viewer, api_client):
        review = image_review(api_client)
        # What retention does MEDIA_RETENTION_DAYS after the review is final (moderation/privacy/retention.py).
        ReviewMedia.objects.filter(pk=review.content_id).update(data=None, removed_at=timezone.now(),
                                                                  removed_why=MediaRemoval.RETENTION)
        assert viewer.get(media_of(review)).status_code == 404
        assert viewer.get(f"{LIST}0190e0a8-0000-7000-8000-000000000000/media/").status_code == 404

    def test_the_thumbnail_is_a_small_jpeg_and_not_kept_either(self, viewer, api_client):
        response = viewer.get(media_of(image_review(api_client)))  # 320x240
        thumb = viewer.get(media_of(image_review(api_client, 2, external_id="other"), "thumb"))
        assert thumb.status_code == 200 and thumb["Content-Type"] == "image/jpeg" and "no-store" in thumb["Cache-Control"]
        image = Image.open(io.BytesIO(thumb.content))
        assert image.format == "JPEG" and max(image.size) == 96 and image.size == (96, 72)
        assert len(thumb.content) < len(response.content)

    def test_an_unknown_size_is_a_bad_request(self, viewer, api_client):
        assert viewer.get(media_of(image_review(api_client), "huge")).status_code == 400

    def test_the_thumbnail_is_the_one_the_job_kept_and_no_page_decodes_an_image(self, viewer, api_client, monkeypatch):
        review = image_review(api_client)
        kept = bytes(ReviewMedia.objects.get(pk=review.content_id).thumbnail)

        def decoded(*args, **kwargs):
            raise AssertionError("a page decoded an image")

        monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
        monkeypatch.setattr(Image, "open", decoded)
        thumb = viewer.get(media_of(review, "thumb"))
        assert thumb.status_code == 200 and thumb.content == kept
        assert viewer.get(media_of(review)).status_code == 200  # the stored bytes are served as they are
        assert 'class="media-thumb"' in viewer.get(LIST).content.decode()
        assert viewer.get(page_of(review)).status_code == 200

    def test_an_image_the_job_has_not_read_yet_has_no_thumbnail(self, viewer, api_client):
        data = encoded(picture(5))
        review, _ = services.review_submit(client=api_client, external_id="unread", kind="image",
                                           image=(data, image_header(data)))
        assert viewer.get(media_of(review, "thumb")).status_code == 404
        assert viewer.get(media_of(review)).status_code == 200
        assert f'src="{media_of(review, "thumb")}"' not in viewer.get(LIST).content.decode()


@pytest.mark.django_db
class TestTheReviewPage:
    def test_the_image_is_shown_blurred_and_grey_from_our_own_copy(self, viewer, api_client):
        review = image_review(api_client)
        response = viewer.get(page_of(review))
        html = response.content.decode()
        assert img_sources(content_panel(html)) == [media_of(review)]
        assert 'class="media-frame blurred grey"' in html and "filter: blur(24px) grayscale(1)" in html
        assert 'id="media-reveal"' in html and 'id="media-colour"' in html and 'id="media-preference"' in html
        assert "media-src 'self'" in response["Content-Security-Policy"]

    def test_the_keys_are_documented_beside_the_decide_panel_keys(self, viewer, api_client):
        html = viewer.get(page_of(image_review(api_client))).content.decode()
        shortcuts = html.split('id="shortcuts"')[1].split("</p>")[0]
        assert "<kbd>v</kbd> reveal the image" in shortcuts and "<kbd>c</kbd> its colour" in shortcuts
        assert "<kbd>a</kbd> approve" in shortcuts  # the keys already there stay

    def test_a_never_display_image_has_no_img_at_all_and_says_why(self, viewer, api_client):
        bank_of(3, never_display=True, action="reject")
        review = image_review(api_client, 3)
        html = viewer.get(page_of(review)).content.decode()
        assert "<img" not in content_panel(html)
        assert media_of(review) not in html
        assert "This image matched a never-display hash bank; it is never shown." in html
        matches = html.split('id="bank-matches"')[1].split("</ul>")[0]
        assert "hash bank <code>known-bad</code>, distance 0" in matches

    def test_a_bank_match_is_named_with_its_distance_and_marks_no_text(self, viewer, api_client):
        bank_of(4)
        review = image_review(api_client, 4)
        assert review.decision.rule_matches[0]["start"] is None
        html = viewer.get(page_of(review)).content.decode()
        assert "hash bank <code>known-bad</code>, distance 0" in html and 'class="media-frame blurred grey"' in html

    def test_a_bank_match_is_not_listed_as_a_watched_term(self, viewer, api_client):
        bank_of(4)
        review = image_review(api_client, 4, caption="look at my holiday snap")
        html = viewer.get(page_of(review)).content.decode()
        assert 'id="rule-matches"' in html and 'id="matched-terms"' not in html
        assert "hash bank <code>known-bad</code>, distance 0" in html

    def test_a_user_without_the_permission_sees_no_image_and_is_told_why(self, blind, api_client):
        review = image_review(api_client)
        html = blind.get(page_of(review)).content.decode()
        assert media_of(review) not in html and "<img" not in content_panel(html)
        assert 'id="media-forbidden"' in html

    def test_removed_bytes_are_said_not_shown(self, viewer, api_client):
        review = image_review(api_client)
        ReviewMedia.objects.filter(pk=review.content_id).update(data=None, removed_at=timezone.now(),
                                                                  removed_why=MediaRemoval.ERASURE)
        html = viewer.get(page_of(review)).content.decode()
        assert 'id="media-removed"' in html and "erasure" in html and media_of(review) not in html

    def test_the_clients_media_url_is_text_never_a_source_or_a_link(self, viewer, api_client):
        url = "https://tracker.example.net/pixel.gif"
        review, _ = services.review_submit(client=api_client, external_id="u1", kind="image", media_url=url)
        html = viewer.get(page_of(review)).content.decode()
        assert url in html and f'src="{url}"' not in html and f'href="{url}"' not in html
        assert url not in img_sources(html) and 'id="media-missing"' in html

    def test_audio_plays_only_when_asked_from_our_copy(self, viewer, api_client):
        review, _ = services.review_submit(client=api_client, external_id="a1", kind="audio",
                                           media_url="https://cdn.example.org/voice.ogg")
        # The job's fetch (moderation/services/media.py) stores the bytes it read, as here.
        ReviewMedia.objects.create(content=review.content, source="url", data=b"OggS\x00fake", mime="audio/ogg",
                                   byte_size=9)
        html = viewer.get(page_of(review)).content.decode()
        assert f'<audio controls preload="none" src="{media_of(review)}" id="media-audio"></audio>' in html
        assert "autoplay" not in html
        response = viewer.get(media_of(review))
        assert response.status_code == 200 and response["Content-Type"] == "audio/ogg"
        assert viewer.get(media_of(review, "thumb")).status_code == 404


@pytest.mark.django_db
class TestThePreference:
    def test_a_moderator_saves_their_own_default_and_the_page_follows_it(self, viewer, blind, api_client):
        review = image_review(api_client)
        response = viewer.post(f"{LIST}{review.pk}/media-preference/", {"reveal": "on"})
        assert response.status_code == 302 and response["Location"] == page_of(review)
        assert MediaPreference.objects.get(user=viewer.user).reveal is True
        assert not MediaPreference.objects.filter(user=blind.user).exists()
        html = viewer.get(page_of(review)).content.decode()
        assert 'class="media-frame grey"' in html and 'name="reveal" checked' in html

        viewer.post(f"{LIST}{review.pk}/media-preference/", {"colour": "on"})
        preference = MediaPreference.objects.get(user=viewer.user)
        assert (preference.reveal, preference.colour) == (False, True)
        assert 'class="media-frame blurred"' in viewer.get(page_of(review)).content.decode()

    def test_saving_needs_a_post_and_the_permission(self, viewer, blind, api_client):
        review = image_review(api_client)
        assert viewer.get(f"{LIST}{review.pk}/media-preference/").status_code == 403
        assert blind.post(f"{LIST}{review.pk}/media-preference/", {"reveal": "on"}).status_code == 403
        assert not MediaPreference.objects.exists()


@pytest.mark.django_db
class TestTheListAndTheQueues:
    def test_image_reviews_get_a_blurred_thumbnail_and_a_never_display_one_none(self, viewer, api_client):
        bank_of(3, never_display=True)
        shown, hidden = image_review(api_client, 1), image_review(api_client, 3)
        for html in (viewer.get(LIST).content.decode(), viewer.get(f"{QUEUES}?queue={ReviewQueue.IMAGES}").content.decode()):
            assert f'<img class="media-thumb" src="{media_of(shown, "thumb")}"' in html
            assert str(hidden.pk) + "/media/" not in html
            assert 'class="media-thumb"' in html and ".media-thumb {" in html

    def test_a_user_without_the_permission_gets_no_thumbnail(self, blind, api_client):
        image_review(api_client)
        assert 'class="media-thumb"' not in blind.get(LIST).content.decode()

    def test_the_thumbnails_cost_no_query_per_row(self, viewer, api_client, django_assert_max_num_queries):
        image_review(api_client, 1)
        with django_assert_max_num_queries(40) as few:
            viewer.get(LIST)
        for seed in range(2, 7):
            image_review(api_client, seed)
        with django_assert_max_num_queries(len(few.captured_queries)):
            html = viewer.get(LIST).content.decode()
        assert html.count('class="media-thumb"') == 6
        with django_assert_max_num_queries(40) as few:
            viewer.get(f"{QUEUES}?queue={ReviewQueue.IMAGES}")
        image_review(api_client, 7)
        with django_assert_max_num_queries(len(few.captured_queries)):
            assert viewer.get(f"{QUEUES}?queue={ReviewQueue.IMAGES}").content.decode().count('class="media-thumb"') == 7


def test_highlighting_skips_a_match_without_a_span_and_marks_the_others():
    term = {"rule": "insults", "term": "bodoh", "action": "reject", "start": 6, "end": 11}
    bank = {"rule": "bank:known-bad", "term": "", "action": "reject", "start": None, "end": None, "distance": 3}
    assert str(highlight_terms("dasar bodoh kamu", [bank, term, bank])) == (
        'dasar <mark class="rule-match rule-reject" title="insults: bodoh">bodoh</mark> kamu')
    assert str(highlight_terms("no words", [bank])) == "no words"


# Every page that shows media renders whatever a client sent: any Unicode in the external id,
# the media URL and a caption, and never puts the URL in a source.
WEIRD = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
INJECTION = '"><img src=x onerror=alert(1)>'
SERIAL = itertools.count()


@pytest.mark.django_db
@given(external=WEIRD, path=WEIRD, caption=WEIRD)
@example(external=INJECTION, path=INJECTION, caption=INJECTION)
@example(external="\u202eevil\u202c \U0001F468\u200d\U0001F469", path="\u200b\u0301", caption="")
@hypothesis_settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_pages_with_media_render_any_unicode_the_client_sent(viewer, api_client, external, path, caption):
    url = f"https://cdn.example.org/{path}"
    review, _ = services.review_submit(client=api_client, external_id=f"{next(SERIAL)}-{external}", kind="image",
                                       media_url=url, text=caption)
    # What the job stores once it fetched the URL (moderation/services/media.py).
    ReviewMedia.objects.create(content=review.content, source="url", data=encoded(picture(1), "JPEG"),
                               mime=MIME_TYPES["JPEG"], width=320, height=240)
    for page in (page_of(review), LIST, QUEUES):
        response = viewer.get(page, {"q": external} if page == LIST else {})
        assert response.status_code == 200, page
        sources = img_sources(response.content.decode())
        assert all("cdn.example.org" not in src and src != "x" for src in sources), sources
