"""Account appeals: an author appeals the suspension or ban in force, and a moderator other than
the one who took the action resolves it (docs/design.md, "Authors": "Account appeals"). Both
under the author's row lock (moderation/services/authors.py, the locking rule).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit import context
from audit.models import Actor
from moderation.errors import AppealExists, AppealWindowClosed, NotAppealable, NotApplicable
from moderation.models import AccountAction, AccountAppeal, AccountAppealStatus, ApiClient, Author, RestrictionEnd
from moderation.transparency.notices import appealable_until
from moderation.services.account_actions import account_reason_checked, author_restore_locked
from moderation.services.appeals import four_eyes_check
from moderation.services.authors import authors_lock, standing_restricts
from moderation.services.outbox import account_appeal_resolved_body, outbox_author_row, outbox_write


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
    reason = account_reason_checked(reason)
    author_pk = AccountAppeal.objects.values_list("author_id", flat=True).get(pk=appeal_id)
    with context.bind(author_pk=author_pk), transaction.atomic():
        author = authors_lock([author_pk])[author_pk]
        appeal = AccountAppeal.objects.select_related("action").get(pk=appeal_id)
        if not appeal.is_open:  # the slower of two moderators deciding at once (the author's lock orders them)
            raise NotApplicable(f"{appeal.resolved_by or 'another moderator'} already decided it "
                                f"({appeal.status}) at {appeal.resolved_at:%H:%M} UTC")
        action = appeal.action
        four_eyes_check(appealed_by=action.moderator_id, moderator=moderator, what="took the appealed action",
                        appeal_id=appeal.pk)
        now = timezone.now()
        appeal.status, appeal.resolved_by, appeal.resolution_reason, appeal.resolved_at = outcome, moderator, reason, now
        appeal.save(update_fields=["status", "resolved_by", "resolution_reason", "resolved_at"])
        if outcome == AccountAppealStatus.OVERTURNED and author.restriction_id == action.pk:
            author.restriction = action
            author_restore_locked(author, RestrictionEnd.OVERTURNED, actor=Actor.ADMIN, actor_id=str(moderator.pk),
                            reason=reason, now=now)
        notification = outbox_author_row(author, body=account_appeal_resolved_body(author, appeal))
        notification.account_appeal = appeal
        outbox_write([notification])
        return appeal
