"""Reporters (docs/design.md, "Reporters"): the weight rule at its boundaries and as SQL, the
weighted threshold, the pile-on mark, a moderator's mute, and the reporters' admin."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from html import unescape

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from moderation import services
from moderation.errors import ReasonRequired, StaleReporter
from moderation.models import Report, ReportEscalation, Reporter, ReporterMute
from moderation.services.reporters import (
    ACCURACY_BANDS,
    MUTED,
    UNRATED,
    accuracy_band,
    accuracy_weight,
    mute_token,
    muted_by_accuracy,
    reporter_counts,
    reporter_mute,
    reporter_weight,
    weight_expression,
)
from tests.helpers import decided, staff_browser, violations_with_rated_reporters

D = Decimal


# --- the rule -----------------------------------------------------------------------------------

@pytest.mark.parametrize("resolved, actioned, weight", [
    (0, 0, D("1.00")),  # never judged
    (4, 4, D("1.00")),  # four right: not rated yet
    (4, 0, D("1.00")),
    (5, 5, D("2.00")),  # rated from the fifth: all right
    (5, 0, D("0.50")),  # none right (not muted: fewer than 10)
    (9, 0, D("0.50")),  # nine, none right: still not muted
    (10, 0, D("0.00")),  # ten, none right: muted
    (10, 1, D("0.65")),  # 10% is not fewer than 10%: weighs by accuracy
    (20, 1, D("0.00")),  # 5%: muted
    (3, 1, D("1.00")),
    (7, 3, D("1.14")),  # 0.5 + 1.5 * 3/7 = 1.142857...
    (8, 1, D("0.69")),  # 0.6875 rounds half up
    (100, 100, D("2.00")),
])
def test_a_reporter_weighs_one_until_rated_then_by_accuracy_and_nothing_when_muted(resolved, actioned, weight):
    assert reporter_weight(resolved=resolved, actioned=actioned) == weight


def test_a_moderator_mutes_even_an_accurate_reporter_and_unmutes_one_the_rule_would_mute():
    assert reporter_weight(resolved=5, actioned=5, mute=ReporterMute.MUTED) == 0
    assert reporter_weight(resolved=2, actioned=0, mute=ReporterMute.MUTED) == 0
    assert muted_by_accuracy(10, 0)
    assert reporter_weight(resolved=10, actioned=0, mute=ReporterMute.UNMUTED) == D("0.50")
    assert reporter_weight(resolved=3, actioned=0, mute=ReporterMute.UNMUTED) == 1


@pytest.mark.parametrize("resolved, actioned", [(3, 4), (-1, 0), (2, -1)])
def test_impossible_counts_are_refused_by_name(resolved, actioned):
    with pytest.raises(ValueError, match="actioned <= resolved"):
        reporter_weight(resolved=resolved, actioned=actioned)


counts = st.integers(min_value=0, max_value=10**6).flatmap(
    lambda resolved: st.tuples(st.just(resolved), st.integers(min_value=0, max_value=resolved)))


@given(counts=counts)
def test_a_rated_reporter_weighs_between_half_and_two_and_more_for_more_actioned(counts):
    resolved, actioned = counts
    weight = accuracy_weight(resolved, actioned)
    assert D("0.5") <= weight <= D("2.0")
    assert weight == weight.quantize(D("0.01"))  # what Report.weight keeps
    if resolved < 5:
        assert weight == 1
    elif actioned < resolved:
        assert accuracy_weight(resolved, actioned + 1) >= weight
    assert reporter_weight(resolved=resolved, actioned=actioned) in ({D(0)} | {weight})
    assert (reporter_weight(resolved=resolved, actioned=actioned) == 0) == muted_by_accuracy(resolved, actioned)


@pytest.mark.django_db
def test_the_sql_rule_weighs_and_mutes_every_reporter_as_the_python_does(api_client):
    """One rule written twice: over every pair of counts up to 24 and each mute, the query and
    the Python agree on the weight, the muting and the accuracy band."""
    rows = [Reporter(client=api_client, reporter_id=f"r{resolved}-{actioned}-{mute}", resolved=resolved,
                     actioned=actioned, mute=mute)
            for resolved in range(25) for actioned in range(resolved + 1) for mute in ReporterMute.values]
    Reporter.objects.bulk_create(rows)

    found = Reporter.objects.annotate(w=weight_expression()).values_list("resolved", "actioned", "mute", "w")
    assert len(found) == len(rows)
    for resolved, actioned, mute, weight in found:
        assert weight == reporter_weight(resolved=resolved, actioned=actioned, mute=mute), (resolved, actioned, mute)
    muted = set(Reporter.objects.filter(MUTED).values_list("pk", flat=True))
    assert muted == {r.pk for r in Reporter.objects.all()
                     if reporter_weight(resolved=r.resolved, actioned=r.actioned, mute=r.mute) == 0}
    figures = reporter_counts()
    bands = {}
    for row in rows:
        band = accuracy_band(row.resolved, row.actioned)
        bands[band] = bands.get(band, 0) + 1
    assert figures["bands"] == bands and set(bands) == {UNRATED, *ACCURACY_BANDS}
    assert figures["muted"] == {
        "moderator": sum(r.mute == ReporterMute.MUTED for r in rows),
        "accuracy": sum(r.mute == ReporterMute.AUTO and muted_by_accuracy(r.resolved, r.actioned) for r in rows),
    }


# --- reports and the threshold -----------------------------------------------------------------

def rated(client, reporter_id: str, resolved: int, actioned: int, mute: str = ReporterMute.AUTO) -> Reporter:
    """A reporter moderators already judged (the counters are report_outcomes' to keep)."""
    return Reporter.objects.create(client=client, reporter_id=reporter_id, resolved=resolved, actioned=actioned,
                                   mute=mute)


def report(review, reporter_id, **kwargs):
    return services.report_file(review_id=review.pk, reporter_id=reporter_id, reason="harassment", **kwargs)


@pytest.mark.django_db
def test_a_first_report_creates_its_reporter_for_its_client_and_keeps_its_weight(api_client, other_client):
    rated(api_client, "ann", 5, 5)
    mine, theirs = decided(api_client, "manual_review"), decided(other_client, "manual_review")

    assert report(mine, "ann").report.weight == D("2.00")
    assert report(theirs, "ann").report.weight == 1  # the other client's ann is not yet rated
    assert report(mine, "bob").report.weight == 1
    assert set(Reporter.objects.values_list("client_id", "reporter_id")) == {
        (api_client.pk, "ann"), (other_client.pk, "ann"), (api_client.pk, "bob")}
    Reporter.objects.filter(client=api_client, reporter_id="bob").update(resolved=10)  # now muted by accuracy
    assert report(mine, "bob").report.weight == 1  # the same report again, as it was
    assert report(decided(api_client, "manual_review"), "bob").report.weight == 0


@pytest.mark.django_db
def test_the_threshold_sums_the_weights_of_the_decisions_reporters(api_client):
    rated(api_client, "sharp-1", 5, 5)
    rated(api_client, "sharp-2", 10, 10)
    review = decided(api_client, "approved")

    report(review, "sharp-1")
    review.refresh_from_db()
    assert review.status == "approved"  # 2.00 of 3
    filed = report(review, "sharp-2")

    review.refresh_from_db()
    assert review.status == "manual_review" and filed.report_count == 2  # 4.00 of 3, by two reporters
    escalation = ReportEscalation.objects.get(review=review)
    assert (escalation.report_count, escalation.threshold) == (2, 3)
    assert "2 users reported the decision, weighing 4.00" in escalation.transition.reason
    assert review.queue == "reports"
    policy = services.policy_active()
    assert review.priority == pytest.approx(policy.priority_report_weight * 4 + policy.priority_score_weight * 0.1)


@pytest.mark.django_db
def test_the_checker_reports_a_crossing_that_did_not_weigh_the_threshold(api_client):

    rated(api_client, "sharp", 5, 5)
    review = decided(api_client, "approved")
    report(review, "sharp"), report(review, "fair")  # 2.00 + 1 = 3: crossed at the second
    crossing = ReportEscalation.objects.get(review=review)
    assert violations_with_rated_reporters([review.pk]) == []

    # As if the threshold had summed a weight the report did not carry.
    Report.objects.filter(review=review, reporter_id="sharp").update(weight=D("1.50"))

    assert violations_with_rated_reporters([review.pk]) == [f"{review.pk}: threshold crossing {crossing.pk} counted 2 reporters of "
                                       "threshold 3, but 2 reported before it, weighing 2.50"]


@pytest.mark.django_db
def test_muted_reporters_are_stored_and_counted_but_move_nothing(api_client, django_user_model):
    review = decided(api_client, "approved")
    for i in range(4):
        rated(api_client, f"noisy-{i}", 20, 0)  # 0% of 20: muted by the rule
    loud = rated(api_client, "loud", 0, 0)
    reporter_mute(reporter_pk=loud.pk, muted=True, reason="spams reports",
                  user=django_user_model.objects.create_user("mia"))

    answers = [report(review, f"noisy-{i}") for i in range(4)] + [report(review, "loud")]

    assert [a.report_count for a in answers] == [1, 2, 3, 4, 5]
    assert {a.report.weight for a in answers} == {D(0)}
    review.refresh_from_db()
    assert review.status == "approved" and not ReportEscalation.objects.exists()
    rated(api_client, "fair", 0, 0)
    report(review, "fair"), report(review, "fair-2"), report(review, "fair-3")
    review.refresh_from_db()
    assert review.status == "manual_review"
    assert ReportEscalation.objects.get(review=review).report_count == 8  # all counted, three weighed


@pytest.mark.django_db
def test_an_unmuted_reporter_weighs_by_accuracy_though_the_rule_would_mute(api_client, django_user_model):
    quiet = rated(api_client, "quiet", 10, 0)
    reporter_mute(reporter_pk=quiet.pk, muted=False, reason="reformed", user=django_user_model.objects.create_user("m"))

    assert report(decided(api_client, "approved"), "quiet").report.weight == D("0.50")


@pytest.mark.django_db
def test_a_notice_moves_the_review_with_its_reporters_weight_as_priority(api_client):
    rated(api_client, "flagger", 5, 5)
    rated(api_client, "muted-one", 0, 0, mute=ReporterMute.MUTED)
    review = decided(api_client, "approved")
    report(review, "muted-one")
    report(review, "someone")

    report(review, "flagger", kind="trusted_flagger")

    review.refresh_from_db()
    policy = services.policy_active()
    assert review.status == "manual_review" and review.queue == "notices"  # 0 + 1 + 2.00
    assert review.priority == pytest.approx(policy.priority_report_weight * 3 + policy.priority_score_weight * 0.1)


# --- the pile-on mark ---------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_policys_burst_of_open_reports_marks_a_pile_on_and_older_ones_do_not_count(api_client):
    policy = services.policy_active()
    assert (policy.pile_on_reports, policy.pile_on_minutes) == (4, 10)
    review = decided(api_client, "manual_review")
    for i in range(3):
        report(review, f"u{i}")
    # The first report arrived eleven minutes ago: three within the window, with the next.
    Report.objects.filter(review=review, reporter_id="u0").update(created_at=timezone.now() - timedelta(minutes=11))
    report(review, "u3")
    review.refresh_from_db()
    assert review.pile_on == ""

    report(review, "u4")

    review.refresh_from_db()
    assert review.pile_on == "burst"


@pytest.mark.parametrize("weights, mark", [
    ([D("0.5")], ""),  # one report is no pile
    ([D("0.5"), D("1.0")], "low_accuracy"),  # half
    ([D("1.0"), D("1.0"), D("0.5")], ""),  # a third
    ([D("2.0"), D("0"), D("0.98")], "low_accuracy"),  # muted and barely under 1: two thirds
    ([D("1.0"), D("1.0"), D("2.0")], ""),
])
@pytest.mark.django_db
def test_reports_at_least_half_from_reporters_weighing_under_one_mark_low_accuracy(api_client, weights, mark):
    review = decided(api_client, "manual_review")
    counts = {D("0"): (20, 0, ReporterMute.AUTO), D("0.5"): (5, 0, ReporterMute.AUTO), D("0.98"): (100, 32, ""),
              D("1.0"): (0, 0, ""), D("2.0"): (5, 5, "")}
    for i, weight in enumerate(weights):
        rated(api_client, f"r{i}", *counts[weight])
        assert report(review, f"r{i}").report.weight == weight

    review.refresh_from_db()
    assert review.pile_on == mark


@pytest.mark.django_db
def test_a_pile_on_mark_stays_until_a_decision_resolves_the_reports(api_client, django_user_model):
    review = decided(api_client, "approved")
    for i in range(2):
        rated(api_client, f"weak-{i}", 5, 0)
        report(review, f"weak-{i}")
    review.refresh_from_db()
    assert review.pile_on == "low_accuracy" and review.status == "approved"
    for i in range(3):  # fair reporters outnumber them now: the mark stays, and the threshold moves it
        report(review, f"fair-{i}")
    review.refresh_from_db()
    assert review.pile_on == "low_accuracy" and review.status == "manual_review"

    mia = staff_browser(django_user_model, "mia", "moderator")
    queue = mia.get("/admin/moderation/contentreview/queues/?queue=reports").content.decode()
    page = mia.get(f"/admin/moderation/contentreview/{review.pk}/timeline/").content.decode()
    assert 'class="badge pile-on pile-on-low_accuracy"' in queue
    assert 'id="report-summary"' in page and "Most reporters are rarely right" in unescape(page)
    assert "(weight 0.50)" in page

    services.review_override(review_id=review.pk, label="approved", reason="satire", moderator=mia.user)

    review.refresh_from_db()
    assert review.pile_on == ""
    assert 'id="review-pile-on"' not in mia.get(f"/admin/moderation/contentreview/{review.pk}/timeline/").content.decode()


# --- a moderator's mute -------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_mute_needs_a_reason_and_is_in_the_reporters_history(api_client, django_user_model):
    mia = django_user_model.objects.create_user("mia")
    reporter = rated(api_client, "ann", 3, 0)
    for blank in ("", "   \n"):
        with pytest.raises(ReasonRequired):
            reporter_mute(reporter_pk=reporter.pk, muted=True, reason=blank, user=mia)
    assert Reporter.objects.get(pk=reporter.pk).mute == ""

    reporter_mute(reporter_pk=reporter.pk, muted=True, reason="  brigading from one forum ", user=mia)
    reporter_mute(reporter_pk=reporter.pk, muted=None, reason="the forum closed", user=mia)

    reporter.refresh_from_db()
    assert (reporter.mute, reporter.mute_reason, reporter.mute_changed_by) == ("", "the forum closed", mia)
    history = list(reporter.history.filter(history_type="~").order_by("history_id").values_list("mute", "mute_reason", "history_user",
                                                                       "history_change_reason"))
    assert history == [("muted", "brigading from one forum", mia.pk, "Muted by a moderator: brigading from one forum"),
                       ("", "the forum closed", mia.pk, "By accuracy: the forum closed")]


@pytest.mark.django_db
def test_a_mute_from_a_page_another_moderator_changed_since_is_refused(api_client, django_user_model):
    mia, max_ = (django_user_model.objects.create_user(name) for name in ("mia", "max"))
    reporter = rated(api_client, "ann", 3, 0)
    seen = mute_token(reporter)
    reporter_mute(reporter_pk=reporter.pk, muted=True, reason="spam", user=max_, expected=seen)

    with pytest.raises(StaleReporter, match="now muted by a moderator, by max .* \\(spam\\)"):
        reporter_mute(reporter_pk=reporter.pk, muted=True, reason="spam too", user=mia, expected=seen)

    reporter.refresh_from_db()
    assert reporter.mute_changed_by == max_ and reporter.history.filter(history_type="~").count() == 1


# --- the admin ----------------------------------------------------------------------------------

def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.mark.django_db
def test_the_reporters_list_shows_accuracy_weight_and_why_muted(api_client, django_user_model):
    rated(api_client, "sharp", 5, 5)
    rated(api_client, "noisy", 20, 1)
    rated(api_client, "new", 1, 1)
    rated(api_client, "held", 5, 5, mute=ReporterMute.MUTED)
    auditor = staff_browser(django_user_model, "ada", "auditor")

    listing = text_of(auditor.get("/admin/moderation/reporter/"))
    muted_only = text_of(auditor.get("/admin/moderation/reporter/?muted=accuracy"))
    found = text_of(auditor.get("/admin/moderation/reporter/?q=sharp"))

    assert "sharp" in listing and "100% 2.00 no" in listing
    assert "noisy" in listing and "5% 0.00 yes, by accuracy" in listing
    assert "new" in listing and "— 1.00 no" in listing
    assert "held" in listing and "100% 0.00 yes, by a moderator" in listing
    assert "noisy" in muted_only and "sharp" not in muted_only
    assert "sharp" in found and "noisy" not in found


@pytest.mark.django_db
def test_a_moderator_mutes_from_the_reporter_page_and_an_auditor_may_not(api_client, django_user_model):
    reporter = rated(api_client, "ann", 5, 5)
    mia = staff_browser(django_user_model, "mia", "moderator")
    ada = staff_browser(django_user_model, "ada", "auditor")
    page_url = f"/admin/moderation/reporter/{reporter.pk}/change/"
    token = mute_token(reporter)

    assert 'id="mute-form"' in mia.get(page_url).content.decode()
    assert 'id="mute-form"' not in ada.get(page_url).content.decode()
    assert ada.post(f"/admin/moderation/reporter/{reporter.pk}/mute/mute/",
                    {"reason": "x", "token": token}).status_code == 403
    blank = mia.post(f"/admin/moderation/reporter/{reporter.pk}/mute/mute/", {"reason": " ", "token": token},
                     follow=True)
    assert "Not muted" in text_of(blank)
    done = mia.post(f"/admin/moderation/reporter/{reporter.pk}/mute/mute/", {"reason": "brigading", "token": token},
                    follow=True)
    stale = mia.post(f"/admin/moderation/reporter/{reporter.pk}/mute/unmute/", {"reason": "oops", "token": token},
                     follow=True)

    assert "Reporter muted." in text_of(done)
    assert "Not unmuted: changed since the page was read: now muted by a moderator, by mia" in text_of(stale)
    reporter.refresh_from_db()
    assert reporter.mute == ReporterMute.MUTED and reporter.mute_changed_by == mia.user
    page = text_of(mia.get(page_url))
    assert "yes, by a moderator: brigading (mia," in page and "Muted by a moderator mia brigading" in page
    assert ada.get(f"/admin/moderation/reporter/{reporter.pk}/change/").status_code == 200
    assert mia.get("/admin/moderation/reporter/x1/change/").status_code == 404


@pytest.mark.django_db
def test_the_reporter_page_lists_its_reports_with_their_weight_and_outcome(api_client, django_user_model):
    reporter = rated(api_client, "ann", 5, 5)
    reviews = [decided(api_client, "manual_review") for _ in range(2)]
    for review in reviews:
        report(review, "ann")
    report(decided(api_client, "manual_review"), "bob")
    mia = staff_browser(django_user_model, "mia", "moderator")

    page = mia.get(f"/admin/moderation/reporter/{reporter.pk}/change/").content.decode()

    rows = re.findall(r"<tr><td>[^<]*</td>\s*<td><a href=\"/admin/moderation/contentreview/([0-9a-f-]+)/timeline/", page)
    assert sorted(rows) == sorted(str(r.pk) for r in reviews)
    assert page.count("<td>2.00</td>") == 2 and "<td>open</td>" in page

