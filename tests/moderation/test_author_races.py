"""Authors under real concurrency (docs/design.md, "Authors, strikes and account actions"): real
threads on PostgreSQL, released together by a barrier, each with its own connection. Every write
to an author happens under its row lock, in the transaction of what causes it: concurrent
rejections add up exactly and take each rung once, an overturn and a new strike both count, a
moderator's action from a page the ladder made stale is refused, and a suspension ends once.

Where a race needs both sides inside the critical section at once to go wrong without its
guard, a thread waits there for the other (`Meeting`, or `queued_behind`): with the guard in
place the other cannot get there, and the waiting one goes on alone."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from moderation import services, tasks
from moderation.errors import StaleAuthor
from moderation.models import (
    AccountAction,
    Appeal,
    Author,
    ContentReview,
    DecisionNotification,
    ModerationRequest,
    ReviewStatus,
    Standing,
    StandingTransition,
    Strike,
)
from moderation.services import account_actions, account_appeals, authors, results, strikes
from moderation.services.results import OperationResult
from tests.helpers import SCORE_FOR, active_points, collide, result

pytestmark = pytest.mark.django_db(transaction=True)

REJECTED = result(SCORE_FOR["rejected"])  # harassment, 1 point under the initial policy


def claimed_of(client, author_id: str, count: int = 1) -> list[ModerationRequest]:
    """`count` new reviews by `author_id`, claimed together: their operations live, their results
    not yet in. (Call with no other review pending.)"""
    reviews = [services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text="a sentence",
                                      author_id=author_id)[0] for _ in range(count)]
    claim = services.reviews_claim(review_id=reviews[0].pk, worker_id="w1", size=count)
    assert sorted(request.review_id for request in claim.requests) == sorted(review.pk for review in reviews)
    return claim.requests


def rejected(request: ModerationRequest) -> str:
    return services.review_finalize(idempotency_key=request.idempotency_key, result=REJECTED, cause="provider_result")


def rejected_of(client, author_id: str, count: int) -> list:
    """`count` reviews by `author_id` rejected one after another: their review ids."""
    requests = claimed_of(client, author_id, count)
    assert [rejected(request) for request in requests] == ["applied"] * count
    return [request.review_id for request in requests]


def author(client, author_id: str = "u1") -> Author:
    return Author.objects.get(client=client, author_id=author_id)


def actions(a: Author) -> list[tuple]:
    return list(AccountAction.objects.filter(author=a).values_list("action", "cause", "strike_points", "end"))


def standings(a: Author) -> list[tuple]:
    return list(StandingTransition.objects.filter(author=a).values_list("from_standing", "to_standing", "cause"))


def told(client) -> list[tuple]:
    """The author notifications, in order: (type, action_id)."""
    bodies = [json.loads(n.payload) for n in DecisionNotification.objects.filter(client=client, review=None)
              .order_by("id")]
    return [(body["type"], body["data"]["action_id"]) for body in bodies]


def events(kind: EventKind) -> list[dict]:
    return [event.detail for event in PipelineEvent.objects.filter(kind=kind)]


class Meeting:
    """Each thread that gets here waits (once) for the others, at most `timeout` seconds; a thread
    kept away, queued on a lock the waiting one holds, leaves it to go on alone afterwards."""

    def __init__(self, parties: int, timeout: float = 1.0) -> None:
        self.barrier = threading.Barrier(parties)
        self.timeout = timeout
        self.met = threading.local()

    def __call__(self) -> None:
        if getattr(self.met, "done", False):
            return
        self.met.done = True
        try:
            self.barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            pass


def meeting_before(monkeypatch, module, name: str, meeting: Meeting) -> None:
    real = getattr(module, name)

    def met_first(*args, **kwargs):
        meeting()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, met_first)


def queued_behind(timeout: float = 5.0) -> None:
    """Wait until another transaction waits for a lock this one holds."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted "
                           "AND pg_backend_pid() = ANY(pg_blocking_pids(pid)))")
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("no other transaction queued behind this one's locks")


