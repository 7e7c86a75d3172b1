"""Reports and appeals in the moderator's workplace: shown on the review page and its timeline;
the moderator who made an appealed decision is told why they may not decide the appeal."""

from __future__ import annotations

import re

import pytest

from moderation import services
from tests.helpers import decided, staff_browser
from tests.moderation.test_workplace import LIST, act, messages_of, timeline

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


def test_the_review_page_shows_the_reports_and_the_appeal(moderator, api_client):
    review = decided(api_client, "approved")
    for reporter in ("u1", "u2"):
        services.report_file(review_id=review.pk, reporter_id=reporter, reason="harassment", detail="calls me names")
    appealed = decided(api_client, "rejected")
    services.appeal_file(review_id=appealed.pk, appellant_id="owner-7", statement="It is a song lyric.")

    reported_page = moderator.get(timeline(review)).content.decode()
    appealed_page = moderator.get(timeline(appealed)).content.decode()
    change_page = moderator.get(f"{LIST}{review.pk}/change/")

    assert "2 reporters" in reported_page and "calls me names" in reported_page
    assert "reported by u1 as harassment" in reported_page  # on the timeline too
    assert "Open" in appealed_page and "It is a song lyric." in appealed_page and "appeal filed by owner-7" in appealed_page
    assert change_page.status_code == 200
    assert [f.opts.model._meta.model_name for f in change_page.context["inline_admin_formsets"]] == ["appeal", "report"]


def test_the_moderator_who_made_the_appealed_decision_is_refused_with_the_reason(moderator, django_user_model, api_client):
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="threat", category="violence",
                             moderator=moderator.user)
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a film quote")
    review.refresh_from_db()
    colleague = staff_browser(django_user_model, "max", "moderator")

    own = act(moderator, review, "override", label="approved", reason="on reflection", version=review.version)
    other = act(colleague, review, "override", label="approved", reason="a film quote", version=review.version)

    assert any("another moderator must decide" in m for m in messages_of(own))
    assert "may not decide this appeal" in own.content.decode()
    assert [m.split(". <form")[0] for m in messages_of(other)] == ["Approved"]
    review.refresh_from_db()
    assert review.status == "approved" and review.appeals.get().status == "overturned"


def test_review_next_never_hands_a_moderator_the_appeal_of_their_own_decision(django_user_model, api_client):
    mia, max_ = (django_user_model.objects.create_user(name) for name in ("mia", "max"))
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="threat", category="violence", moderator=mia)
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a film quote")

    assert services.review_take_next(moderator=mia) is None
    assert services.review_take_next(moderator=max_).pk == review.pk


def decide_panel(browser, review) -> tuple[str, str]:
    """The decide form of the review page and its keyboard line."""
    html = browser.get(timeline(review)).content.decode()
    return html.split('id="decide-form"')[1].split("</form>")[0], html.split('id="shortcuts"')[1].split("</p>")[0]


def test_under_appeal_the_decisions_read_uphold_and_overturn_and_keep_their_values(moderator, api_client):
    review = decided(api_client, "rejected")
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a song lyric")

    decide, shortcuts = decide_panel(moderator, review)

    assert re.search(r'value="rejected"[^>]*>\s*Uphold the rejection', decide)
    assert re.search(r'value="approved"[^>]*>\s*Overturn it \(approve\)', decide)
    assert "Approve" not in decide and ">Reject<" not in decide
    assert "<kbd>a</kbd> overturn it (approve)" in shortcuts and "<kbd>r</kbd> uphold the rejection" in shortcuts
    # The values posted are the usual ones: overturning approves and closes the appeal.
    review.refresh_from_db()
    act(moderator, review, "override", label="approved", reason="a lyric", version=review.version)
    assert review.appeals.get().status == "overturned"


def test_once_the_appeal_is_resolved_the_decisions_read_approve_and_reject_again(moderator, django_user_model, api_client):
    review = decided(api_client, "rejected")
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a song lyric")
    services.review_override(review_id=review.pk, label="rejected", reason="still a threat", category="violence",
                             moderator=django_user_model.objects.create_user("max"))

    decide, _ = decide_panel(moderator, review)

    assert re.search(r'value="rejected"[^>]*>\s*Reject', decide) and "Uphold" not in decide


def test_review_next_says_how_many_appeals_wait_for_another_moderator(moderator, django_user_model, api_client):
    for _ in range(2):
        review = decided(api_client, "manual_review")
        services.review_override(review_id=review.pk, label="rejected", reason="threat", category="violence",
                                 moderator=moderator.user)
        services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a film quote")
    colleague = staff_browser(django_user_model, "max", "moderator")

    appeals = messages_of(moderator.post(f"{LIST}review-next/", {"queue": "appeals"}, follow=True))
    anywhere = messages_of(moderator.post(f"{LIST}review-next/", {}, follow=True))
    reports = messages_of(moderator.post(f"{LIST}review-next/", {"queue": "reports"}, follow=True))
    taken = colleague.post(f"{LIST}review-next/", {"queue": "appeals"})

    assert appeals == ["The appeals queue has no review you may take: 2 wait for another moderator "
                       "(appeals of your own decisions)."]
    assert anywhere == ["No queue has a review you may take: 2 wait for another moderator "
                        "(appeals of your own decisions)."]
    assert reports == ["The user reports queue is empty."]
    assert taken.status_code == 302 and "/timeline/" in taken["Location"]  # the colleague may take them


def test_review_next_counts_one_appeal_waiting_in_the_singular(moderator, django_user_model, api_client):
    review = decided(api_client, "manual_review")
    services.review_override(review_id=review.pk, label="rejected", reason="threat", category="violence",
                             moderator=moderator.user)
    services.appeal_file(review_id=review.pk, appellant_id="owner", statement="a film quote")

    said = messages_of(moderator.post(f"{LIST}review-next/", {"queue": "appeals"}, follow=True))

    assert said == ["The appeals queue has no review you may take: 1 waits for another moderator "
                    "(appeals of your own decisions)."]


def test_the_review_page_shows_what_became_of_each_report(moderator, django_user_model, api_client):
    review = decided(api_client, "approved")
    services.report_file(review_id=review.pk, reporter_id="early", reason="harassment")
    services.review_override(review_id=review.pk, label="rejected", reason="r", category="harassment",
                             moderator=django_user_model.objects.create_user("max"))
    services.report_file(review_id=review.pk, reporter_id="late", reason="harassment")
    review.refresh_from_db()

    page = moderator.get(f"{LIST}{review.pk}/change/").content.decode()

    assert f"Actioned (the review was rejected) (decision {review.decision_id}, rejected)" in page
    assert "Moderator agreed" in page and "<p>yes</p>" in page
    assert "<p>open</p>" in page and "<p>not judged by a moderator</p>" in page  # the late one waits
