"""Several writes in one statement (moderation/services/_one_statement.py): Django's own INSERTs
and UPDATEs chained, committed or refused together."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from audit.models import EventKind, PipelineEvent
from moderation.models import Content, ContentReview, ModerationRequest, RequestStatus
from moderation.services._one_statement import OneStatement
from tests.helpers import claimed

pytestmark = pytest.mark.django_db(transaction=True)


def test_rows_written_together_get_their_keys_and_may_refer_to_each_other(api_client):
    _, request = claimed(api_client)
    content = Content(client=api_client, external_id="together", kind="text", text="hello")
    review = ContentReview(content=content, client=api_client)
    event = PipelineEvent(kind=EventKind.JOB_ENQUEUED, review=review, detail={"task": "t"})
    writes = OneStatement()
    writes.insert(content)
    writes.insert(review)
    writes.insert(event)
    writes.update(ModerationRequest.objects.filter(pk=request.pk), status=RequestStatus.FAILED)
    ran = []
    writes.on_executed(lambda: ran.append(event.pk))

    writes.execute()

    assert ran == [event.pk] and event.pk is not None  # keys are known when the callbacks run
    assert ContentReview.objects.get(pk=review.pk).content_id == content.pk
    assert PipelineEvent.objects.get(pk=event.pk).review_id == review.pk
    assert ModerationRequest.objects.get(pk=request.pk).status == RequestStatus.FAILED
    assert review.created_at is not None and review.status == "pending"  # prepared as save() would


def test_a_key_taken_inside_the_statement_becomes_the_rows_key(api_client):
    content = Content(client=api_client, external_id="keyed", kind="text", text="hello")
    review = ContentReview(content=content, client=api_client)
    event = PipelineEvent(kind=EventKind.JOB_ENQUEUED, detail={})
    writes = OneStatement()
    writes.insert(content)
    writes.insert(review)
    event.review_id = writes.key_of(review)
    writes.insert(event)

    writes.execute()

    assert event.review_id == review.pk
    assert PipelineEvent.objects.get(pk=event.pk).review_id == review.pk


def test_one_refused_write_leaves_none_of_the_others_and_skips_the_callbacks(api_client):
    Content.objects.create(client=api_client, external_id="taken", kind="text", text="first")
    fresh = Content(client=api_client, external_id="fresh", kind="text", text="second")
    clash = Content(client=api_client, external_id="taken", kind="text", text="again")
    writes = OneStatement()
    writes.insert(fresh)
    writes.insert(clash)
    ran = []
    writes.on_executed(lambda: ran.append(True))

    with pytest.raises(IntegrityError), transaction.atomic():
        writes.execute()

    assert not Content.objects.filter(external_id="fresh").exists()
    assert ran == []