def taking_the_author_lock_first(monkeypatch, first: str, order: list[str], calls: dict):
    """A target for `collide` that runs calls[order[i]] so that calls[first] takes the author's
    lock, and the other starts only then and queues behind it."""
    holds = threading.Event()
    role = threading.local()
    # Each module that locks an author does it through its own import: the finalize (its authors up
    # front), strikes, account actions and appeals (one author each).
    for module in (authors, strikes, account_actions, account_appeals, results):
        real = module.authors_lock

        def locking(ids, real=real):
            locked = real(ids)
            if getattr(role, "name", None) == first:
                holds.set()
                queued_behind()
            return locked

        monkeypatch.setattr(module, "authors_lock", locking)

    def run(i):
        role.name = order[i]
        if role.name != first:
            assert holds.wait(5)
        return calls[role.name]()

    return run


def assert_climbed_once_per_rung(client, points: int) -> None:
    """`points` strikes, landed one at a time under the author's lock: warn at 3, suspend at 5
    (replaced by the ban), ban at 8, each once and told once; no rung crossed twice."""
    a = author(client)
    assert a.strike_points == points == active_points(a)
    assert Strike.objects.filter(author=a, ended_at__isnull=True).count() == points
    assert a.standing == Standing.BANNED and a.restricted_until is None
    assert actions(a) == [("warn", "strikes", 3, ""), ("suspend", "strikes", 5, "replaced"),
                          ("ban", "strikes", 8, "")]
    assert standings(a) == [("good", "warned", "strikes"), ("warned", "suspended", "strikes"),
                            ("suspended", "banned", "strikes")]
    taken = [str(pk) for pk in AccountAction.objects.filter(author=a).values_list("pk", flat=True)]
    assert told(client) == [("author.actioned", pk) for pk in taken]
    assert events(EventKind.LADDER_RUNG_SKIPPED) == []


# --- 1. twenty rejections of one author at once --------------------------------------------------

def test_twenty_rejections_finalized_one_by_one_at_once_add_up_and_take_each_rung_once(api_client):
    requests = claimed_of(api_client, "u1", 20)

    outcomes = collide(20, lambda i: rejected(requests[i]))

    assert outcomes == ["applied"] * 20
    assert_climbed_once_per_rung(api_client, 20)


def test_twenty_rejections_finalized_in_four_batches_at_once_add_up_and_take_each_rung_once(api_client):
    requests = claimed_of(api_client, "u1", 20)
    batches = [requests[i::4] for i in range(4)]  # each batch's reviews interleaved with the others'

    outcomes = collide(4, lambda i: results.results_finalize(
        [OperationResult(request.idempotency_key, REJECTED) for request in batches[i]], cause="provider_result"))

    assert outcomes == [["applied"] * 5] * 4
    assert_climbed_once_per_rung(api_client, 20)


def test_twenty_rejections_moderated_by_four_batch_jobs_at_once_add_up_and_take_each_rung_once(
    api_client, local, settings
):
    settings.MODERATION_BATCH_SIZE = 5
    reviews = [services.review_submit(client=api_client, external_id=uuid.uuid4().hex, kind="text",
                                      text="shut up, you idiot", author_id="u1")[0] for _ in range(20)]

    collide(4, lambda i: tasks.moderate_review(reviews[5 * i].pk))
    # A job whose own review another batch took claimed nothing: what is left, its own jobs take.
    left = ContentReview.objects.filter(author__author_id="u1", status=ReviewStatus.PENDING)
    for pk in left.values_list("pk", flat=True):
        tasks.moderate_review(pk)

    assert set(ContentReview.objects.filter(author__author_id="u1").values_list("status", flat=True)) == {
        ReviewStatus.REJECTED}
    assert_climbed_once_per_rung(api_client, 20)


def test_two_batches_of_two_authors_in_opposite_orders_do_not_deadlock(api_client, monkeypatch):
    # Batch A holds a review of X then one of Y; batch B one of Y then one of X. Each batch waits
    # after its first strike for the other to have written its own: were the authors locked
    # review by review, A would hold X and wait for Y while B holds Y and waits for X.
    x1, y1 = claimed_of(api_client, "x")[0], claimed_of(api_client, "y")[0]
    y2, x2 = claimed_of(api_client, "y")[0], claimed_of(api_client, "x")[0]
    batches = [[x1, y1], [y2, x2]]
    meeting_before(monkeypatch, strikes, "ladder_climb_locked", Meeting(2))

    outcomes = collide(2, lambda i: results.results_finalize(
        [OperationResult(request.idempotency_key, REJECTED) for request in batches[i]], cause="provider_result"))

    assert outcomes == [["applied"] * 2] * 2
    for author_id in ("x", "y"):
        a = author(api_client, author_id)
        assert a.strike_points == 2 == active_points(a)


