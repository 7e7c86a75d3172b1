"""Preservation snapshots (moderation/services/preservation.py; docs/legal-holds.md): a decision in
a reportable category freezes the evidence in its own transaction; the snapshot is append-only
until it expires, its viewing is logged, and retention removes it after its period unless held."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from audit.models import Actor
from moderation import services, tasks
from moderation.invariants import hold_violations
from moderation.models import Decision, HashBank, HashBankEntry, PreservationSnapshot, ReviewStatus, SnapshotView
from moderation.privacy import retention
from moderation.privacy.erasure import content_erase
from moderation.privacy.holds import hold_place
from moderation.services import preservation
from tests.helpers import SCORE_FOR, claimed, decided, examples, result, staff_browser
from tests.helpers_media import encoded, image_hash, image_header, picture

TEXT = "thanks for the lovely dinner, see you at the party"


@pytest.fixture
def reportable(db):
    """The active policy marks harassment (the scripted results' category) reportable."""
    return services.policy_publish(reject_threshold=0.68, review_threshold=0.33,
                                   reportable_categories=["harassment"], snapshot_retention_days=365)


@pytest.mark.usefixtures("reportable")
@pytest.mark.parametrize("label", [ReviewStatus.REJECTED, ReviewStatus.MANUAL_REVIEW])
def test_a_decision_in_a_reportable_category_freezes_the_evidence_with_a_hash(api_client, label):
    review = decided(api_client, label)
    snapshot = PreservationSnapshot.objects.get(review=review)
    body = snapshot.body
    assert snapshot.decision_id == review.decision_id and snapshot.category == "harassment"
    assert body["content"]["text"] == TEXT and body["client"] == "acme"
    assert body["decision"]["label"] == label and body["decision"]["categories"] == {"harassment": True}
    assert [step["to_status"] for step in body["timeline"]] == ["processing", label]
    assert snapshot.sha256 == preservation.snapshot_digest(body) and len(snapshot.sha256) == 64
    assert (snapshot.expires_at - snapshot.created_at) == timedelta(days=365)
    assert hold_violations([review.pk]) == []


@pytest.mark.usefixtures("reportable")
def test_an_approval_or_a_category_not_reportable_freezes_nothing(api_client):
    approved = decided(api_client, ReviewStatus.APPROVED)
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=["threat"])
    rejected = decided(api_client, ReviewStatus.REJECTED)
    assert not PreservationSnapshot.objects.filter(review__in=[approved, rejected]).exists()
    assert hold_violations([approved.pk, rejected.pk]) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("reportable")
def test_the_snapshot_is_written_in_the_decisions_transaction_or_neither_is(api_client, monkeypatch):
    review, request = claimed(api_client)

    def broken(*args, **kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(PreservationSnapshot.objects, "create", broken)
    with pytest.raises(RuntimeError):
        services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["rejected"]),
                                 cause="provider_result")
    review.refresh_from_db()
    assert review.status == ReviewStatus.PROCESSING and not Decision.objects.filter(review=review).exists()


def test_the_checker_finds_a_reportable_decision_without_its_snapshot(api_client, reportable, monkeypatch):
    monkeypatch.setattr(preservation, "snapshot_after_decision_locked", lambda review, decision: None)
    monkeypatch.setattr("moderation.services.decide.snapshot_after_decision_locked", lambda review, decision: None)
    review = decided(api_client, ReviewStatus.REJECTED)
    assert hold_violations([review.pk]) == [
        f"{review.pk}: decision {review.decision_id} in a reportable category has no snapshot"]


@pytest.mark.usefixtures("reportable")
def test_the_database_refuses_to_change_a_snapshot_or_delete_it_before_it_expires(api_client):
    review = decided(api_client, ReviewStatus.REJECTED)
    for statement in ("UPDATE moderation_preservationsnapshot SET category = 'spam'",
                      "UPDATE moderation_preservationsnapshot SET expires_at = now() - interval '1 day'",
                      "DELETE FROM moderation_preservationsnapshot"):
        with pytest.raises(DatabaseError, match="append-only until it expires"), transaction.atomic(), \
                connection.cursor() as cursor:
            cursor.execute(statement)
    assert PreservationSnapshot.objects.get(review=review).category == "harassment"


@pytest.mark.usefixtures("reportable")
def test_erasure_leaves_the_snapshot_whole(api_client):
    review = decided(api_client, ReviewStatus.REJECTED)
    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops", reason="the user asked")
    snapshot = PreservationSnapshot.objects.get(review=review)
    assert snapshot.body["content"]["text"] == TEXT and snapshot.sha256 == preservation.snapshot_digest(snapshot.body)


