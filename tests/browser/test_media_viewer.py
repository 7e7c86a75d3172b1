"""The moderator's viewer in a real browser: an image arrives blurred and grey, a key reveals it,
another shows its colour, and a never_display image is not on the page at all. With
UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/ (shown in the README)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff  # noqa: F401  (shots: a fixture)
from tests.moderation.test_admin_media import bank_of, image_review

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
IMAGE = "#media-image img"
FILTER = "element => getComputedStyle(element).filter"
LOADED = "element => element.complete && element.naturalWidth > 0"


@pytest.fixture(autouse=True)
def local_provider(settings):
    settings.MODERATION_PROVIDER = "local"  # judges no image: they wait in the Images queue


def test_an_image_is_blurred_and_grey_until_the_moderator_reveals_it_and_a_never_display_one_is_absent(
    live_server, api_client, django_user_model, shots  # noqa: F811
):
    bank_of(3, never_display=True, action="reject")
    shown, hidden = image_review(api_client, 1), image_review(api_client, 3)
    mia = staff(django_user_model, "mia", "moderator")
    mia.user_permissions.add(Permission.objects.get(codename="view_media_bytes"))
    page_url = f"{live_server.url}/admin/moderation/contentreview/{{}}/timeline/"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/queues/?queue=images")
        page.wait_for_selector("img.media-thumb")
        page.wait_for_function(f"() => [...document.querySelectorAll('img.media-thumb')].every({LOADED})")
        thumbs = page.eval_on_selector_all("img.media-thumb", f"images => images.map({FILTER})")

        page.goto(page_url.format(shown.pk))
        page.wait_for_function(f"() => ({LOADED})(document.querySelector('{IMAGE}'))")  # our copy, under the page's CSP
        at_first = page.eval_on_selector(IMAGE, FILTER)
        page.screenshot(path=str(shots / "image-blurred.png"))
        page.focus("#decide-form textarea[name=reason]")
        page.keyboard.type("v")          # a letter in a field types; no shortcut fires
        while_typing = page.eval_on_selector(IMAGE, FILTER)
        page.keyboard.press("Escape")    # leave the field
        page.keyboard.press("v")         # reveal
        revealed = page.eval_on_selector(IMAGE, FILTER)
        page.keyboard.press("c")         # colour
        coloured = page.eval_on_selector(IMAGE, FILTER)
        pressed = page.get_attribute("#media-reveal", "aria-pressed"), page.get_attribute("#media-colour", "aria-pressed")
        page.locator("#media-image").screenshot(path=str(shots / "image-revealed.png"))
        page.click("#media-reveal")      # and blurred again, by click
        clicked = page.eval_on_selector(IMAGE, FILTER)

        page.goto(page_url.format(hidden.pk))
        page.wait_for_selector("#media-never-display")
        hidden_images = page.locator(".content-panel img").count()
        notice = page.inner_text("#media-never-display")
        anywhere = page.locator(f"img[src*='{hidden.pk}']").count()

    assert len(thumbs) == 1 and "blur" in thumbs[0] and "grayscale" in thumbs[0]  # the never_display one has none
    assert "blur" in at_first and "grayscale" in at_first
    assert while_typing == at_first
    assert "blur" not in revealed and "grayscale" in revealed
    assert coloured == "none" and pressed == ("true", "true")
    assert "blur" in clicked and "grayscale" not in clicked
    assert hidden_images == 0 and anywhere == 0
    assert notice == "This image matched a never-display hash bank; it is never shown."
