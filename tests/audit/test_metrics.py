"""/metrics after a scripted run of the pipeline: exact counter values, read from the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from audit.models import Actor, ReviewTransition
from moderation import services, tasks
from moderation.models import ModerationRequest, Report, ReportKind, ReportOutcome
from moderation.providers import Accepted
from tests.callbacks.conftest import SECRET, completed, deliver
from tests.helpers import claimed, decided, submit


@pytest.fixture(autouse=True)
def uncached(settings):
    settings.METRICS_CACHE_S = 0  # every scrape computes afresh in these tests


def scrape(client, token="scrape-me") -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.django_db(transaction=True)  # in the test's transaction a callback_to_final time exceeds 0.5 s
def test_the_counters_after_a_lost_claim_duplicate_callbacks_and_a_late_result_are_exact(client, api_client, settings):
    settings.METRICS_TOKEN = "scrape-me"
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}
    # One review: a second worker loses the claim, then its callback is delivered three times.
    review, request = claimed(api_client)
    assert services.review_claim(review_id=review.pk, worker_id="late-worker") is None
    for _ in range(3):
        deliver(completed(request.idempotency_key, score=0.95), event_id="evt_a")
    # Another: superseded, then the old operation's result arrives late.
    other, old = claimed(api_client)
    new = services.review_supersede(review_id=other.pk, reason="silent")
    deliver(completed(new.idempotency_key, score=0.1), event_id="evt_b")
    deliver(completed(old.idempotency_key, score=0.95), event_id="evt_c")

    m = scrape(client)

    assert m[("moderation_duplicate_callbacks_total", (("provider", "webhook"),))] == 2
    assert m[("moderation_lost_updates_total", (("kind", "claim_lost"),))] == 1
    assert m[("moderation_lost_updates_total", (("kind", "stale_result"),))] == 1
    assert m[("moderation_lost_updates_total", (("kind", "duplicate_result"),))] == 0
    assert m[("moderation_callbacks_total", (("outcome", "applied"), ("provider", "webhook")))] == 2
    assert m[("moderation_callbacks_total", (("outcome", "stale"), ("provider", "webhook")))] == 1
    assert m[("moderation_retries_total", (("kind", "supersede"),))] == 1
    assert m[("moderation_reviews", (("status", "rejected"),))] == 1
    assert m[("moderation_reviews", (("status", "approved"),))] == 1
    assert m[("moderation_illegal_transitions_total", ())] == 0
    assert m[("moderation_latency_seconds_count", (("stage", "callback_to_final"),))] == 2
    assert m[("moderation_attempts_per_review_gcount", ())] == 0  # (no provider was called: callbacks only)
    assert m[("moderation_latency_seconds_bucket", (("le", "+Inf"), ("stage", "callback_to_final")))] == 2
    # Sub-second times land in sub-second buckets (fractions of a second are kept).
    assert m[("moderation_latency_seconds_bucket", (("le", "0.5"), ("stage", "callback_to_final")))] == 2
    assert 0 < m[("moderation_latency_seconds_sum", (("stage", "callback_to_final"),))] < 1


@pytest.mark.django_db
def test_metrics_need_the_token_or_a_staff_session(client, settings, django_user_model):
    settings.METRICS_TOKEN = "scrape-me"
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    client.force_login(django_user_model.objects.create_user("someone"))  # logged in, not staff
    assert client.get("/metrics").status_code == 401
    client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
    assert client.get("/metrics").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer é-not-ascii").status_code == 200  # staff; no crash
    client.logout()
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer é-not-ascii").status_code == 401


@pytest.mark.django_db
def test_without_a_token_configured_only_staff_may_scrape(client, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_attempts_per_review_counts_retries(client, api_client, scripted, settings):
    from datetime import timedelta

    from django.utils import timezone

    from moderation.providers.base import ProviderTimeout
    from tests.helpers import result, submit

    settings.METRICS_TOKEN = "scrape-me"
    scripted.script = [ProviderTimeout("slow"), result(0.1), result(0.1)]
    from moderation import tasks

    retried, first_time = submit(api_client), submit(api_client)
    tasks.moderate_review(retried.pk)
    request = retried.requests.get()
    services.request_dispatch(request_id=request.pk, worker_id="w", now=timezone.now() + timedelta(hours=1))
    tasks.moderate_review(first_time.pk)

    m = scrape(client)

    assert m[("moderation_attempts_per_review_bucket", (("le", "1"),))] == 1
    assert m[("moderation_attempts_per_review_bucket", (("le", "2"),))] == 2
    assert m[("moderation_attempts_per_review_gsum", ())] == 3
    assert m[("moderation_retries_total", (("kind", "same_key"),))] == 1


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_counters_never_count_transient_states(client, api_client, settings):
    import json as jsonlib

    from callbacks.payload import parse
    from callbacks.services import callback_process, callback_store

    settings.METRICS_TOKEN = "scrape-me"
    _, request = claimed(api_client)
    body = jsonlib.dumps(completed(request.idempotency_key))
    stored = callback_store(provider="webhook", event_id="evt_wait", body=body, headers={}, event=parse(body))
    before = scrape(client)
    callback_process(callback_id=stored.id)
    after = scrape(client)

    assert before[("moderation_callbacks_unprocessed", (("provider", "webhook"),))] == 1
    assert ("moderation_callbacks_total", (("outcome", ""), ("provider", "webhook"))) not in before
    assert after[("moderation_callbacks_total", (("outcome", "applied"), ("provider", "webhook")))] == 1


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_the_stuck_gauge_counts_silent_operations_not_retries_in_backoff(client, api_client, scripted, settings):
    from datetime import timedelta

    from django.utils import timezone

    from moderation.models import ContentReview, ModerationRequest
    from moderation.providers import Accepted
    from moderation.providers.base import ProviderServerError

    settings.METRICS_TOKEN = "scrape-me"
    scripted.script = [ProviderServerError("502"), Accepted("p1")]
    waiting, _ = claimed(api_client)
    services.request_dispatch(request_id=waiting.requests.get().pk, worker_id="w")  # retry in backoff
    silent, request = claimed(api_client)
    services.request_dispatch(request_id=request.pk, worker_id="w")  # accepted, then nothing
    long_ago = timezone.now() - timedelta(hours=2)
    ContentReview.objects.update(updated_at=long_ago)
    ModerationRequest.objects.update(updated_at=long_ago)

    assert scrape(client)[("moderation_reviews_stuck", ())] == 1


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_every_latency_stage_is_measured_from_submission_to_decision(client, api_client, scripted, settings):
    settings.METRICS_TOKEN = "scrape-me"
    settings.CALLBACK_SECRETS = {name: [SECRET] for name in ("webhook", "scripted", "local")}
    scripted.default = Accepted("prov-1")
    review = submit(api_client)
    waiting = scrape(client)
    tasks.moderate_review(review.pk)  # the provider accepts: the result comes by callback
    key = ModerationRequest.objects.get(review=review).idempotency_key
    deliver(completed(key, score=0.95), event_id="evt-stages")

    m = scrape(client)

    for stage in ("enqueue_to_provider_request", "provider_request_to_callback", "callback_to_final", "submit_to_final"):
        assert m[("moderation_latency_seconds_count", (("stage", stage),))] == 1, stage
        assert 0 <= m[("moderation_latency_seconds_sum", (("stage", stage),))] < 30, stage
    assert waiting[("moderation_oldest_waiting_seconds", (("queue", "pending"),))] > 0
    assert m[("moderation_oldest_waiting_seconds", (("queue", "pending"),))] == 0
    # The callback, not a worker, applied the result.
    applied = ReviewTransition.objects.filter(review=review).last()
    assert (applied.cause, applied.actor, applied.actor_id) == ("provider_callback", Actor.WEBHOOK, "evt-stages")


@pytest.mark.django_db
def test_reports_threshold_crossings_and_appeals_are_counted_with_their_time_to_resolve(
    client, api_client, settings, django_user_model
):
    settings.METRICS_TOKEN = "scrape-me"
    reported = decided(api_client, "approved")
    for reporter in ("a", "b", "c", "c", "d"):  # a repeat is one report; the threshold (3) is crossed once
        services.report_file(review_id=reported.pk, reporter_id=reporter, reason="harassment")
    moderator = django_user_model.objects.create_user("mia")
    for label in ("rejected", "approved"):
        appealed = decided(api_client, "rejected")
        services.appeal_file(review_id=appealed.pk, appellant_id="owner", statement="wrong")
        services.review_override(review_id=appealed.pk, label=label, reason="looked again", moderator=moderator,
                                 category="harassment" if label == "rejected" else "")
    services.appeal_file(review_id=decided(api_client, "rejected").pk, appellant_id="owner", statement="wrong")

    m = scrape(client)

    assert m[("moderation_reports_total", (("kind", "user"),))] == 4
    assert m[("moderation_report_threshold_crossings_total", ())] == 1
    assert m[("moderation_appeals_filed_total", ())] == 3
    assert m[("moderation_appeals_resolved_total", (("outcome", "upheld"),))] == 1
    assert m[("moderation_appeals_resolved_total", (("outcome", "overturned"),))] == 1
    assert m[("moderation_appeals_open", ())] == 1
    assert m[("moderation_appeal_resolution_seconds_count", (("outcome", "upheld"),))] == 1
    assert m[("moderation_appeal_resolution_seconds_bucket", (("le", "60"), ("outcome", "overturned")))] == 1


def _report(review, kind: str, *, outcome: str = "", after_s: float | None = None) -> Report:
    """A report of `review` filed an hour ago and, with `outcome`, resolved `after_s` seconds later
    (by the review's decision unless it expired), as the resolution writes it."""
    filed = timezone.now() - timedelta(hours=1)
    report = Report.objects.create(review=review, reporter_id=f"{kind}-{Report.objects.count()}", kind=kind,
                                   reason="other")
    resolved = {} if not outcome else {
        "outcome": outcome, "resolved_at": filed + timedelta(seconds=after_s),
        "resolved_by": None if outcome == ReportOutcome.EXPIRED else review.decision,
        "agreed": None if outcome == ReportOutcome.EXPIRED else outcome == ReportOutcome.ACTIONED,
    }
    Report.objects.filter(pk=report.pk).update(created_at=filed, **resolved)
    return report


@pytest.mark.django_db
def test_reports_are_counted_by_kind_and_outcome_and_the_time_from_a_notice_to_its_decision_is_a_histogram(
    client, api_client, settings
):
    settings.METRICS_TOKEN = "scrape-me"
    rejected, approved = decided(api_client, "rejected"), decided(api_client, "approved")
    _report(rejected, ReportKind.DSA_NOTICE, outcome=ReportOutcome.ACTIONED, after_s=45)
    _report(approved, ReportKind.TRUSTED_FLAGGER, outcome=ReportOutcome.NO_ACTION, after_s=2 * 3600 - 1)
    waiting = _report(approved, ReportKind.DSA_NOTICE)
    _report(approved, ReportKind.USER)
    _report(approved, ReportKind.USER, outcome=ReportOutcome.EXPIRED, after_s=30 * 86400)
    _report(rejected, ReportKind.USER, outcome=ReportOutcome.ACTIONED, after_s=10)  # not a notice: no histogram

    m = scrape(client)

    assert [m[("moderation_reports_total", (("kind", k),))] for k in ReportKind.values] == [3, 2, 1]
    assert [m[("moderation_reports_open", (("kind", k),))] for k in ReportKind.values] == [1, 1, 0]
    resolved = {(k, o): m[("moderation_reports_resolved_total", (("kind", k), ("outcome", o)))]
                for k in ReportKind.values for o in ReportOutcome.values}
    assert {key: n for key, n in resolved.items() if n} == {
        ("user", "actioned"): 1, ("user", "expired"): 1, ("dsa_notice", "actioned"): 1,
        ("trusted_flagger", "no_action"): 1,
    }

    def histogram(kind, outcome, suffix, le=None):
        labels = (("kind", kind), *((("le", le),) if le else ()), ("outcome", outcome))
        return m[(f"moderation_notice_decision_seconds_{suffix}", labels)]

    assert histogram("dsa_notice", "actioned", "count") == 1 and histogram("dsa_notice", "actioned", "sum") == 45
    assert (histogram("dsa_notice", "actioned", "bucket", "30"), histogram("dsa_notice", "actioned", "bucket", "60")) == (0, 1)
    assert histogram("trusted_flagger", "no_action", "sum") == 2 * 3600 - 1
    assert (histogram("trusted_flagger", "no_action", "bucket", "3600"),
            histogram("trusted_flagger", "no_action", "bucket", "7200")) == (0, 1)
    assert histogram("dsa_notice", "no_action", "count") == histogram("trusted_flagger", "actioned", "count") == 0
    assert not any(name.startswith("moderation_notice_decision") and ("kind", "user") in labels for name, labels in m)

    # Resolving the open notice moves it from the gauge to the counters: nothing counted falls.
    Report.objects.filter(pk=waiting.pk).update(outcome=ReportOutcome.ACTIONED, resolved_at=timezone.now(),
                                                resolved_by=approved.decision, agreed=True)
    after = scrape(client)
    assert after[("moderation_reports_total", (("kind", "dsa_notice"),))] == 2
    assert after[("moderation_reports_open", (("kind", "dsa_notice"),))] == 0
    assert after[("moderation_reports_resolved_total", (("kind", "dsa_notice"), ("outcome", "actioned")))] == 2
    assert after[("moderation_notice_decision_seconds_count", (("kind", "dsa_notice"), ("outcome", "actioned")))] == 2


@pytest.mark.django_db
def test_authors_by_standing_account_actions_and_strikes_written_and_ended(client, api_client, settings,
                                                                            django_user_model):
    from datetime import timedelta

    from django.utils import timezone

    from moderation.models import AccountAction, Author, Strike
    from tests.moderation.test_authors import authored

    settings.METRICS_TOKEN = "scrape-me"
    moderator = django_user_model.objects.create_user("mia")
    rejected = [authored(api_client, "u1", "rejected") for _ in range(3)]  # the ladder warns u1
    services.review_override(review_id=rejected[0].pk, label="approved", reason="fine", moderator=moderator)
    services.review_override(review_id=rejected[1].pk, label="rejected", reason="hate", moderator=moderator,
                             category="hate")  # its strike replaced by a new one
    lapsing = authored(api_client, "u3", "rejected")
    Strike.objects.filter(review=lapsing).update(expires_at=timezone.now())
    assert services.strikes_lapse_due() == 1
    u2 = services.author_ensure(api_client, author_id="u2")
    action = services.author_act(author_pk=u2.pk, moderator=moderator, action="suspend", days=1, reason="spam")
    an_hour_ago = timezone.now() - timedelta(hours=1)  # the authors' schedule did not run since
    AccountAction.objects.filter(pk=action.pk).update(until=an_hour_ago)
    Author.objects.filter(pk=u2.pk).update(restricted_until=an_hour_ago)

    m = scrape(client)

    assert m[("moderation_authors", (("standing", "warned"),))] == 1
    assert m[("moderation_authors", (("standing", "suspended"),))] == 1
    assert m[("moderation_authors", (("standing", "banned"),))] == 0
    assert ("moderation_authors", (("standing", "good"),)) not in m
    assert m[("moderation_account_actions_total", (("action", "warn"), ("cause", "strikes")))] == 1
    assert m[("moderation_account_actions_total", (("action", "suspend"), ("cause", "moderator")))] == 1
    assert m[("moderation_account_actions_total", (("action", "ban"), ("cause", "strikes")))] == 0
    assert m[("moderation_strikes_written_total", ())] == 5
    assert m[("moderation_strikes_ended_total", (("end", "overturned"),))] == 1
    assert m[("moderation_strikes_ended_total", (("end", "replaced"),))] == 1
    assert m[("moderation_strikes_ended_total", (("end", "lapsed"),))] == 1
    assert 3600 <= m[("moderation_suspensions_overdue_seconds", ())] < 3700

    services.authors_sweep()
    assert scrape(client)[("moderation_suspensions_overdue_seconds", ())] == 0


@pytest.mark.django_db
def test_reporters_by_accuracy_band_and_the_muted_by_who_muted_them(client, api_client, settings, django_user_model):
    from moderation.models import Reporter

    settings.METRICS_TOKEN = "scrape-me"
    review = decided(api_client, "manual_review")
    for reporter_id in ("new-1", "new-2"):  # reporters a report creates: not rated yet
        services.report_file(review_id=review.pk, reporter_id=reporter_id, reason="spam")
    for reporter_id, resolved, actioned in [("never", 20, 1), ("rarely", 10, 3), ("half", 10, 5), ("always", 5, 5),
                                            ("held", 6, 6)]:
        Reporter.objects.create(client=api_client, reporter_id=reporter_id, resolved=resolved, actioned=actioned)
    services.reporter_mute(reporter_pk=Reporter.objects.get(reporter_id="held").pk, muted=True, reason="brigading",
                           user=django_user_model.objects.create_user("mia"))

    m = scrape(client)

    bands = {band: m[("moderation_reporters", (("accuracy_band", band),))]
             for band in ("unrated", "0-10", "10-33", "33-67", "67-100")}
    assert bands == {"unrated": 2, "0-10": 1, "10-33": 1, "33-67": 1, "67-100": 2}
    assert m[("moderation_reporters_muted", (("by", "accuracy"),))] == 1  # never: 1 of 20
    assert m[("moderation_reporters_muted", (("by", "moderator"),))] == 1
