"""What the moderator sees of a review's reports: the reports queue lists each review's count,
weighted score, reasons and pile-on mark; the review page sums them up, prefills the category from
the reporters' most common reason, and its decisions read "Agree with reports" and "Disagree".

Pile-on marks and weights are set on the rows here: how reports get them is the report path's
(moderation/services/reports.py), not the workplace's."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.utils.html import escape

from moderation import services
from moderation.models import ContentReview, PileOn, Report
from moderation.observability.workplace import report_summaries
from tests.helpers import assert_max_queries, decided, staff_browser

pytestmark = pytest.mark.django_db

LIST = "/admin/moderation/contentreview/"
REPORTS_QUEUE = f"{LIST}queues/?queue=reports"


@pytest.fixture
def moderator(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


def reported(client, reasons: list[str], *, weights: list[str] | None = None, pile_on: str = "",
             external_id: str | None = None) -> ContentReview:
    """An approved review reported once per reason (distinct reporters): three or more send it to the
    reports queue. `weights` are the reporters' weights when they reported."""
    review = decided(client, "approved")
    if external_id:
        review.content.__class__.objects.filter(pk=review.content_id).update(external_id=external_id)
    for i, reason in enumerate(reasons):
        filed = services.report_file(review_id=review.pk, reporter_id=f"{review.short_id}-u{i}", reason=reason)
        if weights:
            Report.objects.filter(pk=filed.report.pk).update(weight=Decimal(weights[i]))
    if pile_on:
        ContentReview.objects.filter(pk=review.pk).update(pile_on=pile_on)
    review.refresh_from_db()
    return review


def queue_row(html: str, review: ContentReview) -> str:
    return html.split(f'id="queue-item-{review.short_id}"')[1].split("</tr>")[0]


def cell(row: str, name: str) -> str:
    return re.sub(r"<[^>]+>", "", re.search(rf'class="{name}">(.*?)</td>', row, re.S).group(1)).strip()


def page(browser, review) -> str:
    return browser.get(f"{LIST}{review.pk}/timeline/").content.decode()


def selected_category(html: str) -> str:
    select = html.split('name="category"')[1].split("</select>")[0]
    chosen = re.search(r'<option value="([^"]*)" selected>', select)
    return chosen.group(1) if chosen else ""


