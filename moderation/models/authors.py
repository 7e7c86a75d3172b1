"""Authors, their strikes, the actions taken on their accounts and the appeals of those actions
(docs/design.md, "Authors, strikes and account actions").

An author is (client, author_id). Its standing is state, changed only by `@transition` methods
(like a review's status) and logged in StandingTransition in the same transaction; its active
strike points are kept on the row, so nothing is recomputed per request. Every write goes
through the author services (`moderation.services.authors`, `strikes`, `account_actions`,
`account_appeals`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django_fsm import RETURN_VALUE, FSMField, transition

from moderation.db.ids import uuid7

AUTHOR_ID_MAX = 255
ACCOUNT_REASON_MAX = 2000


class Standing(models.TextChoices):
    GOOD = "good", "Good"
    WARNED = "warned", "Warned"
    SUSPENDED = "suspended", "Suspended"
    BANNED = "banned", "Banned"


# How severe each standing is: the ladder takes a rung only above the author's standing.
STANDING_RANK = {Standing.GOOD: 0, Standing.WARNED: 1, Standing.SUSPENDED: 2, Standing.BANNED: 3}
RESTRICTED_STANDINGS = (Standing.SUSPENDED, Standing.BANNED)


class ActionKind(models.TextChoices):
    WARN = "warn", "Warn"
    SUSPEND = "suspend", "Suspend"
    BAN = "ban", "Ban"


# The standing each action puts an author in.
STANDING_FOR_ACTION = {ActionKind.WARN: Standing.WARNED, ActionKind.SUSPEND: Standing.SUSPENDED,
                       ActionKind.BAN: Standing.BANNED}
RESTRICTIVE_ACTIONS = (ActionKind.SUSPEND, ActionKind.BAN)


class ActionCause(models.TextChoices):
    STRIKES = "strikes", "The enforcement ladder (strikes)"
    MODERATOR = "moderator", "A moderator"


class RestrictionEnd(models.TextChoices):
    """Why a suspension or ban stopped being in force. The first three are the `why` of an
    `author.restored` notification; a restriction replaced by a stronger one restores nothing."""

    EXPIRED = "expired", "Expired"
    LIFTED = "lifted", "Lifted by a moderator"
    OVERTURNED = "overturned", "Overturned on appeal"
    REPLACED = "replaced", "Replaced by a later suspension or ban"


class StandingCause(models.TextChoices):
    """Why an author's standing changed: an action taken (by the ladder or a moderator), or a
    restriction that ended."""

    STRIKES = "strikes"
    MODERATOR = "moderator"
    EXPIRED = "expired"
    LIFTED = "lifted"
    OVERTURNED = "overturned"


class Author(models.Model):
    """One author of one client. `standing` is protected: only its transitions change it."""

    client = models.ForeignKey(  # indexed by the unique (client, author_id)
        "moderation.ApiClient", on_delete=models.PROTECT, related_name="authors", db_index=False
    )
    author_id = models.CharField(max_length=AUTHOR_ID_MAX)
    standing = FSMField(default=Standing.GOOD, choices=Standing.choices, protected=True)
    # The points of the author's active strikes (not revoked, not lapsed): kept with every strike
    # written, revoked or lapsed, in the same transaction (the invariant checker sums them).
    strike_points = models.PositiveIntegerField(default=0)
    # The suspension or ban in force (NULL: none), and until when (NULL with a ban: no end).
    restriction = models.OneToOneField(
        "moderation.AccountAction", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    restricted_until = models.DateTimeField(null=True, blank=True)
    # Bumped by every change a moderator sees on the author page (a strike, a standing change):
    # an action posted from an older page is refused and shows what changed.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "author_id"], name="author_client_author_id_uniq"),
            models.CheckConstraint(
                condition=Q(restriction__isnull=True, restricted_until__isnull=True)
                | Q(standing__in=["suspended", "banned"], restriction__isnull=False),
                name="author_restriction_matches_standing",
            ),
        ]
        indexes = [
            # The admin's filters (standing, points) and the metric of accounts by standing, over
            # the authors with a record: most authors are in good standing with no points.
            models.Index(fields=["standing", "-strike_points"], name="author_standing_idx",
                         condition=~Q(standing="good") | Q(strike_points__gt=0)),
        ]
        permissions = [("act_on_author", "Can warn, suspend, ban and lift authors")]

    def __str__(self) -> str:
        return self.author_id

    @property
    def is_restricted(self) -> bool:
        return self.standing in RESTRICTED_STANDINGS

    # --- transitions: guards and state only; moderation.services.account_actions writes the log

    @transition(field=standing, source=[Standing.GOOD, Standing.WARNED], target=Standing.WARNED)
    def warn(self) -> None:
        pass

    @transition(field=standing, source=[Standing.GOOD, Standing.WARNED, Standing.SUSPENDED], target=Standing.SUSPENDED)
    def suspend(self) -> None:
        pass

    @transition(field=standing, source=[Standing.GOOD, Standing.WARNED, Standing.SUSPENDED], target=Standing.BANNED)
    def ban(self) -> None:
        pass

    @transition(field=standing, source=list(RESTRICTED_STANDINGS), target=RETURN_VALUE(Standing.GOOD, Standing.WARNED))
    def restore(self, standing: str) -> str:
        return standing


TRANSITION_FOR_ACTION = {ActionKind.WARN: "warn", ActionKind.SUSPEND: "suspend", ActionKind.BAN: "ban"}


class StandingTransition(models.Model):
    """One row per change of an author's standing, written in the same transaction. Append-only."""

    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="transitions", db_index=False)
    from_standing = models.CharField(max_length=16, choices=Standing.choices)
    to_standing = models.CharField(max_length=16, choices=Standing.choices)
    cause = models.CharField(max_length=16, choices=StandingCause.choices)
    actor = models.CharField(max_length=16)  # audit.models.Actor
    actor_id = models.CharField(max_length=255, blank=True)
    action = models.ForeignKey("moderation.AccountAction", on_delete=models.PROTECT, related_name="transitions")
    strike_points = models.PositiveIntegerField(help_text="The author's active points at the change.")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["author", "id"], name="standing_transition_author_idx")]

    def __str__(self) -> str:
        return f"{self.author_id}: {self.from_standing} -> {self.to_standing} ({self.cause})"


