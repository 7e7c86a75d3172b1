"""Authors in the admin (moderation/admin/authors.py): the list's filters and search, the author
page, the warn / suspend / ban / lift buttons with their stale-page guard, account appeals with
four eyes, and the author beside the content on the review page."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audit.models import EventKind, PipelineEvent
from moderation import services
from moderation.admin import paginator
from moderation.observability import workplace
from moderation.models import AccountAction, AccountAppeal, Author, ContentReview, Standing, StandingTransition
from moderation.words import actor_words
from tests.helpers import examples, SCORE_FOR, result, staff_browser

pytestmark = pytest.mark.django_db
PAGE = "/admin/moderation/author/{}/change/"


def authored(client, author_id: str, label: str, *, text: str = "a sentence", external_id: str = "") -> ContentReview:
    review, _ = services.review_submit(client=client, external_id=external_id or uuid.uuid4().hex, kind="text",
                                       text=text, author_id=author_id)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR[label]),
                             cause="provider_result")
    review.refresh_from_db()
    return review


def text_of(response) -> str:
    """The page's text, tags dropped and entities read, whitespace collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"]) if response.context else ""


def act(browser, author: Author, action: str, reason: str = "repeated harassment", *, version=None, days=7):
    data = {"reason": reason, "version": author.version if version is None else version}
    if days is not None:
        data["days"] = days
    return browser.post(f"/admin/moderation/author/{author.pk}/act/{action}/", data, follow=True)


# --- the list -------------------------------------------------------------------------------------

def test_the_list_filters_by_standing_and_by_points_and_finds_an_author_by_its_exact_id(api_client, other_client, mia):
    for _ in range(3):
        authored(api_client, "warned-one", "rejected")
    authored(api_client, "one-strike", "rejected")
    authored(api_client, "clean", "approved")
    authored(other_client, "clean", "approved")

    def listed(query: str) -> set[str]:
        response = mia.get("/admin/moderation/author/" + query)
        assert response.status_code == 200
        return {(a.author_id, a.client.name) for a in response.context["cl"].result_list}

    assert listed("?standing__exact=warned") == {("warned-one", "acme")}
    assert listed("?points=0") == {("clean", "acme"), ("clean", "globex")}
    assert listed("?points=1-4") == {("warned-one", "acme"), ("one-strike", "acme")}
    assert listed("?points=5-9") == set()
    assert listed("?q=clean") == {("clean", "acme"), ("clean", "globex")}
    assert listed("?q=clea") == set()  # an id, not a prefix: the index finds it, nothing scans
    assert "acme" in text_of(mia.get("/admin/moderation/author/"))  # the client column
    assert mia.get("/admin/moderation/author/?q=%00").status_code == 400


def test_the_list_estimates_instead_of_counting_a_million_authors(api_client, mia, monkeypatch):
    authored(api_client, "u1", "approved")
    monkeypatch.setattr(paginator, "EXACT_COUNT_BELOW", 0)  # any estimate counts as large
    for query in ("", "?standing__exact=good", "?points=1-4", "?q=u1"):
        with CaptureQueriesContext(connection) as queries:
            assert mia.get("/admin/moderation/author/" + query).status_code == 200
        statements = [q["sql"].upper() for q in queries.captured_queries]
        assert any(s.startswith("EXPLAIN") for s in statements), query
        assert not any("COUNT(" in s and "MODERATION_AUTHOR" in s for s in statements), (query, statements)


# --- the author page ------------------------------------------------------------------------------

INJECTION = '"><img src=x onerror=alert(1)>'


@given(author_id=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=255),
       text=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=400))
