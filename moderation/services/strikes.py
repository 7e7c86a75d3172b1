"""Strikes: what a rejection counts against its author, kept true to the review's decision, and
the authors' scheduled work (docs/design.md, "Authors": "Strikes"). Every write here happens under
the author's row lock (moderation/services/authors.py, the locking rule), in the transaction of
the decision that causes it; the ladder a strike may climb is in `account_actions.py`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from moderation.errors import NotUndoable
from moderation.models import (
    Author,
    ContentReview,
    Decision,
    ModerationPolicy,
    ReviewStatus,
    StandingTransition,
    Strike,
    StrikeEnd,
)
from moderation.transparency.reasons import reasons
from moderation.services.account_actions import ladder_climb_locked, restrictions_expire_due
from moderation.services.authors import authors_lock, review_author_lock
from moderation.db.compiled import CompiledUpdate
from moderation.db.one_statement import OneStatement, Read
from moderation.services.policy import policy_active, policy_published


def strike_points_for(policy: ModerationPolicy, category: str) -> int:
    """The points a rejection of `category` counts under `policy` (a category not listed: 1)."""
    return int((policy.strike_points or {}).get(category, 1))


def strike_open_read(writes: OneStatement, review: ContentReview) -> Read:
    """Whether `review` has an active strike, asked in the decision's statement (`writes`): an
    approval with nothing to revoke pays no round trip and takes no author lock."""
    return writes.read("SELECT EXISTS (SELECT 1 FROM moderation_strike WHERE review_id = %s AND ended_at IS NULL)",
                       (review.pk,))


def strikes_after_decision_locked(review: ContentReview, decision: Decision, *, actor: str, actor_id: str = "",
                                  counts_strike: bool = True, struck: bool | None = None,
                                  writes: OneStatement | None = None, author: Author | None = None) -> None:
    """Keep the review's strike true to its new decision, in the decision's transaction (called by
    `decide_locked`, holding the review's lock): a rejection writes one (replacing any the review
    had), an approval revokes the review's strike. Then the ladder, if the author's points went
    up. Other decisions (a human to look) change no strike, and neither does a rejection that
    `counts_strike` says is not for a violation (a restricted author's content rejected unseen).

    `struck`: whether the review has an active strike, when the caller asked already
    (`strike_open_read`). `writes`: the statement the strike's writes join (the caller runs it);
    without one they run here. `author`: the review's author when the caller holds its lock
    already (a finalize's, `authors_lock`); else it is locked here, when there is a strike to
    write or revoke. Either way, once the author is locked, one statement reads (its lapsed strikes ended, the review's strike:
    `_strikes_read_locked`) and one writes."""
    if review.author_id is None or decision.label not in (ReviewStatus.REJECTED, ReviewStatus.APPROVED):
        return
    if decision.label == ReviewStatus.APPROVED and not (
        struck if struck is not None else Strike.objects.filter(review=review, ended_at__isnull=True).exists()
    ):
        return  # the common approval: nothing to revoke, and no lock taken
    found = reasons(decision) if decision.label == ReviewStatus.REJECTED and counts_strike else []
    if decision.label == ReviewStatus.REJECTED and not found:
        return  # a rejection that names no violation counts nothing, and leaves the review's strike be
    own = writes is None
    writes = OneStatement() if own else writes
    author = review_author_lock(review, author)
    now = timezone.now()  # (once the lock is held: a strike is stamped after the one it waited for)
    read = _strikes_read_locked(author, review, now)
    ended = read.active
    # The points before this decision: less the strikes that lapsed meanwhile.
    before = author.strike_points - read.lapsed_points
    change = -read.lapsed_points
    if ended is not None:
        revoked = Strike.objects.filter(pk=ended.pk)
        if found:  # replaced: ended first, on its own, for the new one to be the review's one active strike
            revoked.update(ended_at=now, end=StrikeEnd.REPLACED)  # (a unique index: its own statement)
        else:
            writes.update(revoked, ended_at=now, end=StrikeEnd.OVERTURNED)
        change -= ended.points
    strike = None
    if found:  # a rejection counts the points of its top category; one that names none counts nothing
        policy = policy_published(decision.policy_id) if decision.policy_id else policy_active()
        category = found[0]["category"]
        # A new decision of the same review replaces its strike, which keeps its window: the
        # violation is as old as it was.
        strike = Strike(
            author=author, review=review, decision=decision, category=category[:64],
            points=strike_points_for(policy, category), policy=policy, created_at=ended.created_at if ended else now,
            expires_at=ended.expires_at if ended else now + timedelta(days=policy.strike_window_days),
        )
        writes.insert(strike)
        change += strike.points
    _points_add_locked(author, change, writes=writes)
    # A rejection that merely stands (an appeal upheld) takes no rung.
    if strike is not None and author.strike_points > before:
        ladder_climb_locked(author, policy, strike, before, now=now, actor=actor, actor_id=actor_id, writes=writes)
    if own:
        writes.execute()


def strike_undo_locked(review: ContentReview, decision: Decision) -> Author | None:
    """Take back the strike `decision` wrote (review_undo; holding the review's lock, in its
    transaction): it ends as `undone` and its points come off the author. Refused (NotUndoable)
    when the decision did more to the author than add a strike, which no undo can revert whole:
    it replaced or revoked an earlier strike, or the author's standing changed since it (the
    ladder's action was announced to the client). Returns the author when it locked it (its
    points as they now are, for the review's queue entry), else None."""
    if review.author_id is None:
        return None
    if Strike.objects.filter(review=review, end__in=(StrikeEnd.REPLACED, StrikeEnd.OVERTURNED),
                             ended_at__gte=decision.created_at).exists():
        raise NotUndoable("it replaced the author's earlier strike for this content: decide again instead")
    if StandingTransition.objects.filter(author_id=review.author_id, created_at__gte=decision.created_at).exists():
        raise NotUndoable("the author's standing changed after it (the client was told): decide again instead")
    strike = Strike.objects.filter(decision=decision, ended_at__isnull=True).first()
    if strike is None:
        return None
    author = review_author_lock(review)
    writes = OneStatement()
    writes.update(Strike.objects.filter(pk=strike.pk), ended_at=timezone.now(), end=StrikeEnd.UNDONE)
    _points_add_locked(author, -strike.points, writes=writes)
    writes.execute()
    return author


# The author's strikes past their window ended, and the review's active strike read, in one
# statement, holding the author's lock (strikes are written under their author's lock). The
# review's strike is read as the statement's snapshot has it, which the review's lock (held
# before the statement) keeps current; one that lapses here is left out by its window, as the
# lapse's own condition is.
_LAPSE = """
WITH lapsed AS (
    UPDATE moderation_strike SET ended_at = %s, "end" = %s
    WHERE author_id = %s AND ended_at IS NULL AND expires_at <= %s RETURNING points
)
SELECT (SELECT coalesce(sum(points), 0) FROM lapsed), (SELECT count(*) FROM lapsed),
       active.id, active.points, active.created_at, active.expires_at
FROM (SELECT 1) AS one
LEFT JOIN moderation_strike AS active ON active.review_id = %s AND active.ended_at IS NULL AND active.expires_at > %s
"""

_STRIKE_READ = ["id", "points", "created_at", "expires_at"]


@dataclass(frozen=True)
class _StrikesRead:
    lapsed_points: int
    lapsed: int
    active: Strike | None  # the review's active strike (id, points and window only)


def _strikes_read_locked(author: Author, review: ContentReview | None, now: datetime) -> _StrikesRead:
    """End the author's strikes past their window (holding its lock) and read the review's active
    strike (`review` None: none read), in one round trip."""
    with connection.cursor() as cursor:
        cursor.execute(_LAPSE, [now, StrikeEnd.LAPSED, author.pk, now, review.pk if review is not None else None, now])
        row = cursor.fetchone()
    active = Strike.from_db("default", _STRIKE_READ, row[2:6]) if row[2] is not None else None
    return _StrikesRead(row[0], row[1], active)


def _points_add_locked(author: Author, change: int, *, writes: OneStatement) -> None:
    """Add `change` to the author's points (holding its lock), written by `writes`: once per
    statement, as a row is updated at most once in one (one_statement.py)."""
    if change == 0:
        return
    author.strike_points += change
    author.version += 1
    writes.update_compiled(_POINTS_WRITE, author.pk, strike_points=author.strike_points, version=author.version,
                           updated_at=timezone.now())


_POINTS_WRITE = CompiledUpdate(lambda pk: Author.objects.filter(pk=pk), ("strike_points", "version", "updated_at"))


def strikes_lapse_due(*, now: datetime | None = None, limit: int = 500) -> int:
    """Lapse every strike older than its window (a scheduled job): the authors' points go down,
    their standing does not (docs/design.md, "Authors"). Safe on several clusters at once: each
    author's strikes lapse under its lock, and a strike lapses once. Returns the strikes lapsed."""
    now = now or timezone.now()
    author_ids = list(Strike.objects.filter(ended_at__isnull=True, expires_at__lte=now)
                      .order_by("expires_at").values_list("author_id", flat=True)[:limit])
    lapsed = 0
    for author_id in dict.fromkeys(author_ids):
        with transaction.atomic():
            author = authors_lock([author_id])[author_id]
            read = _strikes_read_locked(author, None, now)
            writes = OneStatement()
            _points_add_locked(author, -read.lapsed_points, writes=writes)
            writes.execute()
            lapsed += read.lapsed
    return lapsed


# --- the authors' scheduled work ----------------------------------------------------------------
# (Here, beside the strikes that lapse: the suspensions that end are account_actions.py's, which
# the ladder above imports from.)

def authors_sweep(*, now: datetime | None = None, limit: int = 100, batches: int = 100,
                  deadline: float | None = None) -> dict[str, int]:
    """The authors' scheduled work: suspensions that ended, strikes that lapsed. Each drains in
    batches of `limit` until a batch comes back short, at most `batches` of them and none begun
    past `deadline` (time.monotonic()), so a run ends within its task's time and a backlog (after
    an outage) is taken by the next runs."""
    now = now or timezone.now()
    done = {"restored": 0, "lapsed": 0}
    for key, job in (("restored", restrictions_expire_due), ("lapsed", strikes_lapse_due)):
        for _ in range(batches):
            if deadline is not None and time.monotonic() > deadline:
                break
            count = job(now=now, limit=limit)
            done[key] += count
            if count < limit:
                break
    return done
