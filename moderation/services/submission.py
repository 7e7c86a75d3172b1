"""Accepting content from client applications."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit import context
from moderation.models import ApiClient, Content, ContentReview
from moderation.queue import enqueue_on_commit


def review_submit(
    *,
    client: ApiClient,
    external_id: str,
    kind: str,
    text: str = "",
    media_url: str = "",
    metadata: dict | None = None,
) -> tuple[ContentReview, bool]:
    """Create the content and its pending review, or return the existing one. (review, created)

    The unique (client, external_id) constraint decides between concurrent submissions: the
    losers' INSERT waits for the winner's commit, fails, and they read the winner's review.
    Input is validated by the caller (the API serializer).
    """
    existing = _existing(client, external_id)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            content = Content.objects.create(
                client=client,
                external_id=external_id,
                kind=kind,
                text=text,
                media_url=media_url,
                metadata=metadata or {},
            )
            review = ContentReview.objects.create(content=content, client=client, last_enqueued_at=timezone.now())
            with context.bind(review_id=review.pk, content_id=content.pk):
                enqueue_on_commit("moderation.tasks.moderate_review", for_review=review.pk, review_id=review.pk)
    except IntegrityError:
        existing = _existing(client, external_id)
        if existing is None:  # the conflict was something else: do not hide it
            raise
        return existing, False
    return review, True


def _existing(client: ApiClient, external_id: str) -> ContentReview | None:
    return (
        ContentReview.objects.select_related("content", "decision__policy")
        .filter(client=client, content__external_id=external_id)
        .first()
    )
