"""The notice-template editor of the policy admin: a preview renders the notice of a real review
with the templates as typed, publishing nothing; a template with an error is a form error; a
clean one is published as the next version."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import Content, ModerationPolicy
from moderation.transparency.notices import BUILT_IN_TEMPLATES
from moderation.transparency.reasons import statement_of_reasons
from tests.helpers import examples, decided, staff_browser

pytestmark = pytest.mark.django_db

EDITOR = "/admin/moderation/moderationpolicy/notices/"


@pytest.fixture
def supervisor(django_user_model) -> Client:
    return staff_browser(django_user_model, "sam", "supervisor")


def posted(browser, *, review: str = "", action: str = "preview", base_version: int | None = None, **templates):
    return browser.post(EDITOR, {
        "base_version": base_version or services.policy_active().version, "review": review, "notes": "",
        **{f"template_{code}": text for code, text in templates.items()}, action: "1",
    })


def preview_of(response, language: str) -> str:
    html = response.content.decode()
    row = html.split(f'id="notice-{language}"')[1].split("</tr>")[0]
    return unescape(re.search(r'class="notice-text">(.*?)</td>', row, re.S).group(1))


def errors_of(response) -> str:
    return unescape(" ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)))


def rejected_in(client, language: str, external_id: str):
    review = decided(client, "rejected")
    Content.objects.filter(pk=review.content_id).update(language=language, external_id=external_id)
    review.refresh_from_db()
    return review


def test_the_editor_opens_with_the_active_templates_and_is_linked_from_the_policies(supervisor):
    services.policy_publish_change(lambda active: {"notice_templates": {"en": "Removed: {reasons}."}})

    page = supervisor.get(EDITOR).content.decode()
    listing = supervisor.get("/admin/moderation/moderationpolicy/").content.decode()

    assert "Removed: {reasons}." in page and 'id="preview"' in page and 'id="publish"' not in page
    assert f'href="{EDITOR}"' in listing


def test_a_preview_renders_the_newest_rejected_review_in_every_language_and_publishes_nothing(supervisor, api_client):
    decided(api_client, "rejected")
    newest = rejected_in(api_client, "id", "newest")
    versions = ModerationPolicy.objects.count()

    response = posted(supervisor, en="Gone for {reasons}; appeal until {appealable_until} at {appeal_route}.")

    assert response.status_code == 200 and ModerationPolicy.objects.count() == versions
    decision = newest.decision
    stated = statement_of_reasons(decision)
    until = stated["appealable_until"][:10]
    categories = ", ".join(r["category"] for r in stated["reasons"])
    assert newest.short_id in response.content.decode()
    assert preview_of(response, "en") == (f"Gone for {categories}; appeal until {until} at "
                                          f"/api/v1/reviews/{newest.pk}/appeals/.")
    # The Indonesian author reads the built-in Indonesian text, as the API would send it.
    assert preview_of(response, "id") == stated["notice"]["text"]
    assert "the review's author reads this one" in response.content.decode().split('id="notice-id"')[1].split("</tr>")[0]
    assert 'id="publish"' in response.content.decode()


def test_a_preview_takes_a_review_by_its_short_id_or_its_whole_id(supervisor, api_client):
    first, second = rejected_in(api_client, "en", "first"), rejected_in(api_client, "en", "second")

    by_short = posted(supervisor, review=first.short_id, en="A: {appeal_route}")
    by_whole = posted(supervisor, review=str(second.pk), en="A: {appeal_route}")

    assert preview_of(by_short, "en") == f"A: /api/v1/reviews/{first.pk}/appeals/"
    assert preview_of(by_whole, "en") == f"A: /api/v1/reviews/{second.pk}/appeals/"


@pytest.mark.parametrize("term", ["deadbeef", "not-an-id", "00000000-0000-0000-0000-000000000000", "\u202E\U0001F600"])
def test_a_review_that_does_not_exist_is_a_form_error(supervisor, api_client, term):
    decided(api_client, "rejected")
    response = posted(supervisor, review=term, en="ok {reasons}")
    assert response.status_code == 200 and "no review has the id" in errors_of(response)
    assert 'id="notice-preview"' not in response.content.decode()


def test_with_no_rejected_review_the_editor_asks_for_one(supervisor, api_client):
    decided(api_client, "approved")
    response = posted(supervisor, en="ok {reasons}")
    assert "no review is rejected yet" in errors_of(response)


def test_an_approved_review_is_previewed_as_a_rejection_and_says_so(supervisor, api_client):
    review = decided(api_client, "approved")
    response = posted(supervisor, review=review.short_id, en="Reasons: {reasons}")
    assert preview_of(response, "en") == "Reasons: -"
    assert "its author is sent no notice" in unescape(response.content.decode())


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("Appeal by {deadline}", "notice_templates.en: unknown placeholders {deadline}"),
        ("Appeal until {appealable_until", "notice_templates.en: the brace at character 14 has no pair"),
        ("Reasons: reasons}", "notice_templates.en: the brace at character 17 has no pair"),
        ("{{reasons}}", "notice_templates.en: the brace at character 1 has no pair"),
        ("{}", "notice_templates.en: unknown placeholders {}"),
    ],
)
def test_a_template_error_is_a_form_error_on_its_field_and_nothing_is_published(supervisor, api_client, template,
                                                                                 error):
    decided(api_client, "rejected")
    versions = ModerationPolicy.objects.count()

    for action in ("preview", "publish"):
        response = posted(supervisor, action=action, en=template)
        assert response.status_code == 200
        assert error in errors_of(response) and 'id="notice-preview"' not in response.content.decode()
    assert ModerationPolicy.objects.count() == versions


def test_an_empty_template_previews_the_built_in_text(supervisor, api_client):
    decided(api_client, "rejected")
    response = posted(supervisor, en="  \n ")
    assert preview_of(response, "en").startswith(BUILT_IN_TEMPLATES["en"].split("{")[0])


def test_publishing_makes_the_next_version_with_the_templates(supervisor, api_client):
    decided(api_client, "rejected")
    active = services.policy_active()

    response = posted(supervisor, action="publish", en="Removed: {reasons}.", id="Dihapus: {reasons}.")

    assert response.status_code == 302
    published = services.policy_active()
    assert published.version == active.version + 1 and published.created_by.username == "sam"
    assert published.notice_templates == {"en": "Removed: {reasons}.", "id": "Dihapus: {reasons}."}
    assert services.policy_fields(published) | {"notice_templates": {}} == \
        services.policy_fields(active) | {"notice_templates": {}}


def test_publishing_from_a_stale_page_is_refused_and_shows_the_new_version(supervisor, api_client):
    decided(api_client, "rejected")
    loaded = services.policy_active().version
    services.policy_publish_change(lambda active: {"report_threshold": 5})

    response = posted(supervisor, action="publish", base_version=loaded, en="Removed: {reasons}.")

    assert response.status_code == 200 and "was published since this page was loaded" in errors_of(response)
    assert services.policy_active().notice_templates == {}


def test_a_moderator_or_an_auditor_cannot_open_the_editor(django_user_model):
    for role in ("moderator", "auditor"):
        browser = staff_browser(django_user_model, f"{role}-1", role)
        assert browser.get(EDITOR).status_code == 403
        assert browser.post(EDITOR, {"preview": "1"}).status_code == 403


@pytest.fixture
def rejected(api_client):
    return decided(api_client, "rejected")


def test_a_template_is_escaped_in_the_form_and_in_the_preview(supervisor, rejected):
    hostile = '<script>alert("n")</script> {reasons} </textarea><b>x</b>'

    html = posted(supervisor, en=hostile).content.decode()

    assert '<script>alert("n")</script>' not in html and "</textarea><b>x</b>" not in html
    assert "&lt;script&gt;alert(&quot;n&quot;)&lt;/script&gt;" in html.split('id="notice-preview"')[1]


@given(template=st.text(max_size=300), language=st.sampled_from(["en", "id"]), review=st.text(max_size=40))
@example(template="{category.__class__} {reasons[0]} {0} {} {{reasons}} {reasons", language="en", review="")
@example(template="\u202E{reasons}\u200D\U0001F600\x00", language="id", review="\x00")
@example(template="x" * 2001, language="en", review="")
@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_any_unicode_template_or_review_term_previews_or_explains_and_never_publishes(supervisor, rejected,
                                                                                     template, language, review):
    versions = ModerationPolicy.objects.count()

    response = posted(supervisor, review=review, **{language: template})

    assert response.status_code == 200
    assert ModerationPolicy.objects.count() == versions
    # Either the notice is shown, or the form says what is wrong: never a silent page.
    assert 'id="notice-preview"' in response.content.decode() or errors_of(response)
