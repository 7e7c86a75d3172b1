"""Bulk actions by query in the admin (moderation/admin/bulk_jobs.py): from the review list's
filters and search to a confirm page with counts and excerpts, the job's progress and its
skipped reviews, the 10,000 limit, permissions, and any text shown without breaking the page."""

from __future__ import annotations

import re
import time
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services, tasks
from moderation.admin.csp import HEADER
from moderation.models import BulkJob, BulkJobStatus, Content, ContentReview
from tests.helpers import examples, decided, queued_tasks, staff_browser, submit
from tests.moderation.test_workplace import LIST, messages_of

pytestmark = pytest.mark.django_db
NEW = "/admin/moderation/bulkjob/new/{}/"


@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "supervisor")


@pytest.fixture
def sam(django_user_model):
    return staff_browser(django_user_model, "sam", "moderator")


def waiting(api_client, text: str) -> ContentReview:
    review = submit(api_client, text=text)
    request = services.review_claim(review_id=review.pk, worker_id="worker-1")
    from tests.helpers import SCORE_FOR, result

    services.review_finalize(idempotency_key=request.idempotency_key, cause="provider_result",
                             result=result(SCORE_FOR["manual_review"]))
    review.refresh_from_db()
    return review


def job_page(job) -> str:
    return f"/admin/moderation/bulkjob/{job.pk}/job/"


def test_the_review_list_offers_each_permitted_action_over_its_own_query(mia, sam):
    query = "?q=bodoh&status__exact=manual_review"
    listed = mia.get(LIST + query).content.decode()
    assert f'href="{NEW.format("override")}{query}"' in listed.replace("&amp;", "&")
    assert 'id="bulk-reprocess"' in listed
    assert 'id="bulk-reprocess"' not in sam.get(LIST).content.decode()  # moderators do not reprocess


def test_a_search_and_a_filter_select_the_reviews_counted_confirmed_and_decided(mia, api_client):
    spam = [waiting(api_client, f"buy cheap watches now, offer {i}") for i in range(3)]
    waiting(api_client, "a kind word about the weather")
    decided_already = decided(api_client, "approved")
    query = urlencode({"status__exact": "manual_review"})

    page = mia.get(NEW.format("override") + "?" + query)
    assert page.status_code == 200 and page[HEADER]
    assert re.search(r'id="bulk-count"><strong>4</strong> reviews match', page.content.decode())

    posted = mia.post(NEW.format("override") + "?" + query, {"label": "rejected", "category": "spam",
                                                             "reason": "a spam wave"})
    job = BulkJob.objects.get()
    assert posted.status_code == 302 and posted["Location"] == job_page(job)
    assert job.total == 4 and job.query == query and decided_already.pk not in set(
        job.items.values_list("review_id", flat=True))

    confirm = mia.get(job_page(job)).content.decode()
    assert "Reject (spam)" in confirm and "This job will act on <strong>4</strong> reviews" in confirm
    assert '<span class="badge">status: Manual review</span>' in confirm  # the filter in the sidebar's words
    assert "<td>Manual review</td><td>4</td>" in confirm
    assert "buy cheap watches now, offer 0" in confirm and "a kind word about the weather" in confirm
    assert spam[0].short_id not in confirm and str(spam[0].pk) not in confirm  # content, not ids
    assert queued_tasks("moderation.tasks.bulk_job_run") == []


def test_the_search_term_of_the_list_selects_the_same_reviews(mia, api_client):
    # The list's content search (moderation/observability/search.py) selects the job's reviews.
    wanted, _other = waiting(api_client, "first text"), waiting(api_client, "second text")
    mia.post(NEW.format("escalate") + f"?q=first&client__id__exact={api_client.pk}", {"reason": "look again"})

    job = BulkJob.objects.get()
    assert list(job.items.values_list("review_id", flat=True)) == [wanted.pk]
    assert job.query_words == [["client id", str(api_client.pk)], ["search", "first"]]  # one client: no sidebar filter


def test_more_than_ten_thousand_matching_reviews_are_refused_with_a_clear_message(mia, api_client):
    contents = Content.objects.bulk_create(
        [Content(client=api_client, external_id=f"wave-{i}", kind="text", text="buy now") for i in range(10_001)])
    ContentReview.objects.bulk_create([ContentReview(content=c, client=api_client) for c in contents])

    page = mia.get(NEW.format("escalate")).content.decode()
    posted = mia.post(NEW.format("escalate"), {"reason": "spam wave"}).content.decode()

    for body in (page, posted):
        assert ("Not possible: the search matches more than 10,000 reviews (10,001 or more): narrow it with a "
                "filter or a search term; one bulk action takes at most 10,000.") in body
        assert 'id="bulk-form"' not in body
    assert not BulkJob.objects.exists()