# --- 2. an overturn racing a new rejection -------------------------------------------------------

@pytest.mark.parametrize("overturn", ["override", "appeal"])
def test_an_overturn_racing_a_new_rejection_of_the_author_counts_both(api_client, monkeypatch, overturn):
    moderator = get_user_model().objects.create_user("mia", is_staff=True)
    kept, overturned = rejected_of(api_client, "u1", 2)
    if overturn == "appeal":
        services.appeal_file(review_id=overturned, appellant_id="u1", statement="out of context")
    (new,) = claimed_of(api_client, "u1")
    # Each waits, before writing the points, for the other to have read them.
    meeting_before(monkeypatch, strikes, "_points_add_locked", Meeting(2))
    calls = [lambda: services.review_override(review_id=overturned, label="approved", reason="a quote",
                                              moderator=moderator),
             lambda: rejected(new)]

    collide(2, lambda i: calls[i]())

    a = author(api_client)
    assert a.strike_points == 2 == active_points(a)
    revoked = Strike.objects.get(review_id=overturned)
    assert revoked.end == "overturned" and revoked.ended_at is not None
    assert set(Strike.objects.filter(author=a, ended_at__isnull=True).values_list("review_id", flat=True)) == {
        kept, new.review_id}
    if overturn == "appeal":
        assert Appeal.objects.get(review_id=overturned).status == "overturned"
    # The rejection first: 3 points, the warn rung (kept when the overturn then takes one off).
    # The overturn first: 1, then 2 points, no rung.
    if Strike.objects.get(review_id=new.review_id).created_at < revoked.ended_at:
        assert a.standing == Standing.WARNED
        assert actions(a) == [("warn", "strikes", 3, "")]
    else:
        assert a.standing == Standing.GOOD and actions(a) == []
    assert [kind for kind, _ in told(api_client)] == ["author.actioned"] * len(actions(a))


# --- 2b. the lapse job racing rejections ------------------------------------------------------

def test_the_lapse_job_racing_two_rejections_ends_each_strike_once_and_the_points_add_up(api_client, monkeypatch):
    """The lapse job and two rejections of the author whose old strikes are past their window: one a
    batch's (the author locked with the reviews), one a moderator's (the author locked in the
    statement that lapses its strikes and reads the review's). Each waits, before writing the
    points, for the others to have read them: the author's lock keeps them apart."""
    old = rejected_of(api_client, "u1", 2)
    Strike.objects.filter(review_id__in=old).update(expires_at=timezone.now() - timedelta(days=1))
    (batch,) = claimed_of(api_client, "u1")
    (approved,) = claimed_of(api_client, "u1")
    assert services.review_finalize(idempotency_key=approved.idempotency_key, result=result(SCORE_FOR["approved"]),
                                    cause="provider_result") == "applied"
    moderator = get_user_model().objects.create_user("mia", is_staff=True)
    meeting_before(monkeypatch, strikes, "_points_add_locked", Meeting(3))
    calls = [lambda: services.strikes_lapse_due(),
             lambda: rejected(batch),
             lambda: services.review_override(review_id=approved.review_id, label="rejected", reason="harassing",
                                              category="harassment", moderator=moderator)]

    lapsed_by_the_job, outcome, _ = collide(3, lambda i: calls[i]())

    a = author(api_client)
    assert outcome == "applied" and lapsed_by_the_job in (0, 2)
    assert list(Strike.objects.filter(review_id__in=old).values_list("end", flat=True)) == ["lapsed", "lapsed"]
    assert set(Strike.objects.filter(author=a, ended_at__isnull=True).values_list("review_id", flat=True)) == {
        batch.review_id, approved.review_id}
    assert a.strike_points == 2 == active_points(a)


# --- 3. a manual ban racing the automatic suspension ---------------------------------------------

