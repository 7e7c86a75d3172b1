"""The enforcement ladder and account actions: warn, suspend, ban and restore an author, by the
ladder or by a moderator, and the expiry of suspensions (docs/design.md, "Authors": "The ladder",
"Moderators"). Every action is taken under the author's row lock (moderation/services/authors.py,
the locking rule): its standing change, the action, its statement of reasons, the logged change
and the client's notification are written together.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django_fsm import InvalidResultState, TransitionNotAllowed

from audit import context
from audit.models import Actor, EventKind
from moderation.errors import IllegalStandingChange, NotApplicable, StaleAuthor
from moderation.validation import required_reason
from moderation.models import (
    ACCOUNT_REASON_MAX,
    RESTRICTIVE_ACTIONS,
    STANDING_FOR_ACTION,
    STANDING_RANK,
    TRANSITION_FOR_ACTION,
    AccountAction,
    ActionCause,
    ActionKind,
    Author,
    ModerationPolicy,
    RestrictionEnd,
    Standing,
    StandingCause,
    StandingTransition,
    Strike,
    StrikeEnd,
)
from moderation.services.authors import authors_lock
from moderation.db.one_statement import OneStatement
from moderation.services.outbox import author_actioned_body, author_restored_body, outbox_author_row, outbox_write
from moderation.services.policy import policy_active
from moderation.services.statements import statement_account_overturned, statement_for_account_action
from moderation.services.transitions import record_event

logger = logging.getLogger(__name__)

# Why a restriction ended -> the standing change's cause.
_CAUSE_FOR_END = {RestrictionEnd.EXPIRED: StandingCause.EXPIRED, RestrictionEnd.LIFTED: StandingCause.LIFTED,
                  RestrictionEnd.OVERTURNED: StandingCause.OVERTURNED}


# --- the ladder and account actions ------------------------------------------------------------

def ladder_rung(ladder: list[dict], points: int) -> dict | None:
    """The most severe rung `points` reaches (the highest, when several are reached together)."""
    reached = [rung for rung in ladder or [] if rung["points"] <= points]
    return max(reached, key=lambda rung: (STANDING_RANK[STANDING_FOR_ACTION[rung["action"]]], rung["points"]),
               default=None)


def ladder_climb_locked(author: Author, policy: ModerationPolicy, strike: Strike, before: int, *, now: datetime,
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


def author_restore_locked(author: Author, end: RestrictionEnd, *, actor: str, actor_id: str, reason: str,
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
    outbox_write([notification], writes=writes)
    writes.execute()
    return change


# --- moderators -------------------------------------------------------------------------------

SUSPEND_DAYS_MAX = 3650


def account_reason_checked(reason: str) -> str:
    return required_reason(reason, limit=ACCOUNT_REASON_MAX)


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
    reason = account_reason_checked(reason)
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
    reason = account_reason_checked(reason)
    with context.bind(author_pk=author_pk), transaction.atomic():
        author = _author_checked(author_pk, expected_version)
        if author.restriction_id is None:
            raise NotApplicable(f"author {author} is {author.standing}: nothing to lift")
        return author_restore_locked(author, RestrictionEnd.LIFTED, actor=Actor.ADMIN, actor_id=str(moderator.pk),
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
            author_restore_locked(author, RestrictionEnd.EXPIRED, actor=Actor.SYSTEM, actor_id="expiry",
                            reason=f"suspension ended at {author.restricted_until.isoformat()}", now=now)
            ended += 1
    return ended
