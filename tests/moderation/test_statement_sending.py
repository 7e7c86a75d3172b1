"""Sending statements of reasons to the DSA Transparency Database (docs/transparency.md, "Sending"),
against the fake database of lab/transparency_db.py, which validates as the real one does: batches
of at most 100, a 422 isolating what it names, a duplicate puid counted as stored, backoff
through outages, and never one statement sent by two senders at once."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import lab.transparency_db as fake_module
from lab.transparency_db import FakeTransparencyDatabase
from moderation import services
from moderation.models import StatementStatus, TransparencyStatement
from moderation.services.statement_sending import statements_submit
from tests.helpers import decided

TOKEN = "fake-token"


@pytest.fixture
def tdb(settings):
    with FakeTransparencyDatabase(tokens={TOKEN: "Acme"}) as fake:
        settings.DSA_TDB_URL, settings.DSA_TDB_TOKEN = fake.url, TOKEN
        settings.DSA_TDB_TIMEOUT_S, settings.DSA_TDB_BACKOFF_S = 3.0, 30.0
        yield fake


class Clock:
    """One time for the sender (`now`) and the fake database (its outages): minutes pass at once."""

    def __init__(self) -> None:
        self.at = timezone.now()
        self.offset = 0.0

    def __call__(self):
        return self.at + timedelta(seconds=self.offset)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def rejections(client, count: int) -> list[TransparencyStatement]:
    for _ in range(count):
        decided(client, "rejected")
    return list(TransparencyStatement.objects.order_by("id"))


def statuses() -> dict[str, int]:
    found: dict[str, int] = {}
    for status in TransparencyStatement.objects.values_list("status", flat=True):
        found[status] = found.get(status, 0) + 1
    return found


@pytest.mark.django_db
def test_pending_statements_go_in_batches_of_at_most_100_each_once_and_the_command_says_so(api_client, tdb):
    written = rejections(api_client, 130)
    out = StringIO()

    call_command("submit_statements", stdout=out)

    assert out.getvalue().strip() == "submitted 130, rejected 0, pending 0"
    assert [len(r.puids) for r in tdb.requests] == [100, 30]
    assert tdb.stored_puids() == {s.puid for s in written} and tdb.sent_more_than_once() == {}
    stored = {s["puid"]: s["uuid"] for s in tdb.statements()}
    assert all(s.tdb_uuid == stored[s.puid] for s in TransparencyStatement.objects.all())


@pytest.mark.django_db
def test_an_outage_of_five_minutes_loses_nothing(api_client, tdb, monkeypatch):
    written = rejections(api_client, 12)
    clock = Clock()
    monkeypatch.setattr(fake_module, "time", clock)
    tdb.outage(300)
    runs = []
    while clock.offset <= 600:  # the schedule, every minute, for ten minutes
        runs.append(statements_submit(now=clock))
        clock.advance(60)

    assert runs[0].error.startswith("HTTP 503") and runs[0].pending == 12
    assert sum(run.submitted for run in runs) == 12 and runs[-1].pending == 0
    assert tdb.stored_puids() == {s.puid for s in written}
    # Backoff: a minute's schedule did not send every minute while the database was down.
    assert sum(1 for run in runs if run.batches) < sum(1 for run in runs if clock.offset)
    assert statuses() == {StatementStatus.SUBMITTED: 12}


@pytest.mark.django_db
def test_one_refused_statement_does_not_hold_back_99_others(api_client, tdb):
    written = rejections(api_client, 100)
    bad = written[41]
    TransparencyStatement.objects.filter(pk=bad.pk).update(body={**bad.body, "content_language": "XX"})

    sent = statements_submit()

    assert (sent.submitted, sent.rejected, sent.pending) == (99, 1, 0)
    bad.refresh_from_db()
    assert bad.status == StatementStatus.REJECTED
    assert bad.errors == {"content_language": ["The selected content language is invalid."]}
    assert tdb.stored_puids() == {s.puid for s in written} - {bad.puid}


@pytest.mark.django_db
def test_a_statement_the_database_has_already_counts_as_submitted_and_is_not_sent_again(api_client, tdb):
    written = rejections(api_client, 10)
    # A send whose answer was lost: the database stored five, the sender never heard.
    tdb.handle_statements(f"Bearer {TOKEN}", "application/json",
                          json.dumps({"statements": [s.body for s in written[:5]]}).encode())

    first = statements_submit()
    again = statements_submit(force=True)

    assert (first.submitted, first.pending) == (10, 0) and again.batches == 0
    assert TransparencyStatement.objects.filter(already_stored=True).count() == 5
    assert tdb.stored_puids() == {s.puid for s in written}
    # The batch told "already stored" was refused whole: its other five went again in the next
    # one, without the five the database has, which were never sent again.
    assert [set(r.puids) for r in tdb.requests[1:]] == [{s.puid for s in written}, {s.puid for s in written[5:]}]
    assert tdb.sent_more_than_once() == {s.puid: 2 for s in written}


@pytest.mark.django_db
@pytest.mark.parametrize("fault", ["401", "429", "timeout", "refused"])
def test_a_failing_database_backs_off_and_nothing_is_lost(api_client, tdb, settings, fault):
    rejections(api_client, 3)
    if fault == "401":
        settings.DSA_TDB_TOKEN = "wrong"
    elif fault == "429":
        tdb.fail_next(1, status=429)
    elif fault == "timeout":
        settings.DSA_TDB_TIMEOUT_S = 0.5
        tdb.slow(1.5, delay_s=2, store=False)
    else:
        tdb.outage(2, mode="refuse")

    failed = statements_submit()

    assert failed.error and (failed.submitted, failed.pending) == (0, 3)
    assert all(s.next_attempt_at > timezone.now() for s in TransparencyStatement.objects.all())
    assert statements_submit().batches == 0  # backing off
    settings.DSA_TDB_TOKEN = TOKEN
    if fault in ("timeout", "refused"):
        time.sleep(2.5)
    assert statements_submit(force=True).line() == "submitted 3, rejected 0, pending 0"


@pytest.mark.django_db
def test_without_a_url_statements_are_kept_and_the_command_says_why(api_client, settings):
    settings.DSA_TDB_URL = ""
    rejections(api_client, 2)
    out = StringIO()

    with pytest.raises(CommandError, match="DSA_TDB_URL is not set"):
        call_command("submit_statements", stdout=out)

    assert out.getvalue().strip() == "submitted 0, rejected 0, pending 2"


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://tdb.example.org", "https://tdb.example.org", "https://169.254.169.254"])
def test_the_outbound_guard_refuses_an_unsafe_database_url_without_connecting(api_client, settings, monkeypatch, url):
    settings.WEBHOOK_ALLOW_PRIVATE, settings.DEBUG = False, False
    settings.DSA_TDB_URL, settings.DSA_TDB_TOKEN = url, TOKEN

    def resolve(host, port, *args, **kwargs):  # the resolver, patched: a name resolves to a private address
        address = host if host[0].isdigit() else "10.9.8.7"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr("socket.getaddrinfo", resolve)
    monkeypatch.setattr("socket.socket.connect", lambda *a: pytest.fail("nothing may connect"))
    rejections(api_client, 1)

    refused = statements_submit(force=True)

    assert refused.error.startswith("DSA_TDB_URL refused") and refused.pending == 1
    assert TransparencyStatement.objects.get().attempts == 0


@pytest.mark.django_db(transaction=True)
def test_two_senders_at_once_never_send_one_statement_twice(api_client, tdb):
    written = rejections(api_client, 260)
    barrier = threading.Barrier(2)
    reports, errors = [], []

    def send() -> None:
        from django.db import connection

        try:
            barrier.wait(timeout=10)
            reports.append(statements_submit(batch_size=20))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert tdb.sent_more_than_once() == {}
    assert tdb.stored_puids() == {s.puid for s in written}
    assert sum(r.submitted for r in reports) == 260 and all(r.batches for r in reports)  # both sent


def test_the_schedule_runs_on_the_notification_cluster(db, settings):
    from django_q.models import Schedule

    services.notifier_schedule_ensure()

    schedule = Schedule.objects.get(func="moderation.tasks.statements_submit")
    assert schedule.cluster == settings.NOTIFY_CLUSTER and schedule.minutes == 1


@pytest.mark.django_db
def test_a_2xx_that_is_not_the_databases_answer_stores_nothing(api_client, settings):
    from tests.helpers import LoopbackJsonServer

    rejections(api_client, 2)
    server = LoopbackJsonServer(lambda path, headers, body: (200, b"<html>Sign in</html>", 0))  # a proxy's, a login page
    try:
        settings.DSA_TDB_URL, settings.DSA_TDB_TOKEN = server.url, TOKEN
        sent = statements_submit(force=True)
    finally:
        server.shutdown()

    assert (sent.submitted, sent.pending) == (0, 2) and sent.error.startswith("HTTP 200")
    assert statuses() == {StatementStatus.PENDING: 2}


@pytest.mark.django_db
def test_a_sender_whose_lease_ran_out_does_not_write_over_the_next_senders(api_client, tdb, monkeypatch):
    from moderation.services import statement_sending

    rejections(api_client, 3)
    clock, taken = Clock(), []

    def slow_post(batch):  # this sender waits past its lease; meanwhile the next one takes the batch
        clock.advance(statement_sending._lease_length().total_seconds() + 1)
        taken.append(statement_sending._lease(now=clock(), force=False, size=100))
        return 503, None, "HTTP 503"

    monkeypatch.setattr(statement_sending, "_post", slow_post)
    first = statements_submit(now=clock)

    assert first.error == "HTTP 503" and len(taken[0][0]) == 3
    # The late failure changed nothing of the next sender's lease: no backoff, no release.
    assert set(TransparencyStatement.objects.values_list("locked_until", "next_attempt_at")) == {(taken[0][1], None)}
