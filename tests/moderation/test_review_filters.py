"""The content filters the review list and the queues share (moderation/admin/filters.py
REVIEW_FILTERS): language, author standing, the author's strike points and report kind."""

from __future__ import annotations

import pytest

from moderation import services
from moderation.models import ContentReview, ReportKind
from tests.moderation import test_workplace_pages
from tests.moderation.test_content_search import in_language, listed
from tests.moderation.test_workplace_pages import LIST, QUEUES, submitted

moderator = test_workplace_pages.moderator  # a fixture: a logged-in moderator's test client


@pytest.fixture
def three(api_client, moderator):
    """An Indonesian review by a suspended author, reported by a DSA notice; an English one by an
    author in good standing, reported by a user; and one with no author, language unsure."""
    indonesian = in_language(submitted(api_client, text="dasar bodoh", external_id="a", author_id="u-1"), "id")
    english = in_language(submitted(api_client, text="you idiot", external_id="b", author_id="u-2"), "en")
    unsure = in_language(submitted(api_client, text="lol ok", external_id="c"), "")
    services.author_act(author_pk=indonesian.author_id, moderator=moderator.user, action="suspend",
                        reason="repeated insults", days=3)
    services.report_file(review_id=indonesian.pk, reporter_id="n-1", reason="harassment", kind=ReportKind.DSA_NOTICE)
    services.report_file(review_id=english.pk, reporter_id="r-1", reason="harassment", kind=ReportKind.USER)
    return {"id": indonesian, "en": english, "unsure": unsure}


@pytest.mark.django_db
@pytest.mark.parametrize(("params", "expected"), [
    ({"language": "id"}, {"id"}),
    ({"language": "en"}, {"en"}),
    ({"language": "unsure"}, {"unsure"}),
    ({"standing": "suspended"}, {"id"}),
    ({"standing": "good"}, {"en"}),
    ({"standing": "none"}, {"unsure"}),
    ({"author_points": "0"}, {"id", "en"}),  # a suspension by a moderator counts no strike
    ({"author_points": "1-4"}, set()),
    ({"author_points": "10+"}, set()),
    ({"report_kind": "dsa_notice"}, {"id"}),
    ({"report_kind": "user"}, {"en"}),
    ({"report_kind": "trusted_flagger"}, set()),
    ({"language": "id", "q": "bodoh"}, {"id"}),
    ({"language": "en", "q": "bodoh"}, set()),
    ({"language": "klingon"}, {"id", "en", "unsure"}),  # not a choice: narrows nothing
])
def test_the_list_narrows_by_each_filter(moderator, three, params, expected):
    response = moderator.get(LIST, params)
    assert response.status_code == 200
    assert listed(response.content.decode()) == {three[key].short_id for key in expected}


@pytest.mark.django_db
def test_the_queue_page_offers_the_same_filters_and_applies_them(moderator, three):
    ContentReview.objects.filter(pk__in=[r.pk for r in three.values()]).update(queue="low_confidence")
    html = moderator.get(QUEUES, {"queue": "low_confidence", "language": "id"}).content.decode()
    assert f'id="queue-item-{three["id"].short_id}"' in html
    assert f'id="queue-item-{three["en"].short_id}"' not in html
    for param in ("language", "standing", "author_points", "report_kind"):
        assert f'id="queue-filter-{param}" name="{param}"' in html
    assert '<option value="id" selected>id</option>' in html
    html = moderator.get(QUEUES, {"queue": "low_confidence", "standing": "banned"}).content.decode()
    assert "This queue is empty." in html