class StrikeEnd(models.TextChoices):
    REPLACED = "replaced", "Replaced by a new decision of the review"
    OVERTURNED = "overturned", "Decision overturned"
    LAPSED = "lapsed", "Older than the strike window"
    UNDONE = "undone", "Decision undone by its moderator"


class Strike(models.Model):
    """One rejection of an author's review, counted against the author while younger than the
    policy's window. At most one active strike per review (a unique constraint)."""

    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="strikes", db_index=False)
    review = models.ForeignKey("moderation.ContentReview", on_delete=models.PROTECT, related_name="strikes",
                               db_index=False)
    decision = models.OneToOneField("moderation.Decision", on_delete=models.PROTECT, related_name="strike")
    category = models.CharField(max_length=64)
    points = models.PositiveSmallIntegerField()
    policy = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=16, choices=StrikeEnd.choices, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["review"], condition=Q(ended_at__isnull=True), name="strike_one_active_per_review"),
            models.CheckConstraint(condition=Q(ended_at__isnull=True, end="") | Q(ended_at__isnull=False) & ~Q(end=""),
                                   name="strike_end_with_reason"),
        ]
        indexes = [
            models.Index(fields=["author", "-created_at"], name="strike_author_idx"),
            models.Index(fields=["review"], name="strike_review_idx"),
            # An author's active strikes: its points' lapse under its lock, the API's list.
            models.Index(fields=["author", "expires_at"], name="strike_author_active_idx",
                         condition=Q(ended_at__isnull=True)),
            # The lapse job's scan, and an author's own due strikes under its lock.
            models.Index(fields=["expires_at"], name="strike_active_expiry_idx", condition=Q(ended_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"strike {self.pk}: {self.category} ({self.points})"

    @property
    def is_active(self) -> bool:
        return self.ended_at is None


class AccountAction(models.Model):
    """A warning, suspension or ban of an author, taken by the ladder or a moderator. Its id is
    the action's public id (and its statement's puid): it never changes."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="actions", db_index=False)
    action = models.CharField(max_length=16, choices=ActionKind.choices)
    cause = models.CharField(max_length=16, choices=ActionCause.choices)
    until = models.DateTimeField(null=True, blank=True, help_text="When a suspension ends.")
    reason = models.TextField(blank=True)
    moderator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                  related_name="+")
    policy = models.ForeignKey("moderation.ModerationPolicy", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="+")
    # The facts it rests on, fixed when taken (they outlive erasure of the content): the active
    # points, and each active strike's {category, points, review_id}.
    strike_points = models.PositiveIntegerField(default=0)
    strikes = models.JSONField(default=list, blank=True)
    # The strike that reached the rung (an automatic action's; NULL for a moderator's).
    strike = models.ForeignKey(Strike, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # The standing it moved the author from (an overturn goes back to it, or to warned).
    previous_standing = models.CharField(max_length=16, choices=Standing.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=16, choices=RestrictionEnd.choices, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(action="suspend", until__isnull=False) | ~Q(action="suspend"),
                                   name="account_action_suspension_has_end"),
        ]
        indexes = [
            models.Index(fields=["author", "created_at"], name="account_action_author_idx"),
            # The transparency report: a period's suspensions and bans.
            models.Index(fields=["created_at"], name="account_action_created_idx"),
            # The expiry job's scan: suspensions in force, by end.
            models.Index(fields=["until"], name="account_action_due_idx",
                         condition=Q(action="suspend", ended_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.author_id} ({self.cause})"

    @property
    def is_restrictive(self) -> bool:
        return self.action in RESTRICTIVE_ACTIONS

    @property
    def automated(self) -> bool:
        return self.cause == ActionCause.STRIKES


class AccountAppealStatus(models.TextChoices):
    OPEN = "open", "Open"
    UPHELD = "upheld", "Upheld"
    OVERTURNED = "overturned", "Overturned (restriction lifted)"


class AccountAppeal(models.Model):
    """The author's complaint against one suspension or ban. At most one per action (unique);
    resolved by a moderator other than the one who took the action."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    action = models.OneToOneField(AccountAction, on_delete=models.PROTECT, related_name="appeal")
    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="appeals", db_index=False)
    statement = models.TextField()
    status = models.CharField(max_length=16, choices=AccountAppealStatus.choices, default=AccountAppealStatus.OPEN)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    resolution_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status="open", resolved_at__isnull=True) | (~Q(status="open") & Q(resolved_at__isnull=False)),
                name="account_appeal_resolved_at",
            ),
        ]
        indexes = [
            models.Index(fields=["author", "created_at"], name="account_appeal_author_idx"),
            models.Index(fields=["created_at"], name="account_appeal_open_idx", condition=Q(status="open")),
            # The transparency report: the appeals received, and those decided, in a period.
            models.Index(fields=["created_at"], name="account_appeal_created_idx"),
            models.Index(fields=["resolved_at"], name="account_appeal_resolved_idx",
                         condition=Q(resolved_at__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"account appeal {self.id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == AccountAppealStatus.OPEN
