"""Domain errors: a few named exceptions, mapped to HTTP codes in one place (moderation.api.errors)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class ModerationError(Exception):
    """Base of the pipeline's domain errors. `str()` is the message the API's error body and the
    logs carry (ids and codes included); `reason`, where set, is the same without the ids, for a
    moderator (moderation/words.py, `refusal_words`)."""

    def __init__(self, *args, reason: str | None = None) -> None:
        super().__init__(*args)
        if reason is not None:
            self.reason = reason


class IllegalTransition(ModerationError):
    """The review's state machine does not allow this change from its current status."""

    def __init__(self, *, review_id, from_status: str, cause: str) -> None:
        self.reason = f"{cause} is not allowed from {from_status}"
        super().__init__(f"review {review_id}: {self.reason}")
        self.review_id = review_id
        self.from_status = from_status
        self.cause = cause


class Stale(ModerationError):
    """A moderator acted on a page older than what it shows: `changes` lists what happened since
    (empty for a version ahead of the current one: a forged or mistyped form)."""

    def __init__(self, what: str, *, expected: int, actual: int, changes: list[str]) -> None:
        self.reason = (f"changed since version {expected} (now {actual}): " + "; ".join(changes) if changes
                       else f"is at version {actual}, not {expected}")
        super().__init__(f"{what} {self.reason}")
        self.expected = expected
        self.actual = actual
        self.changes = changes


class ReviewChange(NamedTuple):
    """One transition of a review since a moderator read it: its codes for the API and the logs
    (`str()`: "manual_review -> pending (reprocess, by admin:sam)"), and what the words a moderator
    reads are made of (moderation/words.py, `change_words`)."""

    from_status: str
    to_status: str
    cause: str
    actor: str
    actor_id: str
    at: datetime | None = None

    def __str__(self) -> str:
        by = f"{self.actor}:{self.actor_id}" if self.actor_id else self.actor
        return f"{self.from_status} -> {self.to_status} ({self.cause}, by {by})"


class StaleVersion(Stale):
    """The caller acted on a version of the review that has changed since it was read. `changes`
    (strings, in the message) may be given as ReviewChange records, kept in `transitions`."""

    def __init__(self, *, review_id, expected: int, actual: int, changes: list) -> None:
        self.transitions = [c for c in changes if isinstance(c, ReviewChange)]
        super().__init__(f"review {review_id}", expected=expected, actual=actual, changes=[str(c) for c in changes])
        self.review_id = review_id


class StaleAuthor(Stale):
    """A moderator acted on an author page older than the author: a strike or a change of standing
    landed since."""

    def __init__(self, *, author_pk, expected: int, actual: int, changes: list[str]) -> None:
        super().__init__(f"author {author_pk}", expected=expected, actual=actual, changes=changes)
        self.author_pk = author_pk


class StaleReporter(ModerationError):
    """A moderator muted or unmuted a reporter from a page older than its mute: another moderator
    changed it since (moderation/services/reporters.py, `mute_token`)."""

    def __init__(self, *, reporter, expected: str) -> None:
        by = getattr(reporter.mute_changed_by, "get_username", lambda: "someone")()
        when = reporter.mute_changed_at.strftime("%Y-%m-%d %H:%M:%S") if reporter.mute_changed_at else "never"
        self.reason = (f"changed since the page was read: now {reporter.get_mute_display().lower()}, "
                       f"by {by} at {when} UTC ({reporter.mute_reason or 'no reason'})")
        super().__init__(f"reporter {reporter.pk} {self.reason}")
        self.reporter_pk = reporter.pk
        self.expected = expected


class IllegalStandingChange(ModerationError):
    """The author's standing does not allow this action (banning a banned author, lifting
    nothing)."""


class ReasonRequired(ModerationError):
    """A human decision must say why."""


class InvalidCategory(ModerationError):
    """A rejection names no violation category, or one the active policy does not have."""


