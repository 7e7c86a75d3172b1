"""The race lab's author traffic (lab/author_traffic.py), run for a few seconds in-process against
authors with strikes: its threads act, appeal and sweep concurrently, every refusal is one the
services name, and the invariant checker finds nothing."""

from __future__ import annotations

import time
import uuid

import pytest

from lab.author_traffic import AuthorTraffic
from lab.race_lab import LabConfig
from moderation import services
from moderation.invariants import violations
from moderation.models import AccountAction, ContentReview, StandingTransition
from tests.helpers import SCORE_FOR, result


def test_the_reviews_are_spread_over_one_author_per_twenty_by_default():
    assert LabConfig(reviews=1000).author_count == 50
    assert LabConfig(reviews=5).author_count == 1
    assert LabConfig(reviews=1000, authors=0).author_count == 0


@pytest.mark.django_db(transaction=True)
def test_the_author_traffic_acts_appeals_and_sweeps_without_breaking_an_invariant(api_client):
    for i in range(24):  # four authors, six reviews each, two in three rejected: ladders climbed
        review, _ = services.review_submit(client=api_client, external_id=uuid.uuid4().hex, kind="text",
                                           text="a sentence", author_id=f"a{i % 4}")
        key = services.review_claim(review_id=review.pk, worker_id="w1").idempotency_key
        services.review_finalize(idempotency_key=key, cause="provider_result",
                                 result=result(SCORE_FOR["approved" if i % 3 == 0 else "rejected"]))
    traffic = AuthorTraffic(api_client, moderator_rate=20, stale_rate=0.3, override_rate=0.2,
                            account_appeal_rate=1.0, sweep_ahead_days=10, lapse_rate=0.1, seed=5)
    threads = traffic.start()
    time.sleep(6)
    traffic.done.set()
    for thread in threads:
        thread.join(timeout=60)

    assert traffic.unexpected == []
    assert not any(thread.is_alive() for thread in threads)
    counts = traffic.counts
    assert counts["expiry runs"] >= 4 and any(k.startswith("account appeal") for k in counts), counts
    assert any(k.endswith("refused: StaleAuthor") for k in counts), counts
    assert AccountAction.objects.filter(cause="moderator").exists()
    assert AccountAction.objects.filter(cause="strikes").exists()
    assert StandingTransition.objects.filter(cause__in=["expired", "lifted", "overturned"]).exists()
    assert violations(ContentReview.objects.values_list("pk", flat=True)) == []
    assert traffic.figures()["author traffic errors"] == 0
