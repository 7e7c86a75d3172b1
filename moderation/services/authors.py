"""Authors: strikes, the enforcement ladder, account actions and account appeals (docs/design.md,
"Authors, strikes and account actions").

Every write to an author happens under the author's row lock, in the transaction of what causes
it: a strike in the transaction of the rejection (`strikes_after_decision_locked`, called by the
one decide path), an action in the strike's transaction or the moderator's, a restriction's end
in the expiry job's. The lock serialises everything that reads the author's points and standing
and writes them back, so twenty rejections of one author landing at once in twenty workers add
up exactly, and a rung is taken once.

Locking rule: an author's lock is taken after the locks of the reviews being decided (those are
taken first, in id order: moderation/services/pipeline.py), and several authors' locks in author
id order (`authors_lock`). Nothing locks a review while holding an author's lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone
from django_fsm import InvalidResultState, TransitionNotAllowed

from audit import context
from audit.models import Actor, EventKind
from moderation.errors import (
    AppealExists,
    AppealWindowClosed,
    FourEyesRequired,
    IllegalStandingChange,
    NotAppealable,
    NotApplicable,
    NotUndoable,
    ReasonRequired,
    StaleAuthor,
)
from moderation.models import (
    ACCOUNT_REASON_MAX,
    RESTRICTIVE_ACTIONS,
    STANDING_FOR_ACTION,
    STANDING_RANK,
    TRANSITION_FOR_ACTION,
    AccountAction,
    AccountAppeal,
    AccountAppealStatus,
    ActionCause,
    ActionKind,
    ApiClient,
    Author,
    ContentReview,
    Decision,
    ModerationPolicy,
    NotificationKind,
    RestrictionEnd,
    ReviewStatus,
    Standing,
    StandingCause,
    StandingTransition,
    Strike,
    StrikeEnd,
)
from moderation.transparency.notices import appealable_until
from moderation.transparency.reasons import account_statement, reasons, timestamp
from moderation.db.compiled import CompiledSelect, CompiledUpdate
from moderation.services.statements import statement_account_overturned, statement_for_account_action
from moderation.db.one_statement import OneStatement, Read
from moderation.services.outbox import outbox_author_row, outbox_enqueue
from moderation.services.policy import policy_active, policy_published
from moderation.services.transitions import record_event

logger = logging.getLogger(__name__)

# Why a restriction ended -> the standing change's cause.
_CAUSE_FOR_END = {RestrictionEnd.EXPIRED: StandingCause.EXPIRED, RestrictionEnd.LIFTED: StandingCause.LIFTED,
                  RestrictionEnd.OVERTURNED: StandingCause.OVERTURNED}


# --- who wrote it ------------------------------------------------------------------------------

@dataclass(frozen=True)
class AuthorRef:
    """An author as a submission sees it: its id, and whether its new content is restricted."""

    pk: int
    restricted: bool


_ENSURE = """
WITH new AS (
    INSERT INTO moderation_author (client_id, author_id, standing, strike_points, version, created_at, updated_at)
    VALUES (%(client)s, %(author_id)s, 'good', 0, 1, now(), now())
    ON CONFLICT (client_id, author_id) DO NOTHING
    RETURNING id, standing, restricted_until
)
SELECT id, standing, restricted_until FROM new
UNION ALL
SELECT id, standing, restricted_until FROM moderation_author WHERE client_id = %(client)s AND author_id = %(author_id)s
LIMIT 1
"""


def author_ensure(client: ApiClient, author_id: str, *, now: datetime | None = None) -> AuthorRef:
    """The author `author_id` of `client`, created on its first submission: one statement, and no
    lock (a submission never waits for a finalize holding the author). Whether its new content is
    restricted is read here: content submitted while it is suspended or banned."""
    params = {"client": client.pk, "author_id": author_id}
    with connection.cursor() as cursor:
        cursor.execute(_ENSURE, params)
        row = cursor.fetchone()
        if row is None:  # inserted by a transaction that committed after this statement's snapshot
            cursor.execute("SELECT id, standing, restricted_until FROM moderation_author "
                           "WHERE client_id = %(client)s AND author_id = %(author_id)s", params)
            row = cursor.fetchone()
    pk, standing, until = row
    return AuthorRef(pk=pk, restricted=standing_restricts(standing, until, now or timezone.now()))


def standing_restricts(standing: str, until: datetime | None, now: datetime) -> bool:
    """Whether an author in `standing` (suspended until `until`) is restricted at `now`."""
    if standing == Standing.BANNED:
        return True
    return standing == Standing.SUSPENDED and until is not None and until > now


def authors_lock(author_ids: Iterable[int]) -> dict[int, Author]:
    """Lock authors in id order (the locking rule above); returns them by id."""
    ids = sorted({pk for pk in author_ids if pk is not None})
    if not ids:
        return {}
    return {a.pk: a for a in _AUTHORS_LOCK.all(ids)}


# FOR NO KEY UPDATE: a new review naming the author (its foreign key check takes FOR KEY SHARE)
# does not wait for the holder; writers of the author still queue one behind another. Compiled
# once (moderation/db/compiled.py): every callback of an author's review takes it.
_AUTHORS_LOCK = CompiledSelect(
    lambda ids: Author.objects.select_for_update(no_key=True, of=("self",)).select_related("client")
    .filter(pk__in=ids).order_by("pk")
)


def _author_locked(review: ContentReview) -> Author:
    """The review's author, locked: by the caller already (a batch locks its authors up front,
    `authors_lock`) or now."""
    author = getattr(review, "_locked_author", None)
    if author is None or author.pk != review.author_id:
        author = authors_lock([review.author_id])[review.author_id]
        review._locked_author = author
    return author


# --- strikes ----------------------------------------------------------------------------------

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
                                  writes: OneStatement | None = None) -> None:
    """Keep the review's strike true to its new decision, in the decision's transaction (called by
    `decide_locked`, holding the review's lock): a rejection writes one (replacing any the review
    had), an approval revokes the review's strike. Then the ladder, if the author's points went
    up. Other decisions (a human to look) change no strike, and neither does a rejection that
    `counts_strike` says is not for a violation (a restricted author's content rejected unseen).

    `struck`: whether the review has an active strike, when the caller asked already
    (`strike_open_read`). `writes`: the statement the strike's writes join (the caller runs it);
    without one they run here. Either way, once the author is locked (by a batch already, or
    here), one statement reads (its lapsed strikes ended, the review's strike:
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
    author = _author_locked(review)
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
        _ladder_locked(author, policy, strike, before, now=now, actor=actor, actor_id=actor_id, writes=writes)
    if own:
        writes.execute()


def strike_undo_locked(review: ContentReview, decision: Decision) -> None:
    """Take back the strike `decision` wrote (review_undo; holding the review's lock, in its
    transaction): it ends as `undone` and its points come off the author. Refused (NotUndoable)
    when the decision did more to the author than add a strike, which no undo can revert whole:
    it replaced or revoked an earlier strike, or the author's standing changed since it (the
    ladder's action was announced to the client)."""
    if review.author_id is None:
        return
    if Strike.objects.filter(review=review, end__in=(StrikeEnd.REPLACED, StrikeEnd.OVERTURNED),
                             ended_at__gte=decision.created_at).exists():
        raise NotUndoable("it replaced the author's earlier strike for this content: decide again instead")
    if StandingTransition.objects.filter(author_id=review.author_id, created_at__gte=decision.created_at).exists():
        raise NotUndoable("the author's standing changed after it (the client was told): decide again instead")
    strike = Strike.objects.filter(decision=decision, ended_at__isnull=True).first()
    if strike is None:
        return
    author = _author_locked(review)
    writes = OneStatement()
    writes.update(Strike.objects.filter(pk=strike.pk), ended_at=timezone.now(), end=StrikeEnd.UNDONE)
    _points_add_locked(author, -strike.points, writes=writes)
    writes.execute()


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


# --- the ladder and account actions ------------------------------------------------------------

def ladder_rung(ladder: list[dict], points: int) -> dict | None:
    """The most severe rung `points` reaches (the highest, when several are reached together)."""
    reached = [rung for rung in ladder or [] if rung["points"] <= points]
    return max(reached, key=lambda rung: (STANDING_RANK[STANDING_FOR_ACTION[rung["action"]]], rung["points"]),
               default=None)


def _ladder_locked(author: Author, policy: ModerationPolicy, strike: Strike, before: int, *, now: datetime,
                   actor: str, actor_id: str, writes: OneStatement) -> AccountAction | None:
    """Take the rung the author's points reach, once: only a rung above its standing is taken
    (docs/design.md, "Authors"). A rung crossed by this strike while the standing is already at or
    above it is recorded (an event), so that the log shows both of two racing attempts. `writes`:
    the strike's, not yet run: an action runs them first (it refers to the strike, lists the
    author's strikes and writes the author again)."""
    rung = ladder_rung(policy.enforcement_ladder, author.strike_points)
    if rung is None:
        return None
    kind = ActionKind(rung["action"])
    if STANDING_RANK[STANDING_FOR_ACTION[kind]] > STANDING_RANK[author.standing]:
        writes.execute()
        until = now + timedelta(days=rung["days"]) if kind == ActionKind.SUSPEND else None
        reason = (f"{author.strike_points} strike points in {policy.strike_window_days} days reached "
                  f"the {kind} rung ({rung['points']} points) of policy v{policy.version}")
        return _act_locked(author, kind, cause=ActionCause.STRIKES, until=until, reason=reason, moderator=None,
                           policy=policy, actor=actor, actor_id=actor_id, now=now, strike=strike)
    crossed = [r for r in policy.enforcement_ladder if before < r["points"] <= author.strike_points]
    if crossed:
        record_event(EventKind.LADDER_RUNG_SKIPPED, review_id=strike.review_id, author=author.pk,
                     rung=rung["action"], points=author.strike_points, standing=author.standing)
    return None


def _active_strike_facts(author: Author) -> list[dict]:
    return [{"category": c, "points": p, "review_id": str(r)}
            for c, p, r in Strike.objects.filter(author=author, ended_at__isnull=True)
            .order_by("created_at", "id").values_list("category", "points", "review_id")]


def _act_locked(author: Author, kind: ActionKind, *, cause: ActionCause, until: datetime | None, reason: str,
                moderator, policy: ModerationPolicy | None, actor: str, actor_id: str, now: datetime,
                strike: Strike | None = None) -> AccountAction:
    """Take an action on the author (holding its lock): its standing changes (the state machine
    decides whether it may), the action, the logged change and the `author.actioned`
    notification are written together."""
    previous = author.standing
    try:
        getattr(author, TRANSITION_FOR_ACTION[kind])()
    except TransitionNotAllowed as exc:
        raise IllegalStandingChange(f"cannot {kind} an author who is {previous}") from exc
    action = AccountAction(
        author=author, action=kind, cause=cause, until=until, reason=reason, moderator=moderator, policy=policy,
        strike_points=author.strike_points, strikes=_active_strike_facts(author), previous_standing=previous,
        strike=strike,
    )
    writes = OneStatement()
    if kind in RESTRICTIVE_ACTIONS:
        if author.restriction_id is not None:  # a suspension replaced by a ban or a new suspension
            writes.update(AccountAction.objects.filter(pk=author.restriction_id, ended_at__isnull=True),
                          ended_at=now, end=RestrictionEnd.REPLACED)
        author.restriction, author.restricted_until = action, until
    writes.insert(action)
    if kind in RESTRICTIVE_ACTIONS:  # its statement of reasons for the DSA Transparency Database
        statement_for_account_action(action, writes, now=now)
    writes.execute()
    _standing_changed_locked(author, previous, action, cause=StandingCause(cause), actor=actor, actor_id=actor_id,
                             reason=reason, body=lambda: author_actioned_body(author, action))
    logger.info("author %s: %s (%s)", author.pk, kind, cause)
    return action


def _restore_locked(author: Author, end: RestrictionEnd, *, actor: str, actor_id: str, reason: str,
                    now: datetime) -> StandingTransition:
    """End the author's suspension or ban in force (holding its lock), and tell the client
    (`author.restored`). An overturned action gives the standing back that it took; a restriction
    that expired or was lifted leaves the author warned."""
    action = author.restriction
    previous = author.standing
    back = action.previous_standing if end == RestrictionEnd.OVERTURNED else Standing.WARNED
    back = back if back in (Standing.GOOD, Standing.WARNED) else Standing.WARNED
    try:
        author.restore(back)
    except (TransitionNotAllowed, InvalidResultState) as exc:
        raise IllegalStandingChange(f"cannot restore an author who is {previous}") from exc
    AccountAction.objects.filter(pk=action.pk).update(ended_at=now, end=end)
    action.ended_at, action.end = now, end
    if end == RestrictionEnd.OVERTURNED:  # a correction, recorded against the action's statement
        statement_account_overturned(action, now=now)
    author.restriction, author.restricted_until = None, None
    return _standing_changed_locked(author, previous, action, cause=_CAUSE_FOR_END[end], actor=actor,
                                    actor_id=actor_id, reason=reason,
                                    body=lambda: author_restored_body(author, action, end))


def _standing_changed_locked(author: Author, previous: str, action: AccountAction, *, cause: StandingCause,
                             actor: str, actor_id: str, reason: str, body) -> StandingTransition:
    """Write the author's new standing, its log row and its notification, in one statement."""
    author.version += 1
    now = timezone.now()
    writes = OneStatement()
    writes.update(Author.objects.filter(pk=author.pk), standing=author.standing, restriction=author.restriction_id,
                  restricted_until=author.restricted_until, version=author.version, updated_at=now)
    change = StandingTransition(author=author, from_standing=previous, to_standing=author.standing, cause=cause,
                                actor=actor, actor_id=actor_id, action=action, strike_points=author.strike_points,
                                reason=reason)
    writes.insert(change)
    notification = outbox_author_row(author, body=body())
    notification.standing_change_id = writes.key_of(change)
    writes.insert(notification)
    writes.execute()
    outbox_enqueue(notification)
    return change


def author_actioned_body(author: Author, action: AccountAction) -> dict:
    return {
        "type": NotificationKind.AUTHOR_ACTIONED,
        "data": {
            "author_id": author.author_id, "action_id": str(action.pk), "action": action.action,
            "until": timestamp(action.until) if action.until else None, "cause": action.cause,
            "reason": action.reason, "statement": account_statement(action),
        },
    }


def author_restored_body(author: Author, action: AccountAction, end: RestrictionEnd) -> dict:
    return {
        "type": NotificationKind.AUTHOR_RESTORED,
        "data": {"author_id": author.author_id, "action_id": str(action.pk), "why": end},
    }


# --- moderators -------------------------------------------------------------------------------

SUSPEND_DAYS_MAX = 3650


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ReasonRequired("a reason is required")
    if len(reason) > ACCOUNT_REASON_MAX:
        raise ReasonRequired(f"a reason is at most {ACCOUNT_REASON_MAX} characters")
    return reason


def _author_checked(author_pk: int, expected_version: int | None) -> Author:
    """Lock the author; refuse if it changed since the page the moderator acted from."""
    author = authors_lock([author_pk]).get(author_pk)
    if author is None:
        raise Author.DoesNotExist(f"no author {author_pk}")
    if expected_version is not None and author.version != expected_version:
        raise StaleAuthor(author_pk=author_pk, expected=expected_version, actual=author.version,
                          changes=author_changes_since(author, expected_version))
    return author


def author_changes_since(author: Author, version: int) -> list[str]:
    """What a moderator did not see: the strikes and standing changes newer than the page they
    acted from (at most the last 20), oldest first."""
    if author.version <= version:
        return []
    count = min(author.version - version, 20)
    strikes = [(s.created_at, f"strike: {s.category} (+{s.points})" if s.end in ("", StrikeEnd.REPLACED)
                else f"strike {s.category} {s.end}") for s in author.strikes.order_by("-id")[:count]]
    changes = [(t.created_at, f"{t.from_standing} -> {t.to_standing} ({t.cause}, by {t.actor})")
               for t in author.transitions.order_by("-id")[:count]]
    return [text for _, text in sorted(strikes + changes, key=lambda each: each[0])][-count:]


def _refused(func):
    """Record a refused account action (an event) after its transaction rolled back: a manual
    action racing the ladder leaves both attempts in the log."""
    def wrapper(*, author_pk, moderator, **kwargs):
        try:
            return func(author_pk=author_pk, moderator=moderator, **kwargs)
        except (StaleAuthor, IllegalStandingChange, NotApplicable) as exc:
            record_event(EventKind.AUTHOR_ACTION_REFUSED, author=author_pk, action=func.__name__,
                         moderator=getattr(moderator, "pk", None), why=str(exc)[:500])
            raise
    wrapper.__name__, wrapper.__doc__ = func.__name__, func.__doc__
    return wrapper


@_refused
def author_act(*, author_pk: int, moderator, action: str, reason: str, days: int | None = None,
               expected_version: int | None = None) -> AccountAction:
    """A moderator warns, suspends for `days` or bans an author, with a reason. Refused
    (StaleAuthor) when the author changed since `expected_version`, the page the moderator read."""
    kind = ActionKind(action)
    reason = _reason(reason)
    until = None
    if kind == ActionKind.SUSPEND:
        if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= SUSPEND_DAYS_MAX:
            raise NotApplicable(f"a suspension lasts 1 to {SUSPEND_DAYS_MAX} days")
    with context.bind(author_pk=author_pk), transaction.atomic():
        author = _author_checked(author_pk, expected_version)
        now = timezone.now()
        if kind == ActionKind.SUSPEND:
            until = now + timedelta(days=days)
        return _act_locked(author, kind, cause=ActionCause.MODERATOR, until=until, reason=reason, moderator=moderator,
                           policy=policy_active(), actor=Actor.ADMIN, actor_id=str(moderator.pk), now=now)


@_refused
def author_lift(*, author_pk: int, moderator, reason: str, expected_version: int | None = None) -> StandingTransition:
    """A moderator lifts the author's suspension or ban, with a reason (`author.restored`, why
    `lifted`)."""
    reason = _reason(reason)
    with context.bind(author_pk=author_pk), transaction.atomic():
        author = _author_checked(author_pk, expected_version)
        if author.restriction_id is None:
            raise NotApplicable(f"author {author} is {author.standing}: nothing to lift")
        return _restore_locked(author, RestrictionEnd.LIFTED, actor=Actor.ADMIN, actor_id=str(moderator.pk),
                               reason=reason, now=timezone.now())


# --- the expiry job ---------------------------------------------------------------------------

def restrictions_expire_due(*, now: datetime | None = None, limit: int = 500) -> int:
    """End every suspension whose `until` has passed, once each (a scheduled job, safe on several
    clusters at once: each one is ended under its author's lock, and only while it is still the
    author's restriction in force). Returns how many this call ended."""
    now = now or timezone.now()
    due = list(AccountAction.objects.filter(action=ActionKind.SUSPEND, ended_at__isnull=True, until__lte=now)
               .order_by("until").values_list("author_id", "pk")[:limit])
    ended = 0
    for author_pk, action_pk in due:
        with context.bind(author_pk=author_pk), transaction.atomic():
            author = authors_lock([author_pk])[author_pk]
            if author.restriction_id != action_pk or author.restricted_until is None or author.restricted_until > now:
                continue  # ended, replaced or extended meanwhile (by another cluster, a moderator, a ban)
            author.restriction = AccountAction.objects.get(pk=action_pk)
            _restore_locked(author, RestrictionEnd.EXPIRED, actor=Actor.SYSTEM, actor_id="expiry",
                            reason=f"suspension ended at {author.restricted_until.isoformat()}", now=now)
            ended += 1
    return ended


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


# --- account appeals --------------------------------------------------------------------------

def account_appeal_file(*, client: ApiClient, author_id: str, statement: str) -> AccountAppeal:
    """The author appeals the suspension or ban in force, within its policy's appeal window. At
    most one appeal per action: of concurrent ones the first (under the author's lock) creates
    it, the others find it; the window is checked under the same lock."""
    author = Author.objects.filter(client=client, author_id=author_id).values_list("pk", flat=True).first()
    if author is None:
        raise Author.DoesNotExist(author_id)
    with context.bind(author_pk=author), transaction.atomic():
        author = authors_lock([author])[author]
        if not standing_restricts(author.standing, author.restricted_until, timezone.now()):
            raise NotAppealable(f"author {author_id} is {author.standing}: no suspension or ban is in force")
        if AccountAppeal.objects.filter(action_id=author.restriction_id).exists():
            raise AppealExists(f"action {author.restriction_id} was already appealed")
        action = AccountAction.objects.select_related("policy").get(pk=author.restriction_id)
        until = appealable_until(action.created_at, action.policy)
        if timezone.now() > until:
            raise AppealWindowClosed(f"action {action.pk} could be appealed until {until.isoformat()}")
        return AccountAppeal.objects.create(action_id=author.restriction_id, author=author, statement=statement)


def account_appeal_resolve(*, appeal_id, moderator, outcome: str, reason: str) -> AccountAppeal:
    """A moderator other than the one who took the action resolves its appeal: `upheld`, or
    `overturned` (the restriction, if still in force, is lifted: `author.restored`, why
    `overturned`). The client is told either way (`account_appeal.resolved`)."""
    outcome = AccountAppealStatus(outcome)
    if outcome == AccountAppealStatus.OPEN:
        raise NotApplicable("an appeal is resolved upheld or overturned")
    reason = _reason(reason)
    author_pk = AccountAppeal.objects.values_list("author_id", flat=True).get(pk=appeal_id)
    with context.bind(author_pk=author_pk), transaction.atomic():
        author = authors_lock([author_pk])[author_pk]
        appeal = AccountAppeal.objects.select_related("action").get(pk=appeal_id)
        if not appeal.is_open:
            raise NotApplicable(f"appeal {appeal.pk} is {appeal.status} already")
        action = appeal.action
        if action.moderator_id is not None and moderator is not None and action.moderator_id == moderator.pk:
            raise FourEyesRequired(f"{moderator} took this action: another moderator must decide appeal {appeal.pk}")
        now = timezone.now()
        appeal.status, appeal.resolved_by, appeal.resolution_reason, appeal.resolved_at = outcome, moderator, reason, now
        appeal.save(update_fields=["status", "resolved_by", "resolution_reason", "resolved_at"])
        if outcome == AccountAppealStatus.OVERTURNED and author.restriction_id == action.pk:
            author.restriction = action
            _restore_locked(author, RestrictionEnd.OVERTURNED, actor=Actor.ADMIN, actor_id=str(moderator.pk),
                            reason=reason, now=now)
        notification = outbox_author_row(author, body=account_appeal_resolved_body(author, appeal))
        notification.account_appeal = appeal
        notification.save()
        outbox_enqueue(notification)
        return appeal


def account_appeal_resolved_body(author: Author, appeal: AccountAppeal) -> dict:
    return {
        "type": NotificationKind.ACCOUNT_APPEAL_RESOLVED,
        "data": {"author_id": author.author_id, "action_id": str(appeal.action_id), "appeal_id": str(appeal.pk),
                 "outcome": appeal.status},
    }
