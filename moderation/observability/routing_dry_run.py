"""A dry run of draft routing rules: where the reviews waiting now would wait under them, with no
write (docs/workplace.md, "Routing rules and queue access"). Like the term editor's dry run
(moderation/observability/dry_run.py), it reuses what each review stored: the scores of its
decision in force, its language, its author's standing, and the cause of its entry into
manual_review, and decides with the one computation of an entry (`review_queue_entry`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from audit.models import ReviewTransition
from moderation.models import ContentReview, ModerationPolicy, Report, ReportKind, ReviewStatus
from moderation.selectors import reviews_visible_to
from moderation.services.routing import review_queue_entry, review_queues

MAX_REVIEWS = 5000


@dataclass(frozen=True)
class QueueMove:
    slug: str
    label: str
    now: int  # of the reviews read, how many wait in it now
    after: int  # how many would under the draft
    moved_in: int
    moved_out: int


@dataclass(frozen=True)
class RoutingDryRun:
    reviews: int  # how many waiting reviews were read (the most recently queued first)
    moved: int
    queues: list[QueueMove]
    moves: list[tuple[str, str, int]]  # (from label, to label, reviews), most first


def routing_dry_run(*, draft: ModerationPolicy, last: int, viewer=None) -> RoutingDryRun:
    """Where the `last` most recently queued reviews waiting for a human (of those `viewer` may
    see; every one when None) would wait under `draft`'s routing rules, against where they wait
    now. Three queries, whatever the rules."""
    entered = (ReviewTransition.objects.filter(review=OuterRef("pk"), to_status=ReviewStatus.MANUAL_REVIEW)
               .order_by("-id").values("cause")[:1])
    reviews = list(
        reviews_visible_to(viewer, ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW,
                                                                content__erased_at__isnull=True))
        .select_related("content", "client", "decision", "author").defer("content__text", "content__metadata")
        .annotate(entry_cause=Subquery(entered),
                  user_reported=Exists(Report.objects.filter(review=OuterRef("pk"), kind=ReportKind.USER)))
        .order_by("-queued_at", "-id")[: max(0, min(last, MAX_REVIEWS))]
    )
    now, moves = timezone.now(), Counter()
    for review in reviews:
        # (Its author read with it; a user report counted once: only the queue is compared.)
        entry = review_queue_entry(review, draft, cause=review.entry_cause or "", now=now, author=review.author,
                                   report_count=1 if review.user_reported else 0)
        moves[(review.queue, entry.queue)] += 1
    labels = {q.slug: q.label for q in review_queues()}
    slugs = [*labels, *sorted({s for pair in moves for s in pair} - set(labels))]
    queues = [QueueMove(slug, labels.get(slug, slug),
                        now=sum(n for (a, _), n in moves.items() if a == slug),
                        after=sum(n for (_, b), n in moves.items() if b == slug),
                        moved_in=sum(n for (a, b), n in moves.items() if b == slug and a != slug),
                        moved_out=sum(n for (a, b), n in moves.items() if a == slug and b != slug))
              for slug in slugs]
    changed = sorted(((labels.get(a, a), labels.get(b, b), n) for (a, b), n in moves.items() if a != b),
                     key=lambda move: (-move[2], move[0], move[1]))
    return RoutingDryRun(reviews=len(reviews), moved=sum(n for *_, n in changed), queues=queues, moves=changed)
