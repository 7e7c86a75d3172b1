"""A bank published while a batch of images is in flight (docs/design.md, invariant 20): each
decision names the policy version its banks were matched under, pinned on its operation before
any provider is called, never the version published meanwhile.

Real PostgreSQL and threads: two workers each claim a batch of images and read them (hash, match,
pin); only once every image has been read does a third thread publish a version whose bank
matches them all; then the workers finalize. Without the pin (finalize reading the newest
version), the decisions would name the new version without its matches: the checker says so.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from moderation import services, tasks
from moderation.media.invariants import media_violations
from moderation.models import ContentReview, ModerationRequest, ReviewStatus
from moderation.transparency.reasons import statement_of_reasons
from moderation.services import dispatch
from tests.helpers_media import bank_publish, encoded, image_hash, image_header, picture

IMAGES = 8


@pytest.fixture(autouse=True)
def local_provider(settings):
    """The local model, which judges no images: the banks and image_fallback decide."""
    settings.MODERATION_PROVIDER = "local"



@pytest.mark.django_db(transaction=True)
def test_a_bank_published_mid_batch_never_decides_images_read_under_the_version_before(api_client, settings,
                                                                                       monkeypatch):
    settings.MODERATION_BATCH_SIZE = IMAGES // 2
    images = [encoded(picture(100 + n)) for n in range(IMAGES)]
    before = services.policy_active()
    reviews = [services.review_submit(client=api_client, external_id=f"img-{n}", kind="image",
                                      image=(data, image_header(data)))[0] for n, data in enumerate(images)]

    # Each worker's first image is read (hashed, matched, pinned) under the version before; its
    # finalize then waits until the other worker has read too and the new version is published.
    all_read, published = threading.Barrier(3), threading.Event()
    read_under: dict = {}
    real_read, real_apply = dispatch.media_read, dispatch.result_apply
    waited = threading.local()

    def media_read(**kwargs):
        read = real_read(**kwargs)
        read_under[kwargs["request"].review_id] = read.policy.version
        return read

    def result_apply(*args, **kwargs):
        if not getattr(waited, "done", False):
            waited.done = True
            all_read.wait(timeout=30)
            assert published.wait(timeout=30)
        return real_apply(*args, **kwargs)

    monkeypatch.setattr(dispatch, "media_read", media_read)
    monkeypatch.setattr(dispatch, "result_apply", result_apply)
    errors = []

    def run(review_id):
        try:
            tasks.moderate_review(review_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    def publish():
        try:
            all_read.wait(timeout=30)
            bank_publish("known-bad", [image_hash(data)[0] for data in images])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            published.set()
            connection.close()

    threads = [threading.Thread(target=run, args=(reviews[0].pk,)),
               threading.Thread(target=run, args=(reviews[IMAGES // 2].pk,)), threading.Thread(target=publish)]
    # The first worker's claim commits before the second starts: each then holds a batch of its
    # own (started together, the second could claim the first's review and leave it nothing).
    threads[0].start()
    deadline = time.monotonic() + 30
    while ContentReview.objects.filter(status=ReviewStatus.PROCESSING).count() < IMAGES // 2:
        assert time.monotonic() < deadline, "the first worker never claimed its batch"
        time.sleep(0.02)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors

    after = services.policy_active()
    assert after.version == before.version + 1
    decided = {r.pk: r for r in ContentReview.objects.select_related("decision__policy").filter(pk__in=[r.pk for r in reviews])}
    assert len(read_under) == IMAGES and all(r.decision is not None for r in decided.values())
    # Both versions decided some images: the publish landed while the batches were in flight.
    assert sorted(set(read_under.values())) == [before.version, after.version]
    for review_id, version in read_under.items():
        review = decided[review_id]
        request = ModerationRequest.objects.get(pk=review.decision.request_id)
        assert review.decision.policy.version == version == request.policy.version
        assert statement_of_reasons(review.decision)["policy_version"] == version
        # Under the version before, no bank: the fallback; under the new one, its bank rejects.
        assert review.status == (ReviewStatus.MANUAL_REVIEW if version == before.version else ReviewStatus.REJECTED)
    assert media_violations(list(decided)) == []

