"""A bulk override records what the moderator chose, as a single decision does (issue: "Bulk
'override all matching' drops canned reasons"): in a real browser, a moderator rejects every
review of a spam wave with a canned reason only, no words of their own, and keeps their words
from the user on a second job; every review is decided, each decision carries the canned reason,
and the user is sent the words only when the moderator said so."""

from __future__ import annotations

import time

import pytest

from moderation import services
from moderation.models import BulkItemOutcome, BulkJob, Decision, DecisionSource
from tests.browser.test_moderator_flow import CHROMIUM, chromium, log_in, staff, waiting

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM, reason="no Chromium installed: apt-get install chromium (.ci/run does)"),
]
WAVE = 12


def test_a_bulk_rejection_with_only_a_canned_reason_decides_every_review_with_it(
        live_server, other_client, django_user_model):
    wave = [waiting(other_client, f"Cheap watches at shop.example, deal {i}", {"spam": 0.6}) for i in range(WAVE)]
    staff(django_user_model, "mia", "supervisor")
    query = f"?client__id__exact={other_client.pk}&status__exact=manual_review"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{query}")
        page.click("#bulk-override")
        page.wait_for_selector("#bulk-form")
        page.check("input[name=label][value=rejected]")
        page.select_option("#id_category", "spam")
        page.check("input[name=reason_codes][value='spam:scam']")
        page.click("#bulk-prepare")
        page.wait_for_selector("#bulk-start")
        confirm = page.inner_text("#bulk-summary")
        page.click("#bulk-start")
        page.wait_for_selector("#bulk-figures")

    job = BulkJob.objects.get()
    services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 120)

    assert "Canned reasons: scam" in confirm
    assert job.items.filter(outcome=BulkItemOutcome.DONE).count() == WAVE, list(job.items.values_list("reason", flat=True))
    decisions = Decision.objects.filter(review__in=wave, source=DecisionSource.MODERATOR)
    assert decisions.count() == WAVE
    assert {(d.label, d.category, tuple(d.reason_codes), d.reason_shared) for d in decisions} == {
        ("rejected", "spam", ("scam",), False)}


def test_a_bulk_rejections_words_reach_the_user_only_when_the_moderator_says_so(
        live_server, other_client, django_user_model):
    wave = [waiting(other_client, f"Cheap bags at shop.example, deal {i}", {"spam": 0.6}) for i in range(4)]
    staff(django_user_model, "mia", "supervisor")
    query = f"?client__id__exact={other_client.pk}&status__exact=manual_review"

    with chromium() as browser:
        page = log_in(browser, live_server, "mia")
        page.goto(f"{live_server.url}/admin/moderation/contentreview/{query}")
        page.click("#bulk-override")
        page.wait_for_selector("#bulk-form")
        page.check("input[name=label][value=rejected]")
        page.select_option("#id_category", "spam")
        page.check("input[name=reason_codes][value='spam:commercial']")
        page.fill("#id_reason", "The same shop posted this wave from 40 accounts.")
        page.check("#id_share_reason")
        page.click("#bulk-prepare")
        page.wait_for_selector("#bulk-start")
        confirm = page.inner_text("#bulk-summary")
        page.click("#bulk-start")
        page.wait_for_selector("#bulk-figures")

    services.bulk_job_run(job_id=BulkJob.objects.get().pk, deadline=time.monotonic() + 120)

    assert "(sent to the user)" in confirm
    decisions = Decision.objects.filter(review__in=wave, source=DecisionSource.MODERATOR)
    assert {(tuple(d.reason_codes), d.reason_shared, d.reason) for d in decisions} == {
        (("commercial",), True, "The same shop posted this wave from 40 accounts.")}
