"""Authors, strikes, the ladder and account actions (docs/design.md, "Authors, strikes and account
actions"): the services, on real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from moderation import services
from moderation.errors import AppealExists, FourEyesRequired, IllegalStandingChange, NotAppealable, StaleAuthor
from moderation.models import (
    AccountAction,
    Author,
    DecisionNotification,
    ReviewQueue,
    Standing,
    StandingTransition,
    Strike,
)
from tests.helpers import SCORE_FOR, active_points, result

pytestmark = pytest.mark.django_db


def authored(client, author_id: str, label: str, *, text: str = "a sentence"):
    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text=text,
                                       author_id=author_id)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    assert services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR[label]),
                                    cause="provider_result") == "applied"
    review.refresh_from_db()
    return review


def author(client, author_id="u1") -> Author:
    return Author.objects.get(client=client, author_id=author_id)


def kinds(client) -> list[str]:
    return [json.loads(n.payload)["type"] for n in DecisionNotification.objects.filter(client=client, review=None)
            .order_by("id")]


@pytest.fixture
def moderators(db):
    users = get_user_model().objects
    return (users.create_user("mod-a", is_staff=True), users.create_user("mod-b", is_staff=True))


def test_an_author_is_created_on_first_submission_per_client(api_client, other_client):
    authored(api_client, "u1", "approved")
    authored(api_client, "u1", "approved")
    authored(other_client, "u1", "approved")
    assert Author.objects.filter(author_id="u1").count() == 2
    assert author(api_client).reviews.count() == 2


def test_rejections_write_strikes_and_climb_the_ladder_once_per_rung(api_client):
    for _ in range(2):
        authored(api_client, "u1", "rejected")
    assert author(api_client).standing == Standing.GOOD and author(api_client).strike_points == 2
    authored(api_client, "u1", "rejected")
    assert author(api_client).standing == Standing.WARNED
    authored(api_client, "u1", "rejected")
    assert author(api_client).standing == Standing.WARNED  # the warn rung is not taken twice
    authored(api_client, "u1", "rejected")
    a = author(api_client)
    assert a.standing == Standing.SUSPENDED and a.strike_points == 5 == active_points(a)
    assert a.restricted_until > timezone.now() + timedelta(days=6)
    assert [x.action for x in AccountAction.objects.filter(author=a)] == ["warn", "suspend"]
    assert kinds(api_client) == ["author.actioned", "author.actioned"]
    assert StandingTransition.objects.filter(author=a).count() == 2


def test_content_of_a_suspended_author_waits_in_restricted_authors(api_client, moderators):
    a = author_with(api_client, "u1")
    services.author_act(author_pk=a.pk, moderator=moderators[0], action="suspend", days=7, reason="spam wave")
    review = authored(api_client, "u1", "manual_review")  # would be a human's anyway
    assert review.queue == ReviewQueue.RESTRICTED_AUTHORS
    harmless, _ = services.review_submit(client=api_client, external_id="x", kind="text", text="hi", author_id="u1")
    request = services.review_claim(review_id=harmless.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.01), cause="provider_result")
    harmless.refresh_from_db()
    assert harmless.status == "manual_review" and harmless.queue == ReviewQueue.RESTRICTED_AUTHORS


def author_with(client, author_id: str) -> Author:
    services.author_ensure(client, author_id=author_id)
    return author(client, author_id)


def test_an_overturned_rejection_revokes_its_strike(api_client, moderators):
    review = authored(api_client, "u1", "rejected")
    services.review_override(review_id=review.pk, label="approved", reason="fine after all", moderator=moderators[0])
    a = author(api_client)
    assert a.strike_points == 0 == active_points(a)
    assert Strike.objects.get(review=review).end == "overturned"


def test_a_new_rejection_of_a_review_replaces_its_strike(api_client, moderators):
    review = authored(api_client, "u1", "rejected")
    services.review_override(review_id=review.pk, label="rejected", reason="hate, not harassment",
                             category="hate", moderator=moderators[0])
    strikes = Strike.objects.filter(review=review).order_by("id")
    assert [(s.category, s.end) for s in strikes] == [("harassment", "replaced"), ("hate", "")]
    assert author(api_client).strike_points == 1


def test_a_suspension_ends_once_and_tells_the_client(api_client, moderators):
    a = author_with(api_client, "u1")
    services.author_act(author_pk=a.pk, moderator=moderators[0], action="suspend", days=1, reason="r")
    later = timezone.now() + timedelta(days=2)
    assert services.restrictions_expire_due(now=later) == 1
    assert services.restrictions_expire_due(now=later) == 0
    a = Author.objects.get(pk=a.pk)
    assert a.standing == Standing.WARNED and a.restriction is None
    assert kinds(api_client) == ["author.actioned", "author.restored"]


def test_expired_strikes_lower_the_points_but_keep_the_standing(api_client):
    for _ in range(3):
        authored(api_client, "u1", "rejected")
    assert services.strikes_lapse_due(now=timezone.now() + timedelta(days=91)) == 3
    a = author(api_client)
    assert a.strike_points == 0 == active_points(a) and a.standing == Standing.WARNED


def test_a_stale_page_is_refused_and_says_what_changed(api_client, moderators):
    a = author_with(api_client, "u1")
    seen = a.version
    authored(api_client, "u1", "rejected")
    with pytest.raises(StaleAuthor) as refused:
        services.author_act(author_pk=a.pk, moderator=moderators[0], action="ban", reason="r", expected_version=seen)
    assert "strike: harassment" in refused.value.reason
    assert author(api_client).standing == Standing.GOOD


def test_illegal_actions_are_refused(api_client, moderators):
    a = author_with(api_client, "u1")
    services.author_act(author_pk=a.pk, moderator=moderators[0], action="ban", reason="r")
    with pytest.raises(IllegalStandingChange):
        services.author_act(author_pk=a.pk, moderator=moderators[0], action="ban", reason="again")


def test_account_appeals_need_four_eyes_and_overturn_lifts(api_client, moderators):
    a = author_with(api_client, "u1")
    with pytest.raises(NotAppealable):
        services.account_appeal_file(client=api_client, author_id="u1", statement="why")
    action = services.author_act(author_pk=a.pk, moderator=moderators[0], action="ban", reason="r")
    appeal = services.account_appeal_file(client=api_client, author_id="u1", statement="not me")
    with pytest.raises(AppealExists):
        services.account_appeal_file(client=api_client, author_id="u1", statement="again")
    with pytest.raises(FourEyesRequired):
        services.account_appeal_resolve(appeal_id=appeal.pk, moderator=moderators[0], outcome="overturned", reason="x")
    services.account_appeal_resolve(appeal_id=appeal.pk, moderator=moderators[1], outcome="overturned", reason="ok")
    a = Author.objects.get(pk=a.pk)
    assert a.standing == Standing.GOOD and a.restriction is None
    action.refresh_from_db()
    assert action.end == "overturned"
    assert kinds(api_client) == ["author.actioned", "author.restored", "account_appeal.resolved"]


def hateful(score: float = 0.95):
    return result(score).__class__(model="m", flagged=True, categories={"hate": True}, category_scores={"hate": score})


def rejected_for_hate(client, author_id: str):
    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text="x",
                                       author_id=author_id)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=hateful(), cause="provider_result")
    review.refresh_from_db()
    return review


def publish(**changes):
    active = services.policy_active()
    return services.policy_publish(**{**services.policy_fields(active), **changes})


def test_when_several_rungs_are_reached_together_the_highest_is_taken(api_client):
    publish(strike_points={"hate": 10})
    rejected_for_hate(api_client, "u1")
    a = author(api_client)
    assert a.standing == Standing.BANNED and a.strike_points == 10
    assert [x.action for x in AccountAction.objects.filter(author=a)] == ["ban"]
    assert AccountAction.objects.get(author=a).strikes == [
        {"category": "hate", "points": 10, "review_id": str(a.reviews.get().pk)}
    ]


def test_while_restricted_reject_rejects_new_content_without_a_strike(api_client, moderators):
    publish(while_restricted="reject")
    a = author_with(api_client, "u1")
    services.author_act(author_pk=a.pk, moderator=moderators[0], action="ban", reason="r")
    review = authored(api_client, "u1", "approved")
    assert review.status == "rejected"
    assert "suspended or banned" in review.decision.explanation
    assert author(api_client).strike_points == 0


def test_content_submitted_before_the_restriction_is_decided_as_usual(api_client, moderators):
    review, _ = services.review_submit(client=api_client, external_id="early", kind="text", text="x", author_id="u1")
    services.author_act(author_pk=author(api_client).pk, moderator=moderators[0], action="ban", reason="r")
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(0.01), cause="provider_result")
    review.refresh_from_db()
    assert review.status == "approved"


def test_a_repeat_offenders_content_ranks_higher(api_client):
    for _ in range(2):
        authored(api_client, "u1", "rejected")
    offender = authored(api_client, "u1", "manual_review")
    newcomer = authored(api_client, "u2", "manual_review")
    assert offender.priority - newcomer.priority == pytest.approx(2 * services.policy_active().priority_strike_weight)


@pytest.mark.parametrize("ladder, error", [
    ([{"points": 5, "action": "warn"}, {"points": 3, "action": "ban"}], "more severe rung needs more points"),
    ([{"points": 3, "action": "suspend"}], "each rung is"),
    ([{"points": 0, "action": "warn"}], "points must be"),
    ([{"points": 3, "action": "warn"}, {"points": 4, "action": "warn"}], "at most one rung per action"),
    ("warn at 3", "list of at most three rungs"),
])
def test_a_ladder_that_makes_no_sense_is_refused(ladder, error):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match=error):
        publish(enforcement_ladder=ladder)


def test_an_account_statement_gives_reasons_by_category_and_names_no_moderator(api_client, moderators):
    from moderation.transparency.reasons import account_statement

    for _ in range(3):
        authored(api_client, "u1", "rejected")
    warning = AccountAction.objects.get(author=author(api_client))
    until = warning.created_at + timedelta(days=183)
    assert account_statement(warning) == {
        "action": "warn", "standing": "warned", "until": None,
        "reasons": [{"category": "harassment", "points": 3, "strikes": 3}], "strike_points": 3,
        "automated": True, "policy_version": 1,
        "explanation": "Automated: 3 active strike points reached the warn step of the enforcement ladder.",
        "appealable_until": until.isoformat().replace("+00:00", "Z"),
        "notice": {"language": "en", "text": "We restricted your content or account under our rules. Reasons: "
                                             f"harassment. You can appeal until {until.date().isoformat()}."},
    }
    ban = services.author_act(author_pk=author(api_client).pk, moderator=moderators[0], action="ban",
                              reason="threats in three threads")
    stated = account_statement(ban)
    assert stated["automated"] is False and "mod-a" not in str(stated)
    assert stated["explanation"] == "A moderator took this action: threats in three threads"


def test_a_rejection_that_merely_stands_takes_no_rung_and_keeps_its_window(api_client, moderators):
    """An appeal upheld after the suspension expired: the rejection stands, nothing new happened,
    so the author is not suspended again and the strike keeps its age."""
    reviews = [authored(api_client, "u1", "rejected") for _ in range(5)]
    assert services.restrictions_expire_due(now=timezone.now() + timedelta(days=8)) == 1
    assert author(api_client).standing == Standing.WARNED
    first = Strike.objects.get(review=reviews[0])
    services.appeal_file(review_id=reviews[0].pk, appellant_id="u1", statement="not me")
    services.review_override(review_id=reviews[0].pk, label="rejected", reason="it was", category="harassment",
                             moderator=moderators[0])
    a = author(api_client)
    assert a.standing == Standing.WARNED and a.strike_points == 5
    assert [x.action for x in AccountAction.objects.filter(author=a)] == ["warn", "suspend"]
    replacement = Strike.objects.get(review=reviews[0], ended_at__isnull=True)
    assert (replacement.created_at, replacement.expires_at) == (first.created_at, first.expires_at)


def test_content_rejected_only_because_its_author_is_restricted_counts_no_strike(api_client, moderators):
    publish(while_restricted="reject")
    services.author_act(author_pk=author_with(api_client, "u1").pk, moderator=moderators[0], action="suspend",
                        days=7, reason="r")
    review = authored(api_client, "u1", "manual_review")  # scored in the band for a human
    assert review.status == "rejected" and review.decision.category_scores == {"harassment": 0.6}
    assert author(api_client).strike_points == 0 and not Strike.objects.filter(review=review).exists()


def test_a_finalize_hands_the_authors_it_locked_to_each_decision_and_reads_them_no_more(api_client):
    """The finalize locks its reviews' authors up front, after the reviews (docs/design.md,
    "Authors", the locking rule), and hands each to its review's decide path: the queue entry of
    the review it sends to a human counts the author's points as locked, and the strike of the
    one it rejects is written under that lock. No other statement reads the author."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from moderation.services.results import OperationResult, results_finalize

    authored(api_client, "u1", "rejected")  # one point, counted in the next entry's priority
    requests = []
    for _ in range(2):
        review, _ = services.review_submit(client=api_client, external_id=uuid.uuid4().hex, kind="text",
                                           text="a sentence", author_id="u1")
        requests.append(services.review_claim(review_id=review.pk, worker_id="w1"))
    with CaptureQueriesContext(connection) as queries:
        assert results_finalize([OperationResult(requests[0].idempotency_key, result(SCORE_FOR["manual_review"])),
                                 OperationResult(requests[1].idempotency_key, result(SCORE_FOR["rejected"]))],
                                cause="provider_result") == ["applied", "applied"]
    reads = [q["sql"] for q in queries.captured_queries
             if q["sql"].lstrip().startswith("SELECT") and 'FROM "moderation_author"' in q["sql"]]
    assert len(reads) == 1 and "FOR NO KEY UPDATE" in reads[0], reads
    waiting = requests[0].review
    waiting.refresh_from_db()
    assert (waiting.queue, waiting.priority) == (ReviewQueue.LOW_CONFIDENCE, 65.0)  # 100 x 0.6, 5 for the point
    assert author(api_client).strike_points == 2