def expired_snapshot(review) -> PreservationSnapshot:
    """A snapshot whose period is over (written so: its expiry cannot be moved by an UPDATE)."""
    body = {"content": {"text": "old"}}
    past = timezone.now() - timedelta(days=400)
    return PreservationSnapshot.objects.create(
        review=review, decision=review.decision, category="harassment", body=body,
        sha256=preservation.snapshot_digest(body), created_at=past, expires_at=past + timedelta(days=365))


def test_retention_prunes_a_snapshot_after_its_period_unless_a_hold_keeps_it(api_client):
    kept, gone = decided(api_client, ReviewStatus.REJECTED), decided(api_client, ReviewStatus.REJECTED)
    for review in (kept, gone):
        expired_snapshot(review)
    hold_place(reviews=[kept.pk], reason="request 4", reference="LE-4", placed_by="counsel")
    assert retention.prune_held()["preservation snapshots"] == 1
    assert retention.prune(for_real=True)["preservation snapshots"] == 1
    assert list(PreservationSnapshot.objects.values_list("review_id", flat=True)) == [kept.pk]


@pytest.mark.usefixtures("reportable")
def test_opening_a_snapshot_is_logged_with_who_and_why_and_the_log_is_append_only(api_client):
    review = decided(api_client, ReviewStatus.REJECTED)
    snapshot = PreservationSnapshot.objects.get(review=review)
    with pytest.raises(ValueError, match="say why"):
        preservation.snapshot_view(snapshot_id=snapshot.pk, viewer="counsel", why="  ")
    assert preservation.snapshot_view(snapshot_id=snapshot.pk, viewer="counsel", why="subpoena 12").pk == snapshot.pk
    assert list(SnapshotView.objects.values_list("viewer", "why")) == [("counsel", "subpoena 12")]
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM moderation_snapshotview")


def test_the_policy_names_only_its_own_categories_and_a_period_in_range(db):
    with pytest.raises(ValidationError, match="does not have: nope"):
        services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=["nope"])
    with pytest.raises(ValidationError, match="snapshot_retention_days must be a whole number from 1"):
        services.policy_publish(reject_threshold=0.68, review_threshold=0.33, snapshot_retention_days=0)


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_an_images_bytes_are_kept_in_the_snapshot(api_client, scripted):
    data = encoded(picture(7))
    pdq, _ = image_hash(data)
    entry = HashBankEntry.objects.create(bank=HashBank.objects.create(name="known"), pdq=pdq)
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, reportable_categories=["csam"], hash_banks=[
        {"name": "known", "category": "csam", "action": "reject", "never_display": True, "through": entry.pk}])
    review, _ = services.review_submit(client=api_client, external_id="banked", kind="image",
                                       image=(data, image_header(data)))
    tasks.moderate_review(review.pk)
    media = PreservationSnapshot.objects.get(review=review).body["content"]["media"]
    assert base64.b64decode(media["data_base64"]) == data and media["pdq"] == pdq


@pytest.fixture
def counsel(django_user_model):
    return staff_browser(django_user_model, "counsel", "legal")


WEIRD = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=60)
FEW = settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.usefixtures("reportable")
@FEW
@given(text=WEIRD.filter(str.strip))
@example(text="\u202e<script>alert(1)</script> \U0001f469\u200d\U0001f4bb e\u0301")
def test_any_text_is_kept_exactly_its_hash_survives_storage_and_the_pages_escape_it(api_client, counsel, text):
    review, _ = services.review_submit(client=api_client, external_id=f"w-{PreservationSnapshot.objects.count()}",
                                       kind="text", text=text)
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR["rejected"]),
                             cause="provider_result")
    snapshot = PreservationSnapshot.objects.get(review=review)  # read back from the database
    assert snapshot.body["content"]["text"] == text and snapshot.sha256 == preservation.snapshot_digest(snapshot.body)
    page = counsel.post(reverse("admin:moderation_preservationsnapshot_open", args=[snapshot.pk]), {"why": "case"})
    assert page.status_code == 200 and "<script>alert" not in page.content.decode()


@pytest.mark.usefixtures("reportable", "on_commit_callbacks_run")
def test_the_decision_erasure_makes_to_close_an_appeal_freezes_nothing(api_client, scripted):
    review = decided(api_client, ReviewStatus.REJECTED)
    services.appeal_file(review_id=review.pk, appellant_id="author-1", statement="not what it seems")
    content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops", reason="the user asked")
    assert Decision.objects.filter(review=review).count() == 2  # the rejection, and erasure's closing the appeal
    assert list(PreservationSnapshot.objects.filter(review=review).values_list("decision_id", flat=True)) == [
        review.decision_id]
