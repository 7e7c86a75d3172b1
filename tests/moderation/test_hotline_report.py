"""`manage.py hotline_report` (moderation/privacy/hotline.py; docs/legal-holds.md): a package from the
review's snapshot with the hashes a hotline matches, a one-year hold, written where the operator
says, and nothing sent over the network."""

from __future__ import annotations

import hashlib
import json
import socket
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from moderation import services, tasks
from moderation.models import HashBank, HashBankEntry, LegalHold, ReviewStatus, SnapshotView
from moderation.privacy.holds import review_holds
from tests.helpers import decided
from tests.helpers_media import encoded, image_hash, image_header, picture


@pytest.fixture
def no_network(monkeypatch):
    """Every attempt to open a connection from Python is recorded and refused."""
    tried = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise OSError("the test allows no connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return tried


@pytest.fixture
def banked_image(api_client, scripted, on_commit_callbacks_run):
    data = encoded(picture(11))
    pdq, _ = image_hash(data)
    entry = HashBankEntry.objects.create(bank=HashBank.objects.create(name="known"), pdq=pdq)
    services.policy_publish(reject_threshold=0.9, review_threshold=0.5, reportable_categories=["csam"], hash_banks=[
        {"name": "known", "category": "csam", "action": "reject", "never_display": True, "through": entry.pk}])
    review, _ = services.review_submit(client=api_client, external_id="banked", kind="image",
                                       image=(data, image_header(data)), author_id="uploader-7")
    tasks.moderate_review(review.pk)
    review.refresh_from_db()
    assert review.status == ReviewStatus.REJECTED
    return review, data, pdq


def test_the_package_has_the_hashes_uploader_and_times_and_places_a_one_year_hold(banked_image, tmp_path, no_network,
                                                                                  settings):
    settings.PLATFORM_CONTACT_EMAIL = "trust@example.org"
    review, data, pdq = banked_image
    out = tmp_path / "report.json"
    err = StringIO()
    call_command("hotline_report", "--review", str(review.pk), "--format", "json", "--out", str(out),
                 "--reference", "CT-2026-1", "--by", "officer", stderr=err)
    package = json.loads(out.read_text())
    assert package["content"]["files"] == [{
        "mime": "image/png", "byte_size": len(data), "md5": hashlib.md5(data).hexdigest(),
        "sha1": hashlib.sha1(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest(), "pdq": pdq}]
    assert package["uploader"] == {"client": "acme", "author_id": "uploader-7"}
    assert package["incident"]["category"] == "csam" and package["incident"]["received_at"]
    assert package["reporter"]["contact"] == "trust@example.org" and package["to_add_by_hand"]
    assert package["platform_notes"]["decision"] == "rejected" and package["platform_notes"]["timeline"]
    hold = LegalHold.objects.get(pk=package["legal_hold"]["id"])
    assert review_holds(review.pk) == [hold.pk] and hold.reference == "CT-2026-1" and hold.placed_by == "officer"
    assert abs(hold.expires_at - (timezone.now() + timedelta(days=365))) < timedelta(minutes=1)
    assert SnapshotView.objects.get().why == "hotline report CT-2026-1"
    assert "nothing was sent" in err.getvalue() and no_network == []


def test_without_out_it_prints_the_package_and_a_text_has_no_files(api_client, no_network):
    services.policy_publish(reject_threshold=0.68, review_threshold=0.33, reportable_categories=["harassment"])
    review = decided(api_client, ReviewStatus.REJECTED)
    out = StringIO()
    call_command("hotline_report", "--review", str(review.content_id), stdout=out, stderr=StringIO())
    package = json.loads(out.getvalue())
    assert package["content"]["files"] == [] and package["content"]["text"] == "thanks for the lovely dinner, see you at the party"
    assert package["uploader"] is None and no_network == []


def test_a_review_without_snapshot_or_an_existing_file_is_refused_with_nothing_held(api_client, tmp_path, banked_image):
    plain = decided(api_client, ReviewStatus.REJECTED)  # harassment is not reportable here
    with pytest.raises(CommandError, match="has no preservation snapshot"):
        call_command("hotline_report", "--review", str(plain.pk))
    taken = tmp_path / "taken.json"
    taken.write_text("another report")
    with pytest.raises(CommandError, match="exists already"):
        call_command("hotline_report", "--review", str(banked_image[0].pk), "--out", str(taken))
    with pytest.raises(CommandError, match="is a UUID"):
        call_command("hotline_report", "--review", "42")
    assert taken.read_text() == "another report"
    assert not LegalHold.objects.exists() and not SnapshotView.objects.exists()