class TestTheReportsQueue:
    def test_each_row_shows_the_count_the_weighted_score_the_reasons_and_the_pile_on_mark(self, moderator, api_client):
        review = reported(api_client, ["spam", "spam", "hate", "spam"], weights=["1.5", "0.5", "2", "1"],
                          pile_on=PileOn.BURST)

        row = queue_row(moderator.get(REPORTS_QUEUE).content.decode(), review)

        assert cell(row, "report-count") == "4"
        assert cell(row, "report-weight") == "5.00"
        assert cell(row, "report-reasons") == "spam ×3, hate ×1"
        assert 'class="badge pile-on pile-on-burst"' in row and "pile-on: burst" in row
        assert f'title="{escape(PileOn.BURST.label)}"' in row

    def test_a_review_without_a_pile_on_has_no_mark_and_a_low_accuracy_one_says_so(self, moderator, api_client):
        calm = reported(api_client, ["spam"] * 3)
        doubtful = reported(api_client, ["hate"] * 3, pile_on=PileOn.LOW_ACCURACY)

        html = moderator.get(REPORTS_QUEUE).content.decode()

        assert "pile-on" not in queue_row(html, calm)
        assert "pile-on: low accuracy" in queue_row(html, doubtful)

    def test_only_the_reports_of_the_decision_in_force_are_counted(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3)
        older = Report.objects.filter(review=review).first()
        # A report made against an earlier decision (the count started again since) is not this one's.
        earlier = services.review_override(review_id=review.pk, label="approved", reason="fine",
                                           moderator=moderator.user)
        for i in range(3):
            services.report_file(review_id=review.pk, reporter_id=f"again-{i}", reason="violence")
        assert Report.objects.filter(review=review).count() == 6 and older.decision_id != earlier.pk

        row = queue_row(moderator.get(REPORTS_QUEUE).content.decode(), review)

        assert cell(row, "report-count") == "3" and cell(row, "report-reasons") == "violence ×3"

    def test_many_reasons_show_the_three_most_common_and_count_the_rest(self, moderator, api_client):
        review = reported(api_client, ["spam", "spam", "spam", "hate", "hate", "violence", "sexual", "other"])

        row = queue_row(moderator.get(REPORTS_QUEUE).content.decode(), review)

        # Ties in name order: hate before violence; other and sexual are counted.
        assert cell(row, "report-reasons") == "spam ×3, hate ×2, other ×1 and 2 more"

    def test_a_queue_without_reports_shows_no_report_columns(self, moderator, api_client):
        html = moderator.get(f"{LIST}queues/?queue=low_confidence").content.decode()
        assert "report-count" not in html and ">weighted<" not in html

    def test_the_page_costs_the_same_queries_for_one_reported_review_or_many(self, moderator, api_client):
        reported(api_client, ["spam"] * 3)
        with assert_max_queries(100) as one:
            moderator.get(REPORTS_QUEUE)
        for n in range(12):
            reported(api_client, ["spam", "hate", "violence", "other"][: 3 + n % 2] * 2, pile_on=PileOn.BURST)
        with assert_max_queries(100) as many:
            html = moderator.get(REPORTS_QUEUE).content.decode()

        assert html.count("queue-item-") == 13
        assert len(many.capture.captured_queries) == len(one.capture.captured_queries)
        report_reads = [q["sql"] for q in many.capture.captured_queries if '"moderation_report"' in q["sql"]]
        assert len(report_reads) == 1 and '"moderation_report"."review_id" IN' in report_reads[0]

    def test_the_review_list_shows_the_pile_on_mark_beside_the_queue(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3, pile_on=PileOn.BURST)
        html = moderator.get(LIST).content.decode()
        row = next(tr for tr in html.split("<tr") if f">{review.short_id}</a>" in tr)
        assert "queue-reports" in row and "pile-on: burst" in row

    def test_hostile_reasons_are_escaped_in_the_queue_and_on_the_page(self, moderator, api_client):
        hostile = '<img src=x onerror=alert("r")>'
        review = reported(api_client, [hostile[:64]] * 3, pile_on="<b>x</b>")

        for html in (moderator.get(REPORTS_QUEUE).content.decode(), page(moderator, review)):
            assert hostile not in html and "<b>x</b>" not in html
            assert "&lt;img src=x onerror=alert(&quot;r&quot;)&gt; ×3" in html


class TestTheReviewPage:
    def test_the_page_sums_up_the_reports_and_shows_the_pile_on_mark(self, moderator, api_client):
        review = reported(api_client, ["spam", "spam", "hate"], weights=["2", "0.5", "1"], pile_on=PileOn.LOW_ACCURACY)
        services.report_file(review_id=review.pk, reporter_id="flagger", reason="spam", kind="trusted_flagger")

        summary = page(moderator, review).split('id="report-summary">')[1].split("</p>")[0]
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", summary))

        assert "pile-on: low accuracy" in text
        assert "4 reports" in text and "weighted score 4.50" in text
        assert "reasons: spam ×3, hate ×1" in text and "kinds: User ×3, Trusted flagger ×1" in text

    def test_the_decisions_read_agree_with_reports_and_disagree_and_keep_their_keys(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3)

        html = page(moderator, review)
        decide = html.split('id="decide-form"')[1].split("</form>")[0]
        shortcuts = html.split('id="shortcuts"')[1].split("</p>")[0]

        assert re.search(r'value="rejected"[^>]*>\s*Agree with reports', decide)
        assert re.search(r'value="approved"[^>]*>\s*Disagree', decide)
        assert ">Reject<" not in decide and "Approve" not in decide
        assert "<kbd>a</kbd> disagree (approve)" in shortcuts and "<kbd>r</kbd> agree with reports (reject)" in shortcuts
        # The keyboard picks the same inputs by value.
        assert 'input[name=label][value=" + label + "]' in html and 'choose("rejected", category)' in html

    def test_agree_with_reports_rejects_with_the_prefilled_category(self, moderator, api_client):
        review = reported(api_client, ["hate", "hate", "spam"])
        html = page(moderator, review)
        assert selected_category(html) == "hate"

        moderator.post(f"{LIST}{review.pk}/act/override/", {
            "label": "rejected", "category": selected_category(html), "reason": "slur", "version": review.version})

        review.refresh_from_db()
        assert (review.status, review.decision.category) == ("rejected", "hate")

    def test_a_review_without_open_reports_reads_approve_and_reject(self, moderator, api_client):
        review = decided(api_client, "manual_review")
        decide = page(moderator, review).split('id="decide-form"')[1].split("</form>")[0]
        assert re.search(r'value="rejected"[^>]*>\s*Reject', decide) and "Agree with reports" not in decide

    def test_resolved_reports_do_not_ask_for_agreement(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3)
        decision = review.decision
        Report.objects.filter(review=review).update(outcome="no_action", resolved_at=decision.created_at,
                                                    resolved_by=decision)
        html = page(moderator, review)
        assert "Agree with reports" not in html and "(0 open)" in html


