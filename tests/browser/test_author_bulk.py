"""Authors in the workplace, end to end in a real browser (docs/workplace.md, "Authors"). With
UPDATE_SCREENSHOTS=1 (`make screenshots`) its screenshots go to docs/screenshots/. A
moderator finds a spam account by searching the author list, opens its page, reads its
timeline (content, the report, the strikes), and rejects everything it posted today with a
canned reason: the author's bulk job, its confirmation, the job run, the items decided (those
the model had rejected already skipped, saying so). The account's older post and another
author's post stay as they were."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from moderation import services
from moderation.models import Author, BulkItemOutcome, BulkJob, ContentReview, Decision, DecisionSource
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff, waiting  # noqa: F401  (shots: a fixture)
from tests.helpers import result

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
WAVE = 6


def test_a_moderator_finds_a_spam_account_reads_its_timeline_and_rejects_everything_it_posted_today(
        live_server, api_client, django_user_model, shots):  # noqa: F811
    older = waiting(api_client, "Selling my old bike, 40 euros", {"spam": 0.55}, author_id="spam-7")
    ContentReview.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=3))
    for text in ("BUY followers now at promo.example", "Best followers at promo.example"):
        rejected, _ = services.review_submit(client=api_client, external_id=text, kind="text", text=text,
                                             author_id="spam-7")
        request = services.review_claim(review_id=rejected.pk, worker_id="worker-1")
        services.review_finalize(idempotency_key=request.idempotency_key, cause="provider_result", result=result(0.95))
    wave = [waiting(api_client, f"Cheap watches at shop.example, deal {i}", {"spam": 0.6}, author_id="spam-7")
            for i in range(WAVE)]
    services.report_file(review_id=wave[0].pk, reporter_id="reader-1", reason="spam")
    bystander = waiting(api_client, "Cheap watches? I bought one, it broke", {"spam": 0.55}, author_id="reader-1")
    staff(django_user_model, "mia", "supervisor")
    author = Author.objects.get(client=api_client, author_id="spam-7")

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/author/")
        page.fill("#searchbar", "spam-7")
        page.press("#searchbar", "Enter")
        page.wait_for_selector("#result_list")
        found = page.inner_text("#result_list")
        page.screenshot(path=str(shots / "author-search.png"), full_page=True)
        page.click("#result_list a:text('spam-7')")
        page.wait_for_selector("#author-timeline")
        timeline = page.inner_text("#author-timeline")
        page.locator("#author-bulk").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "author-timeline.png"), full_page=False)
        page.select_option("#author-bulk-submitted", "today")
        page.click("#author-bulk-override")
        page.wait_for_selector("#bulk-form")
        where = page.inner_text("#bulk-query")
        page.check("input[name=label][value=rejected]")
        page.select_option("#id_category", "spam")
        page.check("input[name=reason_codes][value='spam:scam']")
        page.click("#bulk-prepare")
        page.wait_for_selector("#bulk-start")
        confirm = page.inner_text("#bulk-summary") + " " + page.inner_text("#bulk-count")
        page.screenshot(path=str(shots / "author-bulk-confirm.png"), full_page=True)
        page.click("#bulk-start")
        page.wait_for_selector("#bulk-figures")
        job_url = page.url

    job = BulkJob.objects.get()
    services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 120)

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(job_url)
        page.wait_for_selector("#bulk-figures")
        figures, status = page.inner_text("#bulk-figures"), page.inner_text("#bulk-status")
        page.goto(f"{live_server.url}/admin/moderation/author/{author.pk}/change/")
        page.wait_for_selector("#author-timeline")
        after = page.inner_text("#author-timeline")

    assert "spam-7" in found and "acme" in found and "reader-1" not in found
    assert "Cheap watches at shop.example, deal 5" in timeline and "Reported" in timeline
    assert timeline.count("Strike") == 2 and "Selling my old bike" in timeline
    assert timeline.index("deal 5") < timeline.index("deal 0") < timeline.index("Selling my old bike")  # newest first
    assert "spam-7 (acme)" in where and "today (UTC)" in where
    assert "Reject (spam)" in confirm and "Canned reasons: scam" in confirm and f"act on {WAVE + 2} reviews" in confirm
    assert "Done" in status
    assert job.items.filter(outcome=BulkItemOutcome.DONE).count() == WAVE
    # Today's posts the model had rejected already: skipped, saying so.
    assert list(job.items.filter(outcome=BulkItemOutcome.SKIPPED).values_list("reason", flat=True)) == [
        "already rejected"] * 2
    decisions = Decision.objects.filter(review__in=wave, source=DecisionSource.MODERATOR)
    assert {(d.label, d.category, tuple(d.reason_codes)) for d in decisions} == {("rejected", "spam", ("scam",))}
    assert decisions.count() == WAVE
    assert after.count("Rejected (moderator, spam)") == WAVE
    for untouched in (older, bystander):
        untouched.refresh_from_db()
        assert untouched.status == "manual_review"
    assert str(WAVE) in figures
