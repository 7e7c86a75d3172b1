"""The moderator's pages: the list, the review page, the queues, decide and next, notes, and
the workload and quality figures on the index and /metrics."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from moderation import services
from moderation.admin import paginator
from moderation.models import Cause, ContentReview, ModerationPolicy, ModeratorNote, ReviewQueue
from moderation.observability import workplace
from moderation.verdicts import thresholds_for
from tests.helpers import decided, result
from tests.moderation.test_queues import enter, scored

LIST = "/admin/moderation/contentreview/"
QUEUES = f"{LIST}queues/"


@pytest.fixture
def moderator(db, django_user_model):
    user = django_user_model.objects.create_user("mia", password="pw-long-enough-1", is_staff=True)
    user.groups.add(Group.objects.get(name="moderator"))
    browser = Client()
    browser.force_login(user)
    browser.user = user
    return browser


def page_of(review) -> str:
    return f"{LIST}{review.pk}/timeline/"


def submitted(client, **content) -> ContentReview:
    review, _ = services.review_submit(client=client, external_id=content.pop("external_id", "x-" + str(id(content))),
                                       kind=content.pop("kind", "text"), **content)
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.65), cause="provider_result")
    review.refresh_from_db()
    return review


@pytest.mark.django_db
class TestTheList:
    def test_the_list_shows_an_escaped_excerpt_the_media_host_and_the_top_category(self, moderator, api_client):
        long_text = "<b>shouting</b> " + "word " * 100
        submitted(api_client, external_id="t1", text=long_text)
        submitted(api_client, external_id="m1", kind="image", media_url="https://cdn.example.org/cat.png")
        html = moderator.get(LIST).content.decode()
        assert "&lt;b&gt;shouting&lt;/b&gt;" in html and "<b>shouting</b>" not in html
        assert "word " * 30 in html and "word " * 60 not in html  # about 200 characters
        assert "image at <code>cdn.example.org</code>" in html
        assert "harassment 0.65" in html and "Low-confidence model results" in html

    def test_the_list_is_newest_first(self, moderator, api_client):
        older, newer = submitted(api_client, external_id="a", text="older"), submitted(api_client, external_id="b", text="newer")
        html = moderator.get(LIST).content.decode()
        assert html.index(newer.short_id) < html.index(older.short_id)

    def test_the_list_estimates_instead_of_counting_a_large_result(self, moderator, api_client, monkeypatch):
        decided(api_client, "approved")
        monkeypatch.setattr(paginator, "EXACT_COUNT_BELOW", 0)  # any estimate counts as large
        with CaptureQueriesContext(connection) as queries:
            assert moderator.get(LIST).status_code == 200
        statements = [q["sql"].upper() for q in queries.captured_queries]
        assert any(s.startswith("EXPLAIN") for s in statements)
        assert not any("COUNT(*)" in s and "MODERATION_CONTENTREVIEW" in s for s in statements), statements

    def test_a_small_result_is_counted_exactly(self, moderator, api_client):
        decided(api_client, "approved")
        response = moderator.get(LIST)
        assert response.context["cl"].result_count == 1 and not response.context["cl"].paginator.estimated


@pytest.mark.django_db
class TestTheReviewPage:
    def test_the_page_leads_with_the_whole_text_its_metadata_and_the_media_url_as_text(self, moderator, api_client):
        text = "first line\nsecond <line>\n" + "x" * 5000 + " the end"
        review = submitted(api_client, text=text, media_url="https://tracker.example.net/pixel.gif",
                           metadata={"author": "u123", "thread": {"id": 7, "title": "hi"}})
        response = moderator.get(page_of(review))
        html = response.content.decode()
        # Whole and escaped, its line breaks kept (the text block is white-space: pre-wrap).
        assert 'id="content-text">first line\nsecond &lt;line&gt;\n' in html and "x" * 5000 + " the end" in html
        assert ".rule-matches .content-text { white-space: pre-wrap;" in html
        assert 'id="content-metadata"' in html and "u123" in html and "&quot;title&quot;: &quot;hi&quot;" in html
        # Never loaded, never a link (it would show the image unblurred, from its host): text.
        assert '<code class="media-url">https://tracker.example.net/pixel.gif</code>' in html
        assert 'href="https://tracker.example.net' not in html and 'src="https://tracker.example.net' not in html
        assert "<img" not in html.split('class="content-panel" id="content">')[1].split('id="scores"')[0]
        csp = response["Content-Security-Policy"]
        # Images and audio only from our own copy (moderation/admin/review_media.py).
        assert "img-src 'self' data:" in csp and "media-src 'self'" in csp and "frame-src 'none'" in csp
        assert html.index('id="content"') < html.index('id="scores"') < html.index('id="decide-form"') < html.index('id="timeline"')

    def test_the_page_shows_each_category_score_against_the_policy_thresholds(self, moderator, api_client):
        review = scored(api_client, 0.62)
        html = moderator.get(page_of(review)).content.decode()
        row = html.split('id="scores"')[1].split("</tbody>")[0]
        review_at, reject_at = thresholds_for(ModerationPolicy.objects.order_by("-version").first(), "harassment")
        assert "harassment" in row and "0.620" in row and "manual_review" in row
        assert str(review_at) in row and str(reject_at) in row

    def test_the_page_documents_its_keyboard_shortcuts(self, moderator, api_client):
        html = moderator.get(page_of(scored(api_client, 0.6))).content.decode()
        shortcuts = html.split('id="shortcuts"')[1].split("</p>")[0]
        for key in ("<kbd>a</kbd> approve", "<kbd>r</kbd> reject", "<kbd>n</kbd> write a note", "<kbd>j</kbd> next"):
            assert key in shortcuts

    def test_a_note_added_on_the_page_is_shown_there(self, moderator, api_client):
        review = decided(api_client, "approved")
        response = moderator.post(f"{LIST}{review.pk}/note/", {"text": "Same text seen in 40 other posts."}, follow=True)
        assert "Note added." in [str(m) for m in response.context["messages"]]
        assert "Same text seen in 40 other posts." in response.content.decode().split('id="notes"')[1]
        assert ModeratorNote.objects.get().author == moderator.user


@pytest.mark.django_db
class TestDecideAndNext:
    def test_decide_and_next_rejects_with_a_category_and_opens_the_next_review_of_the_same_queue(
        self, moderator, api_client
    ):
        first, second = scored(api_client, 0.66), scored(api_client, 0.62)
        enter(decided(api_client, "rejected"), Cause.APPEAL)  # more urgent, but another queue
        opened = moderator.post(f"{LIST}review-next/", {"queue": ReviewQueue.LOW_CONFIDENCE})
        assert opened["Location"] == page_of(first) + "?queue=low_confidence"
        response = moderator.post(f"{LIST}{first.pk}/act/override/", {
            "label": "rejected", "category": "harassment", "reason": "insult", "note": "repeat offender",
            "version": ContentReview.objects.get(pk=first.pk).version, "queue": "low_confidence",
            "decide_and_next": "1"})
        assert response["Location"] == page_of(second) + "?queue=low_confidence"
        first.refresh_from_db()
        assert (first.status, first.decision.category) == ("rejected", "harassment")
        assert ContentReview.objects.get(pk=second.pk).leased_to == moderator.user

    def test_a_rejection_without_a_category_is_refused_on_the_page(self, moderator, api_client):
        review = scored(api_client, 0.65)
        response = moderator.post(f"{LIST}{review.pk}/act/override/", {
            "label": "rejected", "reason": "insult", "version": review.version}, follow=True)
        assert any("a rejection needs a violation category" in str(m) for m in response.context["messages"])
        review.refresh_from_db()
        assert review.status == "manual_review"

    def test_the_last_review_of_a_queue_leads_back_to_the_queues(self, moderator, api_client):
        review = scored(api_client, 0.65)
        response = moderator.post(f"{LIST}{review.pk}/act/override/", {
            "label": "approved", "reason": "fine", "version": review.version, "queue": "low_confidence",
            "decide_and_next": "1"}, follow=True)
        assert "The low-confidence model results queue is empty." in [str(m) for m in response.context["messages"]]

    def test_next_review_leaves_this_one_in_its_queue(self, moderator, api_client):
        first, second = scored(api_client, 0.66), scored(api_client, 0.62)
        moderator.post(f"{LIST}review-next/", {"queue": "low_confidence"})
        response = moderator.post(f"{LIST}{first.pk}/skip/", {"queue": "low_confidence"})
        assert response["Location"] == page_of(second) + "?queue=low_confidence"
        assert ContentReview.objects.get(pk=first.pk).leased_to is None


@pytest.mark.django_db
class TestTheQueues:
    def test_the_queue_page_shows_depth_and_oldest_age_and_the_queue_in_priority_order(self, moderator, api_client):
        unsure, likely = scored(api_client, 0.55), scored(api_client, 0.66)
        ContentReview.objects.filter(pk=unsure.pk).update(queued_at=timezone.now() - timedelta(hours=2))
        html = moderator.get(QUEUES + "?queue=low_confidence").content.decode()
        row = html.split('id="queue-low_confidence"')[1].split("</tr>")[0]
        assert '<td class="depth">2</td>' in row and '<td class="oldest">2h 0m</td>' in row
        items = html.split('id="queue-items"')[1]
        assert items.index(likely.short_id) < items.index(unsure.short_id)

    def test_figures_per_queue(self, api_client):
        scored(api_client, 0.6)
        enter(decided(api_client, "approved"), Cause.USER_REPORTS, report_count=3)
        figures = {q.queue: q.depth for q in workplace.review_queue_figures()}
        assert figures == {"urgent": 0, "low_confidence": 1, "reports": 1, "appeals": 0, "provider_failures": 0,
                           "escalations": 0, "restricted_authors": 0, "notices": 0, "images": 0}


@pytest.mark.django_db
class TestQualityFigures:
    def test_overturn_rate_by_category_and_policy_version(self, api_client, django_user_model):
        mia = django_user_model.objects.create_user("mia")
        kept, reversed_ = decided(api_client, "rejected"), decided(api_client, "rejected")
        missed = decided(api_client, "approved")
        services.review_override(review_id=reversed_.pk, label="approved", reason="satire", moderator=mia)
        services.review_override(review_id=missed.pk, label="rejected", category="hate", reason="slur", moderator=mia)
        enter(kept, Cause.APPEAL)
        services.review_override(review_id=kept.pk, label="rejected", category="harassment", reason="upheld",
                                 moderator=mia)
        rates = {(o.category, o.policy_version): (o.reviewed, o.overturned) for o in workplace.overturn_rates()}
        assert rates == {("harassment", 1): (2, 1), ("hate", 1): (1, 1)}

    def test_decisions_per_moderator_per_day(self, api_client, django_user_model):
        mia, sam = (django_user_model.objects.create_user(n) for n in ("mia", "sam"))
        for moderator in (mia, mia, sam):
            review = decided(api_client, "manual_review")
            services.review_override(review_id=review.pk, label="approved", reason="ok", moderator=moderator)
        rows = {(r["moderator__username"], r["decisions"]) for r in workplace.decisions_per_moderator()}
        assert rows == {("mia", 2), ("sam", 1)}

    def test_time_in_queue_p50_and_p95(self, api_client, django_user_model):
        from moderation.models import QueueVisit

        mia = django_user_model.objects.create_user("mia")
        waits = [10, 20, 30, 40, 1000]
        for seconds in waits:
            review = scored(api_client, 0.6)
            services.review_override(review_id=review.pk, label="approved", reason="ok", moderator=mia)
            # The review entered its queue `seconds` before it left it.
            visit = QueueVisit.objects.get(review=review)
            QueueVisit.objects.filter(pk=visit.pk).update(anchor_at=visit.left_at - timedelta(seconds=seconds))
        [low] = workplace.time_in_review_queue()
        assert low.queue == "low_confidence" and low.left == 5
        assert low.p50_s == pytest.approx(30, abs=2) and 700 < low.p95_s < 1000

    def test_the_index_and_metrics_show_the_workplace_figures(self, moderator, api_client, client, settings,
                                                              django_user_model):
        from moderation.models import QueueVisit

        settings.METRICS_TOKEN, settings.METRICS_CACHE_S = "scrape-me", 0
        scored(api_client, 0.6)
        review = decided(api_client, "rejected")
        services.review_override(review_id=review.pk, label="approved", reason="fine", moderator=moderator.user)
        waited = scored(api_client, 0.65)  # left the queue after 90 s: the time-in-queue figures
        services.review_override(review_id=waited.pk, label="approved", reason="ok",
                                 moderator=django_user_model.objects.create_user("sam"))
        visit = QueueVisit.objects.get(review=waited)
        QueueVisit.objects.filter(pk=visit.pk).update(anchor_at=visit.left_at - timedelta(seconds=90))
        html = moderator.get("/admin/").content.decode()
        assert 'id="queue-low_confidence"' in html and '<td class="depth">1</td>' in html
        row = html.split('id="queue-low_confidence"')[1].split("</tr>")[0]
        assert re.search(r"<td>1m (29|30)s / 1m (29|30)s \(1\)</td>", row), row  # p50 / p95 (reviews)
        assert "<td>mia</td><td>1</td>" in html.split('id="decisions-per-moderator"')[1]
        assert "<td>100%</td>" in html.split('id="overturns"')[1]
        body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(body) for s in family.samples}
        assert samples[("moderation_queue_depth", (("queue", "low_confidence"),))] == 1
        assert samples[("moderation_queue_oldest_age_seconds", (("queue", "low_confidence"),))] >= 0
        assert samples[("moderation_moderator_decisions_total", (("label", "approved"), ("moderator", "mia")))] == 1
        key = (("category", "harassment"), ("policy_version", "1"))
        assert samples[("moderation_overturn_rate", key)] == 1.0
        assert samples[("moderation_model_decisions_overturned_total", key)] == 1
        for quantile in ("0.5", "0.95"):
            waited_s = samples[("moderation_time_in_queue_seconds", (("quantile", quantile), ("queue", "low_confidence")))]
            assert waited_s == pytest.approx(90, abs=2)