class UnknownReason(ModerationError):
    """A decision picks a canned reason the active policy does not list for its category."""


class NoteTooLong(ModerationError):
    """A moderator's note is longer than a note may be."""


class LeasedToOther(ModerationError):
    """Another moderator holds this review (its lease has not expired): `holder` (their name) until
    `until`, when the raiser knows them."""

    def __init__(self, message: str, *, holder: str = "", until: datetime | None = None) -> None:
        super().__init__(message)
        self.holder = holder
        self.until = until


class QueueForbidden(ModerationError):
    """The review waits in a queue only members of its groups may take (moderation.services.routing)."""


class IdempotencyKeyReused(ModerationError):
    """The Idempotency-Key was already used with a different request body."""


class ContentErased(ModerationError):
    """The content was erased: there is nothing left to send to a provider."""


class AppealExists(ModerationError):
    """The decision was appealed already (at most one appeal per decision), or it is the outcome
    of an appeal."""


class NotAppealable(ModerationError):
    """Only a rejection can be appealed."""


class AppealWindowClosed(ModerationError):
    """The decision or action is older than its policy's `appeal_window_days`."""


class FourEyesRequired(ModerationError):
    """The moderator who made an appealed decision may not decide its appeal."""


class AppealOpen(ModerationError):
    """A review under appeal is decided by a moderator, not sent through the provider again."""


class SecondLookOpen(ModerationError):
    """A senior moderator is taking a second look at the decision in force: it is asked for once,
    and it stands until a senior moderator changes or confirms it."""


class SecondLookRefused(ModerationError):
    """Who may not settle a second look: someone without the senior permission, the moderator
    who asked for it, or the one who made the decision it looks at."""


class PolicyChanged(ModerationError):
    """A new policy version was published since the one a change was based on."""

    def __init__(self, *, expected: int, actual: int) -> None:
        self.reason = f"policy v{actual} was published since v{expected}, which this change was based on"
        super().__init__(self.reason)
        self.expected = expected
        self.actual = actual


class DraftNotPreviewed(ModerationError):
    """A policy draft was to be published without a preview of its diff and dry run."""

    reason = "the draft was never previewed"

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason or self.reason
        super().__init__(self.reason)


class DraftChanged(DraftNotPreviewed):
    """The draft to publish is not the one previewed: its term lists' digest differs."""

    def __init__(self, *, previewed: str, actual: str) -> None:
        super().__init__("the draft changed since its preview")
        self.previewed = previewed
        self.actual = actual


class DraftStale(ModerationError):
    """A policy draft that cannot be activated: it is not a draft, or the active version is no
    longer the one it was drafted from (or the one its figures were compared with)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnsafeWebhookUrl(ModerationError):
    """A webhook URL that may not be used: not https without DEBUG, or a name that resolves to
    an address the platform must not send to (moderation/netguard.py)."""


class NotApplicable(ModerationError):
    """A moderator's action that does not apply to the review as it is now (escalating a review
    that is already decided): refused before the state machine is asked, so it is not counted
    as an illegal transition."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotUndoable(ModerationError):
    """A moderator's decision that cannot be taken back (review_undo): its notification left, it
    is no longer the one in force, or something it did cannot be reverted whole. `reason` says
    which, in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotRequeueable(ModerationError):
    """A statement of reasons that is not one the Transparency Database refused: only those are
    built again and sent again (moderation/services/statements.py)."""


class BulkTooLarge(ModerationError):
    """A bulk action over more reviews than one job takes (moderation/services/bulk.py, BULK_MAX_REVIEWS)."""

    def __init__(self, *, count: int, limit: int) -> None:
        self.reason = (f"the search matches more than {limit:,} reviews ({count:,} or more): narrow it with a filter "
                       f"or a search term; one bulk action takes at most {limit:,}")
        super().__init__(self.reason)
        self.count = count
        self.limit = limit