@example(author_id=INJECTION, text=INJECTION)
@example(author_id="\u202Eevil\u202C \U0001F468\u200D\U0001F469\u200D\U0001F467", text="\u200B")
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_author_page_shows_any_unicode_author_id_and_content_escaped(api_client, mia, author_id, text):
    review = authored(api_client, author_id, "rejected", text=text + INJECTION)
    author = Author.objects.get(client=api_client, author_id=author_id)

    page = mia.get(PAGE.format(author.pk))
    shown = mia.get(f"/admin/moderation/contentreview/{review.pk}/timeline/")

    assert page.status_code == 200 and shown.status_code == 200
    assert author_id in unescape(page.content.decode())
    assert review.short_id in page.content.decode()
    assert f'href="{PAGE.format(author.pk)}"' in shown.content.decode()
    for html in (page.content.decode(), shown.content.decode()):
        assert "<img src=x" not in html  # the author id and the text, escaped wherever shown


def test_the_author_page_lists_reviews_strikes_actions_appeals_and_changes(api_client, mia, sam):
    reviews = [authored(api_client, "u1", "rejected", text=f"insult number {i} <script>x</script>") for i in range(5)]
    author = Author.objects.get(author_id="u1")
    services.review_override(review_id=reviews[0].pk, label="approved", reason="fine after all", moderator=sam.user)
    services.account_appeal_file(client=api_client, author_id="u1", statement="I was joking")

    page = mia.get(PAGE.format(author.pk))
    html, text = page.content.decode(), text_of(page)

    assert page.status_code == 200 and "<script>x</script>" not in html
    assert "Suspended" in text and "until" in text
    assert re.search(r"Active strike points (\d+)", text).group(1) == "4"  # 5 rejections, one overturned
    assert text.index("insult number 4") < text.index("insult number 0")  # newest first
    active = text_of_table(html, "active-strikes")
    ended = text_of_table(html, "ended-strikes")
    assert active.count("harassment") == 4 and "Decision overturned" in ended
    actions = text_of_table(html, "account-actions")
    assert "Warn" in actions and "Suspend" in actions and "The enforcement ladder" in actions
    assert "I was joking" in text_of_table(html, "account-appeals")
    changes = text_of_table(html, "standing-changes")
    assert "good → warned" in changes and "warned → suspended" in changes
    # Who made each change, in words: never a worker's or host's id.
    recorded = set(author.transitions.values_list("actor", "actor_id"))
    assert recorded and not any(f"{actor}:" in changes for actor, _ in recorded)
    assert all(actor_words(actor, actor_id) in changes for actor, actor_id in recorded)


def text_of_table(html: str, table_id: str) -> str:
    table = re.search(rf'<table[^>]*id="{table_id}".*?</table>', html, re.S).group(0)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", table)).split())


def test_the_author_page_pages_its_reviews(api_client, mia):
    for i in range(30):
        authored(api_client, "prolific", "approved", text=f"post {i:02d}")
    author = Author.objects.get(author_id="prolific")

    first = text_of_table(mia.get(PAGE.format(author.pk)).content.decode(), "author-reviews")
    second = text_of_table(mia.get(PAGE.format(author.pk) + "?reviews_page=2").content.decode(), "author-reviews")

    assert "post 29" in first and "post 04" not in first
    assert "post 04" in second and "post 29" not in second


def test_an_unknown_or_malformed_author_is_not_found(mia):
    for url in (PAGE.format(999), PAGE.format("abc"), PAGE.format("9" * 40)):
        assert mia.get(url).status_code == 404, url


# --- the buttons ----------------------------------------------------------------------------------

def test_a_moderator_suspends_for_n_days_with_a_reason_and_the_client_is_told(api_client, mia):
    authored(api_client, "u1", "rejected")
    author = Author.objects.get(author_id="u1")

    response = act(mia, author, "suspend", "threats in three threads", days=3)

    assert "Author suspended." in messages_of(response)
    author = Author.objects.get(pk=author.pk)  # standing is protected: no refresh_from_db
    action = AccountAction.objects.get(author=author)
    assert author.standing == Standing.SUSPENDED and author.restriction == action
    assert (action.action, action.cause, action.reason, action.moderator) == ("suspend", "moderator",
                                                                             "threats in three threads", mia.user)
    assert abs(action.until - action.created_at - timedelta(days=3)) < timedelta(minutes=1)
    assert "threats in three threads" in text_of(response)


