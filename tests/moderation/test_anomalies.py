"""Anomaly alarms: automatic decisions counted per hour a minute behind the live path, once even
with two counters at once; a signal out of its band around its 7-day baseline shows on the admin
index and at /metrics (docs/quality.md, "Anomaly alarms")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from moderation.models import Decision, DecisionRollup, QualityCursor, ReviewStatus
from moderation.observability.anomalies import anomalies, signal_figures
from moderation.quality.alarms import decisions_roll_up
from tests.helpers import collide, decided, reads_wait_for_each_other, staff_browser
from tests.moderation.test_shadows import judged_live

pytestmark = pytest.mark.django_db


def settle():
    """Every decision made so far is older than the counter's settling time."""
    Decision.objects.update(created_at=timezone.now() - timedelta(minutes=5))


def counts() -> dict[str, int]:
    totals: dict[str, int] = {}
    for key, n in DecisionRollup.objects.values_list("key", "count"):
        totals[key] = totals.get(key, 0) + n
    return totals


def test_decisions_are_counted_per_hour_by_label_and_rule_once_they_settled(api_client, local):
    reviews = [judged_live(api_client, text) for text in
               ("you are a worthless idiot and everyone hates you", "what a stupid idea, honestly", "have a nice day")]
    assert decisions_roll_up() == 0  # made this instant: not settled yet
    settle()

    assert decisions_roll_up() == 3
    assert decisions_roll_up() == 0

    labels = [r.decision.label for r in reviews]
    totals = counts()
    assert {k: v for k, v in totals.items() if k.startswith("label:")} == {
        f"label:{label}": labels.count(label) for label in set(labels)}
    matched_rules = {m["rule"] for r in reviews for m in r.decision.rule_matches if m["action"] != "allow"}
    assert matched_rules and {k.removeprefix("rule:") for k in totals if k.startswith("rule:")} == matched_rules
    assert QualityCursor.objects.get().last_id == max(r.decision.pk for r in reviews)


@pytest.mark.django_db(transaction=True)
def test_two_counters_at_once_count_each_decision_once(api_client, monkeypatch):
    """The guard: the cursor's row, taken FOR UPDATE SKIP LOCKED. Without it both read the same
    cursor and count the same decisions twice."""
    for label in ("approved", "rejected", "approved"):
        decided(api_client, label)
    settle()
    QualityCursor.objects.create(name="rollup")
    reads_wait_for_each_other(monkeypatch, QualityCursor, 2)

    collide(2, lambda i: decisions_roll_up())

    assert counts() == {"label:approved": 2, "label:rejected": 1}


def rollup(hour, **shares):
    for key, n in shares.items():
        DecisionRollup.objects.create(hour=hour, key=key.replace("__", ":").replace("_", "-"), count=n)


def last_full_hour():
    return timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def a_week_of_baseline(rejected=10, approved=90):
    hour = last_full_hour()
    for h in range(1, 24 * 7, 6):
        rollup(hour - timedelta(hours=h), label__rejected=rejected, label__approved=approved)


def test_a_rejection_rate_out_of_its_band_is_an_anomaly_and_one_within_is_not(settings):
    settings.ANOMALY_BAND, settings.ANOMALY_MIN_DELTA, settings.ANOMALY_MIN_DECISIONS = 0.5, 0.02, 100
    a_week_of_baseline()
    rollup(last_full_hour(), label__rejected=40, label__approved=160, rule__insult_id=30)

    found = {a.signal: a for a in anomalies()}

    assert set(found) == {"label:rejected", "rule:insult-id"}
    assert found["label:rejected"].now == pytest.approx(0.2) and found["label:rejected"].baseline == pytest.approx(0.1)
    assert found["label:rejected"].direction == "up" and found["rule:insult-id"].baseline == 0
    assert found["rule:insult-id"].name == "match rate of rule insult-id"

    DecisionRollup.objects.filter(hour=last_full_hour(), key="label:rejected").update(count=24)  # 13%: within 50%
    DecisionRollup.objects.filter(key="rule:insult-id").delete()
    assert anomalies() == []


def test_an_hour_with_too_few_decisions_raises_nothing(settings):
    settings.ANOMALY_MIN_DECISIONS = 100
    a_week_of_baseline()
    rollup(last_full_hour(), label__rejected=40, label__approved=10)  # 80%, but 50 decisions
    total, figures = signal_figures()
    assert total == 50 and anomalies() == []
    assert {f.signal for f in figures} >= {"label:rejected", "label:manual_review"}


def test_the_admin_index_and_metrics_show_an_anomaly(client, settings, django_user_model):
    settings.METRICS_TOKEN, settings.METRICS_CACHE_S = "scrape-me", 0
    a_week_of_baseline()
    rollup(last_full_hour(), label__rejected=80, label__approved=120)
    supervisor = staff_browser(django_user_model, "sup-7", "supervisor")

    html = supervisor.get("/admin/").content.decode()
    assert 'id="anomalies"' in html and "The rejection rate went up: 40% of 200 automatic decisions" in html
    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
    assert 'moderation_anomaly{signal="label:rejected"} 1.0' in metrics
    assert 'moderation_decision_share{signal="label:rejected",window="1h"} 0.4' in metrics

    DecisionRollup.objects.filter(hour=last_full_hour()).delete()
    rollup(last_full_hour(), label__rejected=20, label__approved=180)
    assert 'id="anomalies"' not in supervisor.get("/admin/").content.decode()


def test_an_overridden_decision_is_still_counted_as_the_provider_made_it(api_client):
    review = decided(api_client, ReviewStatus.REJECTED)
    settle()
    decisions_roll_up()
    assert counts() == {"label:rejected": 1} and review.decision.source == "provider"