@pytest.mark.django_db(transaction=True)
def test_a_submission_does_not_wait_for_a_finalize_holding_its_author(api_client):
    """The finalize's lock on the author (FOR NO KEY UPDATE) lets a new review name the author."""
    import threading

    from django.db import connection, transaction

    from moderation.services.authors import authors_lock

    pk = author_with(api_client, "u1").pk
    held, submitted = threading.Event(), threading.Event()

    def finalize_holding_the_author():
        try:
            with transaction.atomic():
                assert authors_lock([pk])
                held.set()
                submitted.wait(timeout=5)
        finally:
            connection.close()

    holder = threading.Thread(target=finalize_holding_the_author)
    holder.start()
    assert held.wait(timeout=5)
    services.review_submit(client=api_client, external_id="while-held", kind="text", text="x", author_id="u1")
    waited = not holder.is_alive()  # the holder gave up (5 s) before the submission got through
    submitted.set()
    holder.join()
    assert not waited


def test_the_api_counts_only_strikes_younger_than_their_window_before_the_lapse_job_runs(api_client, http):
    for _ in range(2):
        authored(api_client, "u1", "rejected")
    Strike.objects.filter(pk=Strike.objects.filter(author=author(api_client)).first().pk).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    page = http.get("/api/v1/authors/u1/").json()
    assert page["strike_points"] == 1 and len(page["strikes"]) == 1
    assert author(api_client).strike_points == 2  # the lapse job has not run
