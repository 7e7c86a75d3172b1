"""Authors: who wrote a content, and the lock every write to an author takes (docs/design.md,
"Authors"). What is written under that lock lives beside it: strikes and the authors' scheduled
work (`strikes.py`), the ladder and account actions (`account_actions.py`), account appeals
(`account_appeals.py`).

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

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from moderation.models import ApiClient, Author, ContentReview, Standing
from moderation.db.compiled import CompiledSelect


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


def author_ensure(client: ApiClient, *, author_id: str, now: datetime | None = None) -> AuthorRef:
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


def review_author_lock(review: ContentReview, held: Author | None = None) -> Author:
    """The review's author, locked: `held` when the caller holds its lock already (a finalize
    locks its reviews' authors up front, `authors_lock`, and hands each to its decide path), else
    locked now, after the review's lock (the locking rule above)."""
    return held if held is not None else authors_lock([review.author_id])[review.author_id]
