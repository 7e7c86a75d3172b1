"""Legal holds (moderation/privacy/holds.py; docs/legal-holds.md): what a hold names is kept
intact; erasure, pruning and retention skip it, count it, and the erasure runs once the hold ends."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from audit.models import Actor, EventKind, PipelineEvent
from moderation import services, tasks
from moderation.models import (
    Content,
    ContentErasure,
    DeferredErasure,
    HoldAction,
    LegalHold,
    LegalHoldEvent,
    ReviewStatus,
)
from moderation.invariants import hold_violations
from moderation.privacy import erasure, retention
from moderation.privacy.erasure import author_content_erase, content_erase, erasures_deferred_run
from moderation.privacy.holds import hold_extend, hold_lift, hold_place, review_holds
from moderation.services.transitions import record_event
from tests.helpers import collide, queued_tasks
from tests.moderation.test_retention import an_image_review, media_of

TEXT = "Evidence-Quillfeather says the meeting is at the old mill"


def a_review(client, *, author: str | None = None, text: str = TEXT, external_id: str | None = None):
    review, _ = services.review_submit(client=client, external_id=external_id or f"x-{time.monotonic_ns()}",
                                       kind="text", text=text, author_id=author)
    return review


def held(review_ids, **fields) -> LegalHold:
    return hold_place(reviews=review_ids, reason="preserve for case 17", reference="CASE-17", placed_by="counsel",
                      **fields)


def text_of(review) -> str:
    return Content.objects.get(pk=review.content_id).text


def erase(review, reason="the user asked"):
    return content_erase(review_id=review.pk, actor=Actor.COMMAND, actor_id="ops", reason=reason)


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_erasing_held_content_is_deferred_and_runs_once_the_hold_is_lifted(api_client):
    review, other = a_review(api_client), a_review(api_client)
    hold = held([review.pk])

    report = erase(review)
    assert report.deferred and report.held_by == [hold.pk] and report.erased_at is None
    assert text_of(review) == TEXT and not ContentErasure.objects.filter(review=review).exists()
    assert DeferredErasure.objects.filter(review=review, done_at__isnull=True).count() == 1
    assert erase(review).deferred  # asked again: still one request deferred
    assert DeferredErasure.objects.filter(review=review).count() == 1
    assert not erase(other).deferred and text_of(other) == ""  # what no hold names is erased at once
    assert erasures_deferred_run() == (0, 1)  # still held: nothing runs

    hold_lift(hold_id=hold.pk, by="counsel", reason="case closed")
    assert [t["func"] for t in queued_tasks("moderation.tasks.erasures_deferred_run")]  # enqueued on commit
    assert tasks.erasures_deferred_run() == "1 deferred erasures run, 0 still held"

    assert text_of(review) == "" and ContentErasure.objects.get(review=review).reason == "the user asked"
    assert DeferredErasure.objects.get(review=review).done_at is not None
    assert erasures_deferred_run() == (0, 0)  # run twice: nothing more to do


def test_the_command_says_which_contents_were_held_and_a_dry_run_records_nothing(api_client):
    review = a_review(api_client)
    held([review.pk])
    out = StringIO()
    call_command("erase_content", str(review.pk), "--reason", "asked", stdout=out)
    assert "held by legal hold" in out.getvalue() and "would be deferred" in out.getvalue()
    assert not DeferredErasure.objects.exists()
    call_command("erase_content", str(review.pk), "--reason", "asked", "--for-real", stdout=out)
    assert "erasure deferred until the hold ends" in out.getvalue()
    assert DeferredErasure.objects.filter(review=review).exists() and text_of(review) == TEXT


def test_an_author_hold_keeps_all_its_content_and_its_record_and_a_query_hold_only_its_date_range(api_client):
    early, late = a_review(api_client, author="ann"), a_review(api_client, author="ann")
    stranger = a_review(api_client, author="bob")
    Content.objects.filter(pk=early.content_id).update(created_at=timezone.now() - timedelta(days=40))
    ann = early.author
    query = hold_place(author=ann, created_before=timezone.now() - timedelta(days=30), reason="request 9",
                       reference="LE-9", placed_by="counsel")
    assert review_holds(early.pk) == [query.pk] and review_holds(late.pk) == [] and review_holds(stranger.pk) == []

    report = author_content_erase(author_pk=ann.pk, actor=Actor.COMMAND, actor_id="ops", reason="gdpr")
    assert (report.erased, report.held, report.record_held) == (1, 1, False)
    assert text_of(early) == TEXT and text_of(late) == ""

    whole = hold_place(author=ann, reason="everything of ann", reference="LE-10", placed_by="counsel")
    fresh = a_review(api_client, author="ann")  # content that arrives later is held too
    report = author_content_erase(author_pk=ann.pk, actor=Actor.COMMAND, actor_id="ops", reason="gdpr")
    assert (report.erased, report.held, report.record_held, report.redacted) == (0, 2, True, {})
    assert review_holds(fresh.pk) == [whole.pk] and text_of(fresh) == TEXT


def test_placing_extending_and_lifting_are_audited_and_the_log_is_append_only(api_client):
    review = a_review(api_client)
    soon = timezone.now() + timedelta(days=3)
    hold = held([review.pk], expires_at=soon)
    hold_extend(hold_id=hold.pk, expires_at=soon + timedelta(days=30), by="counsel", note="the court extended it")
    hold_lift(hold_id=hold.pk, by="counsel-2", reason="released by the court")
    events = list(LegalHoldEvent.objects.filter(hold=hold).values_list("action", "actor_id", "note"))
    assert events == [(HoldAction.PLACED, "counsel", "preserve for case 17"),
                      (HoldAction.EXTENDED, "counsel", "the court extended it"),
                      (HoldAction.LIFTED, "counsel-2", "released by the court")]
    hold.refresh_from_db()
    assert hold.lifted_by == "counsel-2" and not hold.active_at(timezone.now())
    for statement in ("UPDATE moderation_legalholdevent SET note = 'rewritten'", "DELETE FROM moderation_legalholdevent"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
    with pytest.raises(ValidationError, match="has ended"):
        hold_lift(hold_id=hold.pk, by="counsel", reason="again")


@pytest.mark.parametrize("fields, error", [
    ({"reviews": []}, "names reviews, or an author"),
    ({"reason": "  "}, "reason"),
    ({"reference": ""}, "reference"),
    ({"expires_at": timezone.now() - timedelta(days=1)}, "in the future"),
])
def test_a_bad_hold_is_refused_with_nothing_written(api_client, fields, error):
    review = a_review(api_client)
    arguments = {"reviews": [review.pk], "reason": "why", "reference": "REF", "placed_by": "counsel", **fields}
    with pytest.raises(ValidationError, match=error):
        hold_place(**arguments)
    assert not LegalHold.objects.exists() and not LegalHoldEvent.objects.exists()


def test_an_extension_must_end_later_and_when_a_hold_expires_the_daily_prune_runs_its_deferred_erasure(api_client):
    review = a_review(api_client)
    hold = held([review.pk], expires_at=timezone.now() + timedelta(days=5))
    with pytest.raises(ValidationError, match="later"):
        hold_extend(hold_id=hold.pk, expires_at=timezone.now() + timedelta(days=1), by="counsel")
    assert erase(review).deferred
    assert tasks.prune().endswith("0 deferred erasures run, 1 still held") and text_of(review) == TEXT
    LegalHold.objects.filter(pk=hold.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # time passes
    assert review_holds(review.pk) == []
    assert tasks.prune().endswith("1 deferred erasures run, 0 still held") and text_of(review) == ""


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_pruning_skips_the_pipeline_events_of_a_held_review_counts_them_and_deletes_them_once_released(
        api_client, capsys):
    kept, free = a_review(api_client), a_review(api_client)
    for review in (kept, free):
        record_event(EventKind.JOB_ENQUEUED, review_id=review.pk, detail={"task": "t"})
    PipelineEvent.objects.update(created_at=timezone.now() - timedelta(days=settings.PIPELINE_EVENT_RETENTION_DAYS + 1))
    hold = held([kept.pk])
    call_command("prune", "--for-real")
    out = capsys.readouterr().out
    assert "pipeline events (older than PIPELINE_EVENT_RETENTION_DAYS=" in out
    assert f"; {PipelineEvent.objects.filter(review=kept).count()} held by a legal hold, kept" in out
    assert PipelineEvent.objects.filter(review=kept).exists() and not PipelineEvent.objects.filter(review=free).exists()

    hold_lift(hold_id=hold.pk, by="counsel", reason="done")
    assert retention.prune_held()["pipeline events"] == 0
    retention.prune(for_real=True)
    assert not PipelineEvent.objects.filter(review=kept).exists()


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_retention_keeps_a_held_images_bytes_and_removes_them_once_the_hold_ends(api_client, scripted):
    old = settings.MEDIA_RETENTION_DAYS + 1
    review = an_image_review(api_client, "held-image", label=ReviewStatus.APPROVED, days_ago=old)
    hold = held([review.pk])
    assert retention.prune(for_real=True)["images' bytes"] == 0
    assert retention.prune_held()["images' bytes"] == 1 and media_of(review).data is not None
    hold_lift(hold_id=hold.pk, by="counsel", reason="done")
    assert retention.prune(for_real=True)["images' bytes"] == 1 and media_of(review).data is None


def hold_during_erasure(api_client, monkeypatch, scope: str):
    """An erasure checks for holds (finding none), then takes its time redacting; a hold on the
    review (`scope` "reviews") or on its author arrives in that time. (review, whether the content
    was erased when the hold committed, whether it is erased now.)"""
    review = a_review(api_client, author="carol")
    checked = threading.Event()
    redact = erasure._redact

    def slow_redact(*args, **kwargs):  # the erasure has checked for holds and found none
        checked.set()
        time.sleep(0.5)
        return redact(*args, **kwargs)

    monkeypatch.setattr(erasure, "_redact", slow_redact)

    def act(i: int):
        if i == 0:
            return erase(review).deferred
        assert checked.wait(10)
        if scope == "author":
            hold_place(author=review.author, reason="everything of carol", reference="LE-3", placed_by="counsel")
        else:
            held([review.pk])
        return Content.objects.get(pk=review.content_id).erased_at is not None  # when the hold committed

    deferred, erased_when_held = collide(2, act)
    assert not deferred
    return review, erased_when_held, Content.objects.get(pk=review.content_id).erased_at is not None


@pytest.mark.parametrize("scope", ["author", "reviews"])
@pytest.mark.django_db(transaction=True)
def test_a_hold_placed_while_an_erasure_runs_keeps_the_whole_content_or_comes_after_it(api_client, monkeypatch, scope):
    """Placing a hold takes the row lock the erasure holds, so it waits for the erasure to commit:
    it then holds erased content (never half of it). (A hold naming the review also waits on the
    key-share lock of its link row's foreign key; an author's hold has only the row locks.)"""
    review, erased_when_held, erased_now = hold_during_erasure(api_client, monkeypatch, scope)
    # The hold committed either after the erasure (it found the content erased), or before it and
    # then nothing was erased.
    assert erased_when_held or not erased_now, "a hold committed on intact content, then the content was erased"
    assert erased_when_held and erased_now
    assert hold_violations([review.pk]) == []


@pytest.mark.django_db(transaction=True)
def test_without_the_holds_row_locks_the_checker_reports_held_content_erased(api_client, monkeypatch):
    from moderation.privacy import holds

    monkeypatch.setattr(holds, "_lock_held", lambda review_ids, **scope: list(review_ids))  # no lock taken
    review, erased_when_held, erased_now = hold_during_erasure(api_client, monkeypatch, "author")
    assert (erased_when_held, erased_now) == (False, True)
    hold = LegalHold.objects.get()
    assert hold_violations([review.pk]) == [f"{review.pk}: erased while legal hold {hold.pk} kept it"]


def test_the_api_says_an_erasure_is_deferred_and_an_authors_held_contents_are_not_remaining(api_client):
    from rest_framework.test import APIClient

    review = a_review(api_client, author="dee")
    other = a_review(api_client, author="dee")
    held([review.pk])
    http = APIClient()
    http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
    answer = http.delete(f"/api/v1/reviews/{review.pk}/content").json()
    assert (answer["deferred"], answer["erased_at"]) == (True, None) and text_of(review) == TEXT
    answer = http.delete("/api/v1/authors/dee/content").json()
    assert (answer["erased"], answer["held"], answer["remaining"]) == (1, 1, 0) and text_of(other) == ""
    assert DeferredErasure.objects.filter(review=review, done_at__isnull=True).count() == 1