def test_a_started_job_shows_its_progress_then_its_skipped_reviews_with_their_reasons(
    mia, sam, api_client, django_capture_on_commit_callbacks
):
    _first, taken, _third = (waiting(api_client, t) for t in ("one spam", "two spam", "three spam"))
    mia.post(NEW.format("override") + "?status__exact=manual_review", {"label": "approved", "reason": "false alarm"})
    job = BulkJob.objects.get()

    with django_capture_on_commit_callbacks(execute=True):
        started = mia.post(f"/admin/moderation/bulkjob/{job.pk}/start/", follow=True)
    assert messages_of(started) == ["Started: the job runs in the background."]
    running = started.content.decode()
    assert '<meta http-equiv="refresh" content="3">' in running and 'id="bulk-cancel"' in running
    assert '<td id="bulk-remaining">3</td>' in running

    services.review_override(review_id=taken.pk, label="rejected", category="spam", reason="spam",
                             moderator=sam.user, expected_version=taken.version)
    [task] = queued_tasks("moderation.tasks.bulk_job_run")
    tasks.bulk_job_run(**task["kwargs"])

    done = mia.get(job_page(job)).content.decode()
    assert "refresh" not in done and 'id="bulk-cancel"' not in done
    assert '<td id="bulk-done">2</td>' in done and '<td id="bulk-skipped-count">1</td>' in done
    assert '<td id="bulk-remaining">0</td>' in done
    [row] = re.findall(r'<tr class="skipped-item">(.*?)</tr>', done, re.S)
    decided_at = ContentReview.objects.get(pk=taken.pk).transitions.order_by("-id").first().created_at
    assert "two spam" in row and (f"it changed since you opened it: rejected by moderator sam at {decided_at:%H:%M} UTC"
                                  in row) and "manual_review" not in row


def test_a_running_job_is_cancelled_from_its_page(mia, api_client):
    review = waiting(api_client, "spam")
    job = services.bulk_job_draft(reviews=ContentReview.objects.filter(pk=review.pk), moderator=mia.user,
                                  action="escalate", reason="x")
    services.bulk_job_start(job_id=job.pk, moderator=mia.user)

    cancelled = mia.post(f"/admin/moderation/bulkjob/{job.pk}/cancel/", follow=True)

    assert messages_of(cancelled) == ["Cancelling: the job stops after the review it is on; what it did stays done."]
    assert "cancel asked" in cancelled.content.decode()
    services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 30)
    job.refresh_from_db()
    assert job.status == BulkJobStatus.CANCELLED


def test_only_who_may_take_the_action_asks_for_it_and_only_who_drafted_a_job_starts_it(
    mia, sam, api_client, django_user_model
):
    auditor = staff_browser(django_user_model, "ann", "auditor")
    auditor.raise_request_exception = sam.raise_request_exception = False
    assert sam.get(NEW.format("reprocess")).status_code == 403
    assert auditor.get(NEW.format("override")).status_code == 403
    assert sam.get(NEW.format("delete")).status_code == 403

    mia.post(NEW.format("override"), {"label": "approved", "reason": "fine"})
    waiting(api_client, "x")
    job = BulkJob.objects.get()
    refused = sam.post(f"/admin/moderation/bulkjob/{job.pk}/start/", follow=True)
    assert messages_of(refused) == ["Not done: this job was drafted by mia: they start it."]


def test_a_query_with_a_nul_is_refused(mia):
    mia.raise_request_exception = False
    assert mia.get(NEW.format("override") + "?q=%00").status_code == 400


WEIRD = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=60)
FEW = settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FEW
@given(text=WEIRD.filter(str.strip), reason=WEIRD.filter(str.strip), term=WEIRD)
@example(text="\u202eesrever", reason="<script>alert(1)</script>", term="id\u200biot")
def test_any_text_reason_or_search_term_renders_on_the_bulk_pages(mia, api_client, text, reason, term):
    review = waiting(api_client, text)
    query = urlencode({"q": term})
    assert mia.get(NEW.format("override") + "?" + query).status_code == 200
    job = services.bulk_job_draft(reviews=ContentReview.objects.filter(pk=review.pk), moderator=mia.user,
                                  action="escalate", reason=reason, query=query)
    page = mia.get(job_page(job))
    assert page.status_code == 200
    assert "<script>alert" not in page.content.decode()
    services.bulk_job_start(job_id=job.pk, moderator=mia.user)
    services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 30)  # skipped: already waiting for a human
    assert mia.get(job_page(job)).status_code == 200
    assert mia.get("/admin/moderation/bulkjob/").status_code == 200
