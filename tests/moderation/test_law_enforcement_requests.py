"""The register of law-enforcement requests (moderation/privacy/requests.py; docs/legal-holds.md):
a request places its hold; a hand-over records a manifest of hashes, append-only, of only what the
request named."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from audit.models import Actor
from moderation import services
from moderation.models import Handover, LawEnforcementRequest, LegalHold, ReviewStatus
from moderation.privacy.erasure import content_erase
from moderation.privacy.holds import review_holds
from moderation.privacy.requests import request_handover, request_register
from moderation.services.preservation import snapshot_digest
from tests.helpers import FRIENDLY, decided, submit


def registered(reviews, **fields) -> LawEnforcementRequest:
    return request_register(agency="Metropolitan Police", reference="MP-2026-118", asked="all posts of the thread",
                            received_at=timezone.now() - timedelta(hours=2), registered_by="counsel", reviews=reviews,
                            **fields)


def test_a_request_places_its_hold_and_erasure_waits_for_it(api_client):
    review = submit(api_client, text="the words asked for")
    request = registered([review.pk])
    assert review_holds(review.pk) == [request.hold_id]
    assert request.hold.reference == "Metropolitan Police MP-2026-118"
    assert content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops", reason="asked").deferred


def test_a_handover_records_a_manifest_of_hashes_that_is_append_only(api_client):
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=["harassment"])
    review = decided(api_client, ReviewStatus.REJECTED)
    request = registered([review.pk])
    handover = request_handover(request_id=request.pk, review_ids=[review.pk], handed_by="counsel")
    item, = handover.manifest["items"]
    assert item["text_sha256"] == hashlib.sha256(FRIENDLY.encode()).hexdigest()
    assert item["snapshot"]["sha256"] == review.snapshots.get().sha256 and not item["erased"]
    assert handover.sha256 == snapshot_digest(handover.manifest) and handover.manifest["reference"] == "MP-2026-118"
    assert list(request.handovers.all()) == [handover]
    for statement in ("UPDATE moderation_handover SET handed_by = 'x'", "DELETE FROM moderation_handover"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)


def test_nothing_the_request_did_not_name_is_handed_over_and_a_bad_request_writes_nothing(api_client):
    named, other = submit(api_client), submit(api_client)
    request = registered([named.pk])
    with pytest.raises(ValidationError, match="not named by request MP-2026-118"):
        request_handover(request_id=request.pk, review_ids=[named.pk, other.pk], handed_by="counsel")
    assert not Handover.objects.exists()
    with pytest.raises(ValidationError, match="agency"):
        request_register(agency=" ", reference="x", asked="y", received_at=timezone.now(), registered_by="c",
                         reviews=[other.pk])
    with pytest.raises(ValidationError, match="received before"):
        request_register(
            agency="a", reference="b", asked="c", received_at=timezone.now() + timedelta(days=1), registered_by="c",
            reviews=[other.pk])
    assert LawEnforcementRequest.objects.count() == 1 and LegalHold.objects.count() == 1
