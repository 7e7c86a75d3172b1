"""Authors in the workplace (docs/workplace.md, "Authors"): the author list's open-cases filter and
search by any id of an author's review, the review list's author and submission-time filters,
the author page's one timeline (content, reports, strikes, account actions and appeals, newest
first, paginated, each linked; what a viewer may not open counted, never shown), and "act on
all of this author's content matching ..." as a bulk job by query scoped to the author."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.admin import authors as authors_admin
from moderation.models import Author, BulkJob, ContentReview, ReviewStatus
from tests.helpers import examples, staff_browser
from tests.moderation.test_admin_authors import authored
from tests.moderation.test_queue_access import INDONESIAN, routed_to_a_group_queue

pytestmark = pytest.mark.django_db
AUTHORS = "/admin/moderation/author/"
REVIEWS = "/admin/moderation/contentreview/"
PAGE = AUTHORS + "{}/change/"


def in_the_group_queue(client, author_id: str, n: int) -> ContentReview:
    """An Indonesian text of `author_id`, approved, then reported by three users: it waits in the
    queue only the group "indonesian" may open (tests/moderation/test_queue_access.py)."""
    review = authored(client, author_id, "approved", text=f"{INDONESIAN} {n}")
    for i in range(3):
        services.report_file(review_id=review.pk, reporter_id=f"{review.short_id}-u{i}", reason="harassment")
    review.refresh_from_db()
    assert (review.status, review.queue) == (ReviewStatus.MANUAL_REVIEW, "reports-id")
    return review


@pytest.fixture
def lea(django_user_model):
    return staff_browser(django_user_model, "lea", "moderator")


@pytest.fixture
def kim(django_user_model):
    return staff_browser(django_user_model, "kim", "supervisor")


def listed(browser, url: str) -> list:
    response = browser.get(url)
    assert response.status_code == 200, url
    return list(response.context["cl"].result_list)


def text_of(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def timeline_of(html: str) -> str:
    found = re.search(r'<table class="person-list" id="author-timeline">(.*?)</table>', html, re.S)
    assert found, "no timeline on the page"
    return found.group(1)


# --- the lists ---------------------------------------------------------------------------------------

def test_the_author_list_filters_by_open_cases_and_says_how_many_each_author_has(api_client, lea):
    authored(api_client, "waiting", "manual_review")
    authored(api_client, "waiting", "manual_review")
    authored(api_client, "decided", "rejected")
    authored(api_client, "decided", "approved")

    with_open = listed(lea, AUTHORS + "?open_cases=yes")
    without = listed(lea, AUTHORS + "?open_cases=no")

    assert [a.author_id for a in with_open] == ["waiting"]
    assert [a.author_id for a in without] == ["decided"]
    assert with_open[0].waiting_count == 2
    assert "2 waiting for a human" in text_of(lea.get(AUTHORS).content.decode())


def test_an_open_account_appeal_is_an_open_case(api_client, lea):
    for _ in range(5):  # the ladder: a warning, then a suspension
        authored(api_client, "appealing", "rejected")
    services.account_appeal_file(client=api_client, author_id="appealing", statement="it was a joke")
    ContentReview.objects.filter(author__author_id="appealing")  # all decided: no review waits

    [author] = listed(lea, AUTHORS + "?open_cases=yes")

    assert author.author_id == "appealing" and author.appeal_count == 1
    assert "1 account appeal open" in text_of(lea.get(AUTHORS + "?open_cases=yes").content.decode())


def test_the_author_search_finds_the_author_of_a_review_by_its_ids_and_by_its_own_id_exactly(
        api_client, other_client, lea):
    review = authored(api_client, "writer-1", "approved", external_id="post-77")
    authored(other_client, "writer-1", "approved")
    authored(api_client, "someone-else", "approved")

    def found(term: str) -> set:
        return {(a.author_id, a.client.name) for a in listed(lea, AUTHORS + "?" + f"q={term}")}

    assert found("writer-1") == {("writer-1", "acme"), ("writer-1", "globex")}
    assert found("post-77") == {("writer-1", "acme")}  # the content's external id
    assert found(review.short_id) == {("writer-1", "acme")}  # the id the review list shows
    assert found(str(review.pk)) == {("writer-1", "acme")}
    assert found("writer") == set()  # an id, not a part of one: no scan


def test_the_author_search_never_names_the_author_of_a_review_the_user_may_not_open(
        api_client, django_user_model, lea):
    routed_to_a_group_queue()
    hidden = in_the_group_queue(api_client, "quiet-one", 1)
    member = staff_browser(django_user_model, "ina", "moderator")
    member.user.groups.add(Group.objects.get(name="indonesian"))

    assert listed(lea, AUTHORS + f"?q={hidden.short_id}") == []
    assert [a.author_id for a in listed(member, AUTHORS + f"?q={hidden.short_id}")] == ["quiet-one"]


def test_the_review_list_filters_by_author_and_by_submission_time(api_client, other_client, lea):
    mine = [authored(api_client, "spammer", "manual_review") for _ in range(3)]
    authored(other_client, "spammer", "manual_review")  # the same id at another client: another author
    authored(api_client, "bystander", "manual_review")
    old = mine[0]
    ContentReview.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    spammer = Author.objects.get(client=api_client, author_id="spammer")

    everything = {r.pk for r in listed(lea, REVIEWS + f"?author={spammer.pk}")}
    today = {r.pk for r in listed(lea, REVIEWS + f"?author={spammer.pk}&submitted=24h")}
    page = lea.get(REVIEWS + f"?author={spammer.pk}").content.decode()

    assert everything == {r.pk for r in mine}
    assert today == {r.pk for r in mine[1:]}
    assert "spammer (acme)" in text_of(page)  # the sidebar names the author chosen
    assert listed(lea, REVIEWS + "?author=999999999") == []
    assert listed(lea, REVIEWS + "?author=not-a-number") == []  # matches nothing, never everything


def test_the_review_list_filters_by_the_authors_strike_points(api_client, lea):
    struck = [authored(api_client, "two-strikes", "rejected") for _ in range(2)]
    waiting = authored(api_client, "two-strikes", "manual_review")
    clean = authored(api_client, "clean", "manual_review")

    assert {r.pk for r in listed(lea, REVIEWS + "?author_points=1-4")} == {*(r.pk for r in struck), waiting.pk}
    assert {r.pk for r in listed(lea, REVIEWS + "?author_points=0")} == {clean.pk}
    assert listed(lea, REVIEWS + "?author_points=5-9") == []


# --- the timeline ------------------------------------------------------------------------------------

def test_the_timeline_shows_content_reports_strikes_and_actions_newest_first_each_linked(api_client, lea):
    first = authored(api_client, "u1", "approved", text="the first post")
    services.report_file(review_id=first.pk, reporter_id="r1", reason="spam")
    rejected = [authored(api_client, "u1", "rejected", text=f"insult number {i}") for i in range(3)]
    author = Author.objects.get(author_id="u1")  # three strikes: warned by the ladder

    html = lea.get(PAGE.format(author.pk)).content.decode()
    rows = re.findall(r'<tr class="timeline-(\w+)">(.*?)</tr>', timeline_of(html), re.S)
    kinds = [kind for kind, _ in rows]

    assert sorted(set(kinds)) == ["action", "content", "report", "strike"]
    assert kinds.count("content") == 4 and kinds.count("strike") == 3 and kinds.count("action") == 1
    shown = text_of(timeline_of(html))
    assert shown.index("insult number 2") < shown.index("insult number 0") < shown.index("the first post")
    assert shown.index("Warn") < shown.index("insult number 0")  # the warning came after the strikes
    for kind, row in rows:  # every item leads somewhere
        assert 'href="' in row, kind
    for review in [first, *rejected]:
        assert f'href="/admin/moderation/contentreview/{review.pk}/timeline/"' in timeline_of(html)
    action = author.actions.get()
    assert f'href="#action-{action.pk}"' in html and f'id="action-{action.pk}"' in html
    [report] = [text_of(row) for kind, row in rows if kind == "report"]
    assert "spam" in report and first.short_id in report


def test_the_timeline_pages_show_every_item_once_in_order(api_client, lea, monkeypatch):
    monkeypatch.setattr(authors_admin, "PAGE_ROWS", 4)
    for i in range(5):
        review = authored(api_client, "u1", "rejected" if i % 2 else "approved", text=f"post number {i}")
        services.report_file(review_id=review.pk, reporter_id="r1", reason="spam")
    author = Author.objects.get(author_id="u1")
    # Everything at one instant: the order between kinds and ids alone decides the pages.
    ContentReview.objects.filter(author=author).update(created_at=timezone.now())

    pages, number = [], 1
    while True:
        html = lea.get(PAGE.format(author.pk) + f"?timeline_page={number}").content.decode()
        pages.append(re.findall(r'<tr class="timeline-(\w+)">(.*?)</tr>', timeline_of(html), re.S))
        if "timeline_page=" + str(number + 1) not in html:
            break
        number += 1

    rows = [row for page in pages for row in page]
    assert [len(page) for page in pages] == [4, 4, 4]
    assert len(rows) == len(set(r for _, r in rows)) == 5 + 5 + 2  # contents, reports, strikes
    assert [kind for kind, _ in rows].count("content") == 5


def test_the_timeline_counts_items_of_a_queue_the_viewer_may_not_open_and_never_shows_them(
        api_client, django_user_model, lea):
    routed_to_a_group_queue()
    authored(api_client, "u1", "approved", text="an open post")
    hidden = in_the_group_queue(api_client, "u1", 1)
    author = Author.objects.get(author_id="u1")
    member = staff_browser(django_user_model, "ina", "moderator")
    member.user.groups.add(Group.objects.get(name="indonesian"))

    outside = lea.get(PAGE.format(author.pk)).content.decode()
    inside = member.get(PAGE.format(author.pk)).content.decode()

    assert "an open post" in outside
    assert hidden.short_id not in outside and str(hidden.pk) not in outside and "Saya" not in outside
    # The review and its three reports, counted.
    assert "4 items of this author are in queues only their groups' members may open" in text_of(outside)
    assert hidden.short_id in timeline_of(inside) and "timeline-hidden" not in inside


def test_the_author_page_reads_a_fixed_number_of_queries_however_long_the_timeline(
        api_client, lea, django_assert_max_num_queries):
    for i in range(30):
        review = authored(api_client, "u1", "approved", text=f"post {i}")
        services.report_file(review_id=review.pk, reporter_id="r1", reason="spam")
    author = Author.objects.get(author_id="u1")

    with django_assert_max_num_queries(40):
        assert lea.get(PAGE.format(author.pk)).status_code == 200


# --- act on all of this author's content matching ... -----------------------------------------------

def test_the_author_page_drafts_a_bulk_job_over_the_authors_content_of_today_only(api_client, kim):
    today = [authored(api_client, "spammer", "manual_review") for _ in range(3)]
    yesterday = authored(api_client, "spammer", "manual_review")
    ContentReview.objects.filter(pk=yesterday.pk).update(created_at=timezone.now() - timedelta(days=2))
    authored(api_client, "bystander", "manual_review")
    spammer = Author.objects.get(author_id="spammer")

    page = kim.get(PAGE.format(spammer.pk)).content.decode()
    assert 'id="author-bulk"' in page and 'value="override"' in page
    # As the form sends it: every field, the empty ones too.
    chosen = kim.get(AUTHORS + f"{spammer.pk}/bulk/", {"action": "override", "submitted": "24h", "status__exact": "",
                                                        "q": ""})
    assert chosen.status_code == 302
    query = chosen["Location"].split("?", 1)[1]
    assert sorted(query.split("&")) == [f"author={spammer.pk}", "submitted=24h"]
    form = kim.get(f"/admin/moderation/bulkjob/new/override/?{query}")
    assert form.status_code == 200 and form.context["count"] == 3
    posted = kim.post(f"/admin/moderation/bulkjob/new/override/?{query}",
                      {"label": "rejected", "category": "spam", "reason_codes": ["spam:scam"], "reason": ""})

    job = BulkJob.objects.get()
    assert posted.status_code == 302 and posted["Location"].endswith(f"/{job.pk}/job/")
    assert set(job.items.values_list("review_id", flat=True)) == {r.pk for r in today}
    assert ["author", "spammer (acme)"] in job.query_words
    assert ["submitted", "in the past 24 hours"] in job.query_words
    assert job.reason_codes == ["scam"] and job.status == "draft"  # waits for the confirmation


def test_a_moderator_without_bulk_permissions_sees_no_bulk_form_and_may_not_prepare_a_job(
        api_client, django_user_model):
    authored(api_client, "spammer", "manual_review")
    auditor = staff_browser(django_user_model, "ada", "auditor")
    author = Author.objects.get()
    page = auditor.get(PAGE.format(author.pk)).content.decode()
    assert 'id="author-bulk"' not in page
    assert auditor.get(AUTHORS + f"{author.pk}/bulk/", {"action": "override"}).status_code == 403


@pytest.mark.parametrize("choices, error", [
    ({"action": "delete"}, "action: Select a valid choice"),
    ({"action": "override", "submitted": "forever"}, "submitted: Select a valid choice"),
    ({"action": "override", "status__exact": "gone"}, "status__exact: Select a valid choice"),
    ({"action": "override", "q": "x" * 201}, "q: Ensure this value has at most 200 characters"),
])
def test_a_bad_choice_for_the_author_bulk_job_says_why_and_prepares_nothing(api_client, kim, choices, error):
    authored(api_client, "spammer", "manual_review")
    author = Author.objects.get()
    answer = kim.get(AUTHORS + f"{author.pk}/bulk/", choices, follow=True)
    assert error in " ".join(str(m) for m in answer.context["messages"])
    assert not BulkJob.objects.exists()


# --- any input --------------------------------------------------------------------------------------

UNICODE = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=300)


@given(term=UNICODE)
@example(term="\u202Eevil\u202C \U0001F468\u200D\U0001F469\u200D\U0001F467")
@example(term="a" * 256)
@example(term="0" * 40)
@example(term="%' OR 1=1 --")
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_author_search_and_filters_answer_any_unicode_without_an_error(api_client, kim, term):
    if not Author.objects.exists():
        authored(api_client, "u1", "approved")
    assert kim.get(AUTHORS, {"q": term}).status_code == 200
    assert kim.get(AUTHORS, {"q": term, "open_cases": "yes", "standing__exact": "good"}).status_code == 200
    assert kim.get(REVIEWS, {"author": term}).status_code == 200
    assert kim.get(REVIEWS, {"author": term, "submitted": term}).status_code == 200
    assert kim.get("/admin/moderation/bulkjob/new/override/", {"author": term}).status_code == 200
    assert kim.get(AUTHORS + f"{Author.objects.first().pk}/bulk/", {"action": "override", "q": term}).status_code == 302
    author = Author.objects.first()
    assert kim.get(PAGE.format(author.pk), {"timeline_page": term}).status_code == 200
    assert kim.get(AUTHORS, {"q": term + "\x00"}).status_code == 400
