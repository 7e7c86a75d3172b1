"""A review's statuses, causes, actors and refusals in a moderator's words: no ids, UUIDs or cause
codes (docs/workplace.md, "Moderator words"). Written once, read by the review page
(moderation/admin/review_words.py), the admin's refusal messages (moderation/admin/reviews.py) and
the skip reasons a bulk job records (moderation/services/bulk.py). The codes stay in the errors'
own messages (the API's error body and the logs) and in the timeline's raw record.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.utils import timezone

from audit.models import Actor
from moderation.errors import IllegalTransition, LeasedToOther, ModerationError, ReviewChange, StaleVersion
from moderation.models import Cause, ReviewStatus

# Why a review took the status it has, by the cause of the transition: {who} is who made it
# (actor_words), "a moderator" where the page does not name them; {their}, "your" for "you".
CAUSE_WORDS = {
    Cause.JOB_STARTED: "being judged by the model",
    Cause.RETRY_RECONCILE: "being judged by the model again",
    Cause.PROVIDER_RESULT: "by the model",
    Cause.PROVIDER_CALLBACK: "by the model (its callback)",
    Cause.PROVIDER_FAILED: "because the model could not judge it",
    Cause.MANUAL_ESCALATION: "(escalated by {who})",
    Cause.MANUAL_OVERRIDE: "by {who}",
    Cause.REPROCESS: "sent to the model again by {who}",
    Cause.USER_REPORTS: "by user reports",
    Cause.APPEAL: "because its owner appealed",
    Cause.CONTENT_ERASED: "because its content was erased",
    Cause.NOTICE: "by a DSA notice or a trusted flagger",
    Cause.UNDO: "because {who} undid {their} decision",
}
LABEL_WORDS = {
    ReviewStatus.APPROVED: "Approved",
    ReviewStatus.REJECTED: "Rejected",
    ReviewStatus.MANUAL_REVIEW: "Sent to a human",
}
# What a review is doing now, by its status ("the review is waiting for the model").
STATUS_NOW = {
    ReviewStatus.PENDING: "waiting for the model",
    ReviewStatus.PROCESSING: "being judged by the model",
    ReviewStatus.APPROVED: "approved",
    ReviewStatus.REJECTED: "rejected",
    ReviewStatus.MANUAL_REVIEW: "waiting for a human",
}
# Who an actor is, named (`{}`: its id) or not.
ACTOR_WORDS = {
    Actor.ADMIN: ("moderator {}", "a moderator"),
    Actor.API: ("the client {}", "the client"),
    Actor.COMMAND: ("the operator {}", "an operator"),
    Actor.SYSTEM: ("the system", "the system"),
    Actor.WORKER: ("the model", "the model"),
    Actor.WEBHOOK: ("the model (its callback)", "the model (its callback)"),
}
CHANGES_SHOWN = 5  # a stale refusal names the first few changes, then counts the rest


def decided(label: str, category: str = "") -> str:
    """"Rejected as harassment", "Approved", "Sent to a human"."""
    words = LABEL_WORDS.get(label, str(label).replace("_", " ").capitalize())
    return f"{words} as {category}" if category else words


def actor_words(actor: str, actor_id: str = "", *, me: str = "") -> str:
    """"moderator sam" ("you" when `me` is sam), "the client acme", "a moderator" (no id)."""
    if me and actor == Actor.ADMIN and actor_id == me:
        return "you"
    named, unnamed = ACTOR_WORDS.get(actor, ("{}", "someone"))
    return named.format(actor_id) if actor_id else unnamed


def cause_words(cause: str, who: str = "a moderator") -> str:
    """How a transition of `cause` came, made by `who` ("by user reports", "by moderator sam")."""
    return CAUSE_WORDS.get(cause, "").format(who=who, their="your" if who == "you" else "their")


def at_words(at: datetime | None) -> str:
    """" at 14:02 UTC" today, " on 2026-12-01 at 14:02 UTC" before ("" unknown)."""
    if at is None:
        return ""
    at, today = at.astimezone(UTC), timezone.now().astimezone(UTC).date()
    return f" at {at:%H:%M} UTC" if at.date() == today else f" on {at:%Y-%m-%d} at {at:%H:%M} UTC"


def change_words(change: ReviewChange, *, me: str = "") -> str:
    """One change of a review: "rejected by moderator sam at 14:02 UTC", "sent to the model again by
    you at 14:05 UTC", "sent to a human by user reports at 14:07 UTC"."""
    how = cause_words(change.cause, actor_words(change.actor, change.actor_id, me=me))
    if change.to_status == ReviewStatus.PENDING:
        what = how or "sent to the model"
    elif change.to_status == ReviewStatus.PROCESSING:
        what = "taken up by the model"
    else:
        what = f"{decided(change.to_status).lower()} {how}".strip()
    return what + at_words(change.at)


def stale_words(exc: StaleVersion, *, me: str = "") -> str:
    """A stale refusal: what happened since the moderator opened the review, in order."""
    if not exc.changes:  # a version ahead of the review's: a forged or mistyped form
        return f"the page sent version {exc.expected}, which this review never had (it is at version {exc.actual})"
    if not exc.transitions:  # changes known only by their codes: say that it changed
        return "it changed since you opened it"
    said = [change_words(change, me=me) for change in exc.transitions[:CHANGES_SHOWN]]
    more = len(exc.transitions) - CHANGES_SHOWN
    if more > 0:
        said.append(f"{more} more change{'s' if more > 1 else ''}")
    return "it changed since you opened it: " + "; then ".join(said)


def refusal_words(exc: ModerationError, *, me: str = "") -> str:
    """Why a service refused, for a moderator (`me`: their name, said "you"): the error's `reason`
    where it has one without codes, else its message."""
    if isinstance(exc, StaleVersion):
        return stale_words(exc, me=me)
    if isinstance(exc, LeasedToOther) and exc.holder and exc.until:
        return f"{exc.holder} is reviewing this until {exc.until.astimezone(UTC):%H:%M} UTC"
    if isinstance(exc, IllegalTransition):
        return f"that is not possible while the review is {STATUS_NOW.get(exc.from_status, 'in another state')}"
    return getattr(exc, "reason", None) or str(exc)