def test_warn_ban_and_lift_each_act_through_their_service(api_client, mia):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")

    for action, standing in (("warn", "warned"), ("ban", "banned"), ("lift", "warned")):
        author = Author.objects.get(pk=author.pk)
        response = act(mia, author, action, f"{action} it", days=None)
        assert messages_of(response).startswith("Author "), (action, messages_of(response))
        author = Author.objects.get(pk=author.pk)
        assert author.standing == standing, action
    assert [t.cause for t in StandingTransition.objects.filter(author=author)] == ["moderator", "moderator", "lifted"]


def test_a_reason_is_required_and_nothing_is_written_without_one(api_client, mia):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")

    response = act(mia, author, "ban", "   ")

    assert "Not banned: reason: This field is required." in messages_of(response)
    author = Author.objects.get(pk=author.pk)
    assert author.standing == Standing.GOOD and not AccountAction.objects.exists()


@pytest.mark.parametrize(("action", "days", "says"), [
    ("warn", None, "cannot warn an author who is banned"),
    ("ban", None, "cannot ban an author who is banned"),
    ("suspend", None, "a suspension lasts 1 to 3650 days"),
])
def test_an_illegal_action_says_why_and_writes_nothing(api_client, mia, action, days, says):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    if action != "suspend":
        services.author_act(author_pk=author.pk, moderator=mia.user, action="ban", reason="spam ring")
    author = Author.objects.get(pk=author.pk)
    before = (author.version, AccountAction.objects.count(), StandingTransition.objects.count())

    response = act(mia, author, action, days=days)

    assert says in messages_of(response)
    author = Author.objects.get(pk=author.pk)
    assert (author.version, AccountAction.objects.count(), StandingTransition.objects.count()) == before


def test_lifting_an_author_with_nothing_in_force_is_refused(api_client, mia):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    assert "Not lifted: author u1 is good: nothing to lift" in messages_of(act(mia, author, "lift"))


def test_a_stale_page_is_refused_and_shows_what_changed(api_client, mia):
    for _ in range(2):
        authored(api_client, "u1", "rejected")
    author = Author.objects.get(author_id="u1")
    page = mia.get(PAGE.format(author.pk))
    seen = int(re.search(r'name="version" value="(\d+)"', page.content.decode()).group(1))
    authored(api_client, "u1", "rejected")  # the third strike lands, and the ladder warns

    response = act(mia, author, "suspend", "two strikes already", version=seen)

    message = messages_of(response)
    assert f"Not suspended: changed since version {seen}" in message
    assert "strike: harassment (+1)" in message and "good -> warned (strikes, by worker)" in message
    assert "Nothing was applied" in message
    author = Author.objects.get(pk=author.pk)
    assert author.standing == Standing.WARNED and AccountAction.objects.filter(cause="moderator").count() == 0
    assert PipelineEvent.objects.filter(kind=EventKind.AUTHOR_ACTION_REFUSED).count() == 1


def test_only_post_and_only_with_the_permission(api_client, django_user_model):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    auditor = staff_browser(django_user_model, "ada", "auditor")
    nobody = staff_browser(django_user_model, "bob", None)

    assert auditor.get(PAGE.format(author.pk)).status_code == 200
    assert 'id="ban-form"' not in auditor.get(PAGE.format(author.pk)).content.decode()
    assert act(auditor, author, "ban").status_code == 403
    assert nobody.get(PAGE.format(author.pk)).status_code == 403
    mia = staff_browser(django_user_model, "mia", "moderator")
    assert mia.get(f"/admin/moderation/author/{author.pk}/act/ban/").status_code == 403
    assert 'id="ban-form"' in mia.get(PAGE.format(author.pk)).content.decode()
    author = Author.objects.get(pk=author.pk)
    assert author.standing == Standing.GOOD