class TestThePrefilledCategory:
    def test_a_reason_that_is_no_category_prefills_nothing(self, moderator, api_client):
        review = reported(api_client, ["other", "other", "spam"])
        assert selected_category(page(moderator, review)) == ""

    def test_a_reason_the_policy_no_longer_has_prefills_nothing(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3)
        fields = services.policy_fields(services.policy_active())
        services.policy_publish(**{**fields, "categories": ["hate", "violence"]})
        assert selected_category(page(moderator, review)) == ""

    def test_the_category_of_the_decision_in_force_wins_over_the_reports(self, moderator, api_client):
        review = decided(api_client, "manual_review")
        services.review_override(review_id=review.pk, label="rejected", category="violence", reason="threat",
                                 moderator=moderator.user)
        services.appeal_file(review_id=review.pk, appellant_id="author", statement="it was a joke")
        for i in range(3):
            services.report_file(review_id=review.pk, reporter_id=f"u{i}", reason="spam")
        other = staff_browser(moderator.user.__class__, "sam", "moderator")  # four eyes: not the appealed moderator

        assert selected_category(page(other, review)) == "violence"

    def test_the_moderators_own_choice_is_the_one_decided(self, moderator, api_client):
        review = reported(api_client, ["spam"] * 3)
        assert selected_category(page(moderator, review)) == "spam"

        moderator.post(f"{LIST}{review.pk}/act/override/", {
            "label": "rejected", "category": "hate", "reason": "a slur, not spam", "version": review.version})

        review.refresh_from_db()
        assert review.decision.category == "hate"

    def test_the_most_common_reason_is_read_in_one_query_with_the_summary(self, api_client):
        review = reported(api_client, ["violence", "spam", "spam"])
        with assert_max_queries(1):
            summary = report_summaries([review])[review.pk]
        assert (summary.top_reason, summary.count, summary.open) == ("spam", 3, 3)
        assert report_summaries([]) == {}


def test_the_summary_reads_the_pages_reports_by_index_not_by_scanning_every_report(moderator, api_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    review = reported(api_client, ["spam"] * 3)
    crowded = decided(api_client, "rejected")  # thousands of reports elsewhere: the table is large
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO moderation_report (id, review_id, decision_id, reporter_id, kind, reason, detail, weight,"
            " created_at, outcome) SELECT gen_random_uuid(), %s, %s, 'bulk-' || g, 'user', 'spam', '', 1, now(), ''"
            " FROM generate_series(1, 5000) g", [crowded.pk, crowded.decision_id])
        cursor.execute("ANALYZE moderation_report")
    with CaptureQueriesContext(connection) as captured:
        moderator.get(REPORTS_QUEUE)
    [sql] = [q["sql"] for q in captured.captured_queries if '"moderation_report"' in q["sql"]]

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row for (row,) in cursor.fetchall())
    assert "Seq Scan on moderation_report" not in plan, plan
    assert report_summaries([review])[review.pk].count == 3
