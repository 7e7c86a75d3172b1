"""Accepting content from client applications."""

from __future__ import annotations

import hashlib

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit import context
from moderation.media.images import ImageHeader
from moderation.models import ApiClient, Content, ContentReview, MediaSource, ReviewMedia
from moderation.jobs import enqueue_on_commit
from moderation.services.authors import author_ensure
from moderation.services.transitions import review_history_row
from moderation.db.one_statement import OneStatement


def review_submit(
    *,
    client: ApiClient,
    external_id: str,
    kind: str,
    text: str = "",
    media_url: str = "",
    metadata: dict | None = None,
    author_id: str | None = None,
    image: tuple[bytes, ImageHeader] | None = None,
) -> tuple[ContentReview, bool]:
    """Create the content and its pending review, or return the existing one. (review, created)

    The unique (client, external_id) constraint decides between concurrent submissions: the
    losers' INSERT waits for the winner's commit, fails, and they read the winner's review.
    Inside a caller's transaction (an idempotent replay's) the inserts run in a savepoint, so
    that a lost race leaves the caller's transaction usable.
    Input is validated by the caller (the API serializer).

    `author_id`: who wrote it (docs/design.md, "Authors"): the author is created on its first
    submission, and content submitted while it is suspended or banned is marked restricted.

    The insert is tried first: a new submission (the common case) then costs no lookup, and a
    repeated one is told by the same constraint, then read.
    """
    content = Content(
        client=client, external_id=external_id, kind=kind, text=text, media_url=media_url, metadata=metadata or {},
    )
    review = ContentReview(content=content, client=client, last_enqueued_at=timezone.now())
    if author_id:
        author = author_ensure(client, author_id=author_id)
        review.author_id, review.author_restricted = author.pk, author.restricted
    # The content, its review, the review's first history row, its job_enqueued event and, with
    # the ORM broker, its job (moderation/jobs.py): one statement, so one round trip and no
    # transaction to open (a statement is atomic). With Redis the job is pushed once it has run.
    writes = OneStatement()
    writes.insert(content)
    if image is not None:
        data, header = image
        writes.insert(ReviewMedia(content=content, source=MediaSource.UPLOAD, data=data, byte_size=len(data),
                                  mime=header.mime, width=header.width, height=header.height,
                                  sha256=hashlib.sha256(data).hexdigest()))
    writes.insert(review)
    history = review_history_row(review, created=True)
    if history is not None:
        writes.insert(history)
    with context.bind(review_id=review.pk, content_id=content.pk):
        enqueue_on_commit("moderation.tasks.moderate_review", for_review=review.pk, writes=writes, review_id=review.pk)
    try:
        if transaction.get_connection().in_atomic_block:
            with transaction.atomic():  # a savepoint: a lost race must not break the caller's transaction
                writes.execute()
        else:
            writes.execute()
    except IntegrityError:
        existing = _existing(client, external_id)
        if existing is None:  # the conflict was something else: do not hide it
            raise
        return existing, False
    return review, True


def _existing(client: ApiClient, external_id: str) -> ContentReview | None:
    return (
        ContentReview.objects.select_related("content", "decision__policy", "author")
        .filter(client=client, content__external_id=external_id)
        .first()
    )
