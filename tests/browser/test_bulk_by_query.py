"""A bulk action over a search of 500 reviews, in a real browser: the moderator filters the review
list, asks to reject all that match, confirms on a page of counts and excerpts, and watches the
job's page; mid-way another moderator decides one of the 500 themselves, and the job skips that
one and lists it with the reason. The job runs in a worker thread through the service the
django-q2 task calls, in two slices. With UPDATE_SCREENSHOTS=1 the screenshots go to docs/screenshots/."""

from __future__ import annotations

import threading
import time as real_time
from itertools import count
from types import SimpleNamespace

import pytest
from django.db import connection

from moderation import services
from moderation.models import BulkItemOutcome, BulkJob, ContentReview, Decision, DecisionSource
from moderation.services import bulk
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, shots, staff, waiting  # noqa: F401  (shots: a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
WAVE, HALF = 500, 250


def test_a_bulk_rejection_over_a_search_of_500_skips_and_lists_the_one_another_moderator_decided_mid_way(
    live_server, api_client, other_client, django_user_model, shots, monkeypatch  # noqa: F811
):
    wave = [waiting(other_client, f"Cheap watches at shop.example, offer number {i}", {"spam": 0.6})
            for i in range(WAVE)]
    bystander = waiting(api_client, "Cheap watches at shop.example, offer number 7", {"spam": 0.6})  # another client
    staff(django_user_model, "mia", "moderator")
    sam = staff(django_user_model, "sam", "moderator")
    changed = wave[400]
    query = f"?client__id__exact={other_client.pk}&status__exact=manual_review"
    started, half_done, go_on, finished = (threading.Event() for _ in range(4))
    ticks = count(start=0)

    def worker():
        """A django-q2 worker's two slices, with sam's decision between them."""
        try:
            assert started.wait(60)
            job = BulkJob.objects.get()
            monkeypatch.setattr(bulk, "time", SimpleNamespace(monotonic=lambda: float(next(ticks))))
            services.bulk_job_run(job_id=job.pk, deadline=HALF)  # exactly HALF reviews: one clock tick each
            monkeypatch.setattr(bulk, "time", real_time)
            services.review_override(review_id=changed.pk, label="approved", reason="a real shop, not spam",
                                     moderator=sam, expected_version=changed.version)
            half_done.set()
            assert go_on.wait(60)
            services.bulk_job_run(job_id=job.pk, deadline=real_time.monotonic() + 120)
        finally:
            finished.set()
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        with chromium() as browser:
            page = log_in(browser, live_server, "mia")
            page.goto(f"{live_server.url}/admin/moderation/contentreview/{query}")
            page.wait_for_selector("#result_list")
            page.click("#bulk-override")
            page.wait_for_selector("#bulk-form")
            counted = page.inner_text("#bulk-count")
            page.check("input[name=label][value=rejected]")
            page.select_option("#id_category", "spam")
            page.fill("#id_reason", "A spam wave from one shop.")
            page.click("#bulk-prepare")
            page.wait_for_selector("#bulk-start")
            confirm = {"count": page.inner_text("#bulk-count"), "statuses": page.inner_text("#bulk-statuses"),
                       "sample": page.inner_text("#bulk-sample"), "button": page.inner_text("#bulk-start")}
            page.screenshot(path=str(shots / "bulk-confirm.png"), full_page=True)
            page.click("#bulk-start")
            page.wait_for_selector("#bulk-figures")
            started.set()

            assert half_done.wait(120)
            page.reload()
            mid_way = {k: page.inner_text(f"#bulk-{k}") for k in ("done", "remaining")}
            cancel_offered = page.locator("#bulk-cancel").count()
            go_on.set()
            assert finished.wait(120)
            # The page refreshes itself while the job runs: no reload here.
            page.wait_for_function("() => document.querySelector('#bulk-status').innerText.includes('Done')",
                                   timeout=30_000)
            final = {k: page.inner_text(f"#bulk-{k}") for k in ("done", "skipped-count", "remaining")}
            skipped = page.inner_text("#bulk-skipped")
            page.screenshot(path=str(shots / "bulk-job.png"), full_page=True)
    finally:
        started.set(), go_on.set()
        thread.join(120)

    assert counted.startswith("500 reviews match")
    assert confirm["count"].startswith("This job will act on 500 reviews")
    assert "Manual review\t500" in confirm["statuses"]
    assert "Cheap watches at shop.example, offer number 0" in confirm["sample"]
    assert str(wave[0].pk) not in confirm["sample"] and wave[0].short_id not in confirm["sample"]
    assert confirm["button"] == "Reject (spam): 500 reviews"
    assert mid_way == {"done": str(HALF), "remaining": str(WAVE - HALF)} and cancel_offered == 1
    assert final == {"done": str(WAVE - 1), "skipped-count": "1", "remaining": "0"}
    assert "offer number 400" in skipped
    assert "it changed since you opened it: approved by moderator sam at " in skipped, skipped
    assert "manual_review" not in skipped and "manual_override" not in skipped
    changed.refresh_from_db()
    assert changed.status == "approved" and changed.decision.moderator == sam
    assert Decision.objects.filter(review=changed, source=DecisionSource.MODERATOR).count() == 1
    assert ContentReview.objects.filter(pk__in=[r.pk for r in wave], status="rejected").count() == WAVE - 1
    assert BulkJob.objects.get().items.get(review=changed).outcome == BulkItemOutcome.SKIPPED
    bystander.refresh_from_db()
    assert bystander.status == "manual_review"