@pytest.mark.parametrize("first", ["rejection", "ban", None])
def test_a_manual_ban_racing_the_automatic_suspension_leaves_one_standing_and_both_attempts_logged(
    api_client, monkeypatch, first
):
    moderator = get_user_model().objects.create_user("mia", is_staff=True)
    (fifth,) = claimed_of(api_client, "u1")
    rejected_of(api_client, "u1", 4)
    a = author(api_client)
    assert (a.standing, a.strike_points) == (Standing.WARNED, 4)
    page = a.version  # the page the moderator bans from
    calls = {"rejection": lambda: rejected(fifth),
             "ban": lambda: services.author_act(author_pk=a.pk, moderator=moderator, action="ban",
                                                reason="spam wave", expected_version=page)}
    order = ["rejection", "ban"]
    if first is None:
        def run(i):
            return calls[order[i]]()
    else:
        run = taking_the_author_lock_first(monkeypatch, first, order, calls)

    outcome, ban = collide(2, run, expect=StaleAuthor)

    assert outcome == "applied"
    a = author(api_client)
    assert a.strike_points == 5 == active_points(a)
    refused, skipped = events(EventKind.AUTHOR_ACTION_REFUSED), events(EventKind.LADDER_RUNG_SKIPPED)
    if isinstance(ban, StaleAuthor):  # the suspension first: the ban came from a stale page
        assert actions(a) == [("warn", "strikes", 3, ""), ("suspend", "strikes", 5, "")]
        assert a.standing == Standing.SUSPENDED and a.restriction.action == "suspend"
        assert standings(a) == [("good", "warned", "strikes"), ("warned", "suspended", "strikes")]
        assert [(e["action"], e["author"]) for e in refused] == [("author_act", str(a.pk))] and skipped == []
    else:  # the ban first: the suspension's rung is crossed below the standing, and recorded
        assert actions(a) == [("warn", "strikes", 3, ""), ("ban", "moderator", 4, "")]
        assert a.standing == Standing.BANNED and a.restriction_id == ban.pk
        assert standings(a) == [("good", "warned", "strikes"), ("warned", "banned", "moderator")]
        assert [(e["rung"], e["points"], e["standing"]) for e in skipped] == [("suspend", "5", "banned")]
        assert refused == []
    assert first in (None, "rejection" if isinstance(ban, StaleAuthor) else "ban")
    assert [kind for kind, _ in told(api_client)] == ["author.actioned"] * 2


# --- 4. the expiry job on two clusters, racing a new strike --------------------------------------

def test_the_expiry_job_on_two_clusters_racing_a_new_strike_restores_once(api_client, monkeypatch):
    (sixth,) = claimed_of(api_client, "u1")
    rejected_of(api_client, "u1", 5)
    a = author(api_client)
    assert a.standing == Standing.SUSPENDED
    suspension = a.restriction_id
    later = timezone.now() + timedelta(days=8)  # past the 7-day suspension
    # The two clusters both find the suspension due before either ends it.
    meeting_before(monkeypatch, account_actions, "authors_lock", Meeting(2, timeout=5))
    calls = [lambda: services.restrictions_expire_due(now=later)] * 2 + [lambda: rejected(sixth)]

    *ended, outcome = collide(3, lambda i: calls[i]())

    assert sorted(ended) == [0, 1] and outcome == "applied"
    a = author(api_client)
    assert a.strike_points == 6 == active_points(a)
    assert AccountAction.objects.get(pk=suspension).end == "expired"
    restored = [pk for kind, pk in told(api_client) if kind == "author.restored"]
    assert restored == [str(suspension)]
    expiry = StandingTransition.objects.get(author=a, cause="expired")
    assert (expiry.from_standing, expiry.to_standing) == ("suspended", "warned")
    if expiry.strike_points == 6:  # the strike first: it found the author suspended, no rung above
        assert a.standing == Standing.WARNED and a.restriction is None
        assert actions(a) == [("warn", "strikes", 3, ""), ("suspend", "strikes", 5, "expired")]
    else:  # the expiry first: the strike found the author warned, the suspend rung above it
        assert expiry.strike_points == 5
        assert a.standing == Standing.SUSPENDED and a.restriction.action == "suspend"
        assert a.restriction_id != suspension and a.restricted_until > timezone.now() + timedelta(days=6)
        assert actions(a) == [("warn", "strikes", 3, ""), ("suspend", "strikes", 5, "expired"),
                              ("suspend", "strikes", 6, "")]
    assert events(EventKind.LADDER_RUNG_SKIPPED) == []