def test_the_buttons_post_with_csrf(api_client, django_user_model):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    user = django_user_model.objects.create_user("mia", is_staff=True)
    user.groups.add(Group.objects.get(name="moderator"))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)

    assert browser.post(f"/admin/moderation/author/{author.pk}/act/ban/",
                        {"reason": "x", "version": author.version}).status_code == 403
    author = Author.objects.get(pk=author.pk)
    assert author.standing == Standing.GOOD


# --- account appeals ------------------------------------------------------------------------------

def test_the_moderator_who_acted_may_not_resolve_the_appeal_another_may(api_client, mia, sam):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    act(mia, author, "ban", "spam ring")
    appeal = services.account_appeal_file(client=api_client, author_id="u1", statement="not me")
    url = f"/admin/moderation/author/{author.pk}/appeal/{appeal.pk}/resolve/"

    assert "You took this action" in text_of(mia.get(PAGE.format(author.pk)))
    refused = mia.post(url, {"outcome": "overturned", "reason": "fair enough"}, follow=True)
    assert "Appeal not resolved: mia took the appealed action: another moderator must decide its appeal" in messages_of(refused)
    assert AccountAppeal.objects.get().is_open

    no_reason = sam.post(url, {"outcome": "overturned", "reason": ""}, follow=True)
    assert "Appeal not resolved: reason" in messages_of(no_reason)
    resolved = sam.post(url, {"outcome": "overturned", "reason": "fair enough"}, follow=True)
    assert "Appeal overturned." in messages_of(resolved)
    author = Author.objects.get(pk=author.pk)
    assert author.standing == Standing.GOOD and AccountAppeal.objects.get().status == "overturned"
    assert "fair enough" in text_of_table(resolved.content.decode(), "account-appeals")


# --- the review page ------------------------------------------------------------------------------

def test_the_review_page_shows_the_authors_standing_and_points_beside_the_content(api_client, mia):
    for _ in range(3):
        review = authored(api_client, "u1", "rejected")
    author = Author.objects.get(author_id="u1")

    shown = mia.get(f"/admin/moderation/contentreview/{review.pk}/timeline/")
    line = " ".join(unescape(re.sub(r"<[^>]+>", " ", re.search(r'<p id="review-author">.*?</p>', shown.content.decode(),
                                                                re.S).group(0))).split())

    assert f'href="{PAGE.format(author.pk)}" id="author-link"' in shown.content.decode()
    assert line.startswith("Author u1") and "Warned , 3 active strike points" in line


def test_a_review_without_an_author_says_so_and_links_nowhere(api_client, mia):
    review, _ = services.review_submit(client=api_client, external_id="anon", kind="text", text="hello")

    html = mia.get(f"/admin/moderation/contentreview/{review.pk}/timeline/").content.decode()

    assert "No author" in html and 'id="author-link"' not in html


def test_the_restricted_authors_queue_is_listed_with_the_others(api_client, mia):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    services.author_act(author_pk=author.pk, moderator=mia.user, action="ban", reason="spam ring")
    waiting = authored(api_client, "u1", "approved")
    assert waiting.queue == "restricted_authors"

    queues = mia.get("/admin/moderation/contentreview/queues/?queue=restricted_authors")
    index = mia.get("/admin/")

    assert 'id="queue-restricted_authors"' in queues.content.decode()
    assert "Restricted authors" in text_of(queues) and waiting.short_id in queues.content.decode()
    assert 'id="queue-restricted_authors"' in index.content.decode()


def test_time_in_queue_counts_a_restricted_authors_content_in_its_own_queue(api_client, mia):
    authored(api_client, "u1", "approved")
    author = Author.objects.get(author_id="u1")
    services.author_act(author_pk=author.pk, moderator=mia.user, action="ban", reason="spam ring")
    restricted = authored(api_client, "u1", "approved")
    unsure = authored(api_client, "u2", "manual_review")
    for review in (restricted, unsure):
        services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=mia.user)

    left = {figures.queue: figures.left for figures in workplace.time_in_review_queue()}

    assert left == {"restricted_authors": 1, "low_confidence": 1}
