"""The review queues as moderators see them, who may work each, what routing rules read of a
review, and where a review waits (`review_queue_entry`, the one computation of its entry)
(docs/workplace.md, "Routing rules and queue access"). The rules themselves are pure
(moderation.review_queues.route) and versioned with the policy.

A queue whose row names groups may be seen and taken only by their members (and superusers);
every other queue, built-in or custom, by every moderator (who may: moderation.selectors, one
definition for every page and service). Who may take a queue is checked where a review is leased,
decided or annotated (review_take_next, the moderator's row lock, review_note_add), not only where
a page offers it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction

from moderation.errors import QueueForbidden
from moderation.models import Author, Cause, ContentReview, ModerationPolicy, ModerationQueue, ReviewQueue
from moderation.review_queues import QueueEntry, RouteFacts, queue_entry, routing_conditions_used
from moderation.selectors import queues_forbidden, review_visible_to
from moderation.services.preservation import category_among
from moderation.verdicts import MEDIA_KINDS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueInfo:
    slug: str
    label: str
    description: str
    builtin: bool
    restricted: bool  # only members of its groups may take it


def review_queue_slugs() -> set[str]:
    """Every review queue a routing rule may name: the built-in ones and the custom ones."""
    return {*ReviewQueue.values, *ModerationQueue.objects.values_list("slug", flat=True)}


def review_queues(user=None) -> list[QueueInfo]:
    """The review queues, built-in first (in their order) then custom ones by slug; with `user`,
    only the ones they may take. Two small queries (the queues, their groups)."""
    rows = {q.slug: q for q in ModerationQueue.objects.prefetch_related("groups")}
    forbidden = queues_forbidden(user, rows=rows) if user is not None else set()
    infos = []
    for queue in ReviewQueue:
        row = rows.pop(queue.value, None)
        infos.append(QueueInfo(queue.value, (row.name if row else "") or queue.label,
                               row.description if row else "", True, bool(row and row.groups.all())))
    for row in rows.values():
        infos.append(QueueInfo(row.slug, row.name or row.slug, row.description, False, bool(row.groups.all())))
    return [q for q in infos if q.slug not in forbidden]


def review_queue_label(slug: str) -> str:
    """What moderators call queue `slug` (its slug when it is neither built-in nor a row)."""
    if slug in ReviewQueue.values:
        named = ModerationQueue.objects.filter(slug=slug).exclude(name="").values_list("name", flat=True).first()
        return named or ReviewQueue(slug).label
    return ModerationQueue.objects.filter(slug=slug).values_list("name", flat=True).first() or slug


def review_queue_save(*, queue_id: int | None, slug: str, name: str = "", description: str = "",
                      groups: Iterable[Group] = (), user=None) -> ModerationQueue:
    """Create a review queue (`queue_id` None), or change the name, description and groups of
    queue `queue_id`: validated (the slug's form, a slug no other queue has, the lengths) and
    written in one transaction under the row's lock, with a history row naming `user` and what
    changed (and one for its groups when they change). Raises ValidationError. A queue's slug
    never changes once created: reviews and the policy's routing rules store it."""
    groups = list(groups)
    with transaction.atomic():
        if queue_id is None:
            queue, before = ModerationQueue(slug=slug), None
        else:
            queue = ModerationQueue.objects.select_for_update().get(pk=queue_id)
            if slug != queue.slug:
                raise ValidationError({"slug": "a queue's slug never changes: reviews and routing rules store it"})
            before = (queue.name, queue.description, {g.pk for g in queue.groups.all()})
        queue.name, queue.description = name.strip(), description.strip()
        queue.full_clean(exclude=["groups"])
        after = (queue.name, queue.description, {g.pk for g in groups})
        queue._history_user = user
        queue._change_reason = "created" if before is None else "changed " + (
            ", ".join(what for what, old, new in zip(("name", "description", "groups"), before, after, strict=True)
                      if old != new) or "nothing")
        queue.save()
        queue.groups.set(groups)
    logger.info("review queue %s %s by user %s", queue.slug, "created" if queue_id is None else "changed",
                getattr(user, "pk", None))
    return queue


def queue_check_access(review: ContentReview, *, user) -> None:
    """Refuse (QueueForbidden) a moderator who may not see `review`: it waits, or last waited, in a
    queue only its groups' members may take (moderation.selectors.review_visible_to). Call it with
    the review's row locked: its queue cannot change meanwhile."""
    if user is not None and not review_visible_to(user, review):
        raise QueueForbidden(f"this review is of the {review_queue_label(review.last_queue)} queue, "
                             "which only its groups' members may take")


def review_queue_entry(review: ContentReview, policy: ModerationPolicy, *, cause: str, now: datetime,
                       report_count: float = 0, author: Author | None = None) -> QueueEntry:
    """Where and how urgently `review` waits when `cause` sends it to manual_review at `now`: the one
    computation of a review's entry (moderation.review_queues.queue_entry, fed with what the
    review says of itself: its decision's scores, its notice, its media, its author's points and
    standing, what the routing rules ask). A transition, an undo and the routing dry run all ask
    it here.

    `report_count`: the distinct users who reported it, each by its weight (docs/design.md,
    "Reporters"). `author`: the review's author when the caller holds it (locked by a finalize
    or by its strike, or read with the review); without it, its points and standing are read, in
    one query."""
    if author is not None:
        points, standing = author.strike_points, author.standing
    elif review.author_id is not None:
        points, standing = (Author.objects.filter(pk=review.author_id)
                            .values_list("strike_points", "standing").first() or (0, ""))
    else:
        points, standing = 0, ""
    decision = review.decision
    return queue_entry(
        policy, cause=cause, category_scores=decision.category_scores if decision else {},
        report_count=report_count, now=now, author_restricted=review.author_restricted, author_points=points,
        notice_kind=review.notice_kind,
        # (Its content is read only for a cause that may send media to a human.)
        media=cause in (Cause.PROVIDER_RESULT, Cause.PROVIDER_CALLBACK) and review.content.kind in MEDIA_KINDS,
        facts=route_facts(review, policy=policy, cause=cause, report_count=report_count, standing=standing),
        # (Asked only of a policy with urgent categories: no query otherwise.)
        urgent=decision is not None and bool(category_among(decision, policy.urgent_categories)),
    )


def route_facts(review: ContentReview, *, policy: ModerationPolicy, cause: str, report_count: float = 0,
                standing: str = "") -> RouteFacts:
    """What the policy's routing rules ask of `review` (nothing is read when no rule asks it):
    its language, client name, strongest report, author's standing (`standing`, as the caller
    read it with the author: `review_queue_entry`) and content kind."""
    asked = routing_conditions_used(policy.routing_rules)
    if not asked:
        return RouteFacts()
    content = review.content
    return RouteFacts(
        language=content.language,
        client=review.client.name if "client" in asked else "",
        report_kind=review.notice_kind or ("user" if report_count or cause == Cause.USER_REPORTS else ""),
        author_standing=standing if "author_standing" in asked else "",
        media_kind=content.kind,
    )
