"""Shared test helpers: data built through the real services, real threads colliding."""

from __future__ import annotations

import json
import math
import operator
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import Message
from functools import reduce
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from moderation import services
from moderation.errors import ModerationError
from moderation.models import ContentReview, ModerationRequest
from moderation.providers import Accepted, ModerationInput, ModerationResult, ProviderError


def examples(full: int) -> int:
    """How many examples a property test that names its count (`max_examples=examples(300)`)
    runs: `full` under Hypothesis' default profile (`make test-deep`, a bare `pytest`), a share
    of it under the `ci` profile of `make test` (tests/conftest.py): that profile's max_examples
    over the default's 100. A count a test names overrides the profile, hence this. A test whose
    search must find something (a guard taken out) names its count as it is."""
    from hypothesis import settings

    return max(1, math.ceil(full * min(1.0, settings().max_examples / 100)))


def result(score: float, *, model: str = "test-model", provider_request_id: str = "") -> ModerationResult:
    return ModerationResult(
        model=model,
        flagged=score >= 0.5,
        categories={"harassment": score >= 0.5},
        category_scores={"harassment": score},
        provider_request_id=provider_request_id,
    )


# Scores the initial policy maps to each label for `result`'s category, harassment: a provider's
# category (OpenAI's name) the local model does not score, so the initial policy (moderation/
# services/policy.py DEFAULT_POLICY) gives it no thresholds of its own: review from 0.5, reject
# from 0.9.
SCORE_FOR = {"approved": 0.1, "manual_review": 0.6, "rejected": 0.95}


# A text the local model approves (the simulator judges texts with it too). Not "a perfectly
# friendly sentence", which it sends to a human (insult 0.37: docs/model-card.md, failure modes).
FRIENDLY = "thanks for the lovely dinner, see you at the party"


def submit(client, *, text: str = FRIENDLY, external_id: str | None = None) -> ContentReview:
    review, _ = services.review_submit(
        client=client, external_id=external_id or uuid.uuid4().hex, kind="text", text=text
    )
    return review


def claimed(client, *, worker: str = "worker-1") -> tuple[ContentReview, ModerationRequest]:
    review = submit(client)
    request = services.review_claim(review_id=review.pk, worker_id=worker)
    assert request is not None
    review.refresh_from_db()
    return review, request


def decided(client, label: str) -> ContentReview:
    review, request = claimed(client)
    outcome = services.review_finalize(
        idempotency_key=request.idempotency_key, result=result(SCORE_FOR[label]), cause="provider_result"
    )
    assert outcome == "applied"
    review.refresh_from_db()
    assert review.status == label
    return review


@contextmanager
def review_locked(review_id):
    """While inside, another transaction, on its own connection, holds the review's row lock (a
    moderator's, a reprocess's): what runs inside must skip the review rather than wait for it."""
    locked, release = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                ContentReview.objects.select_for_update().get(pk=review_id)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10), "the review's lock was never taken"
        yield
    finally:
        release.set()
        holder.join()


def collide(count: int, target: Callable[[int], object], *, expect: type | tuple = (), timeout: float = 30) -> list:
    """Run target(i) in `count` threads released together by a barrier; return results in order.

    Each thread uses (and closes) its own database connection, so row locks really collide.
    A thread that raises one of the `expect` exception types (a loser told so by a named domain
    error) has that exception returned in its slot, for the test to assert on; any other
    exception in any thread fails the test, re-raised here with the thread it came from.
    """
    barrier = threading.Barrier(count)
    results: list = [None] * count
    unexpected: list[tuple[int, BaseException]] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            results[i] = target(i)
        except expect as exc:
            results[i] = exc
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            unexpected.append((i, exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread is still running: deadlock?"
    if unexpected:
        i, exc = sorted(unexpected, key=lambda pair: pair[0])[0]
        exc.add_note(f"raised in thread {i} of {count} by collide() ({len(unexpected)} threads raised unexpectedly)")
        raise exc
    return results


def reads_wait_for_each_other(monkeypatch, model, parties: int, *, timeout: float = 1) -> None:
    """Widen a race's window: a thread that has loaded a `model` row waits (up to `timeout`)
    until `parties` threads have loaded one, so without a row lock every racer reads the row
    before any acts on it. With the lock the others skip or wait for the row and do not read it
    meanwhile: the wait times out and the holder carries on."""
    barrier = threading.Barrier(parties)
    real_from_db = model.from_db.__func__

    def from_db(cls, *args, **kwargs):
        row = real_from_db(cls, *args, **kwargs)
        try:
            barrier.wait(timeout=timeout)
        except threading.BrokenBarrierError:
            pass
        return row

    monkeypatch.setattr(model, "from_db", classmethod(from_db))


def silent_for(operation: ModerationRequest, seconds: float) -> None:
    """Make an operation look untouched for `seconds`, as if the clock had moved on since then."""
    ModerationRequest.objects.filter(pk=operation.pk).update(updated_at=timezone.now() - timedelta(seconds=seconds))


@dataclass
class ScriptedProvider:
    """A provider that answers from a script (results, Accepted, or errors to raise).

    The script is shared by all threads; `calls` records every input received, in order.
    `on_call` runs inside each call (to inspect what the caller holds while it waits).
    """

    name: str = "scripted"
    script: list = field(default_factory=list)
    default: object = None
    on_call: Callable[[ModerationInput], None] | None = None
    calls: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def moderate(self, request: ModerationInput):
        with self._lock:
            self.calls.append(request)
            answer = self.script.pop(0) if self.script else self.default
        if self.on_call:
            self.on_call(request)
        if isinstance(answer, ProviderError):
            raise answer
        if answer is None:
            raise AssertionError("the scripted provider ran out of answers")
        assert isinstance(answer, ModerationResult | Accepted)
        return answer


def queued_tasks(func: str | None = None) -> list[dict]:
    """Tasks waiting in the django-q2 ORM broker (optionally only those of one function)."""
    from django_q.models import OrmQ

    tasks = [q.task for q in OrmQ.objects.order_by("id")]
    return [t for t in tasks if func is None or t["func"] == func]


class assert_max_queries:  # noqa: N801 - reads as a context manager
    """At most `limit` SQL statements, not counting SAVEPOINT bookkeeping.

    Tests run inside a transaction, which turns each service's atomic() into a savepoint pair
    that a real top-level call does not issue.
    """

    def __init__(self, limit: int) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.limit = limit
        self.capture = CaptureQueriesContext(connection)

    def __enter__(self):
        self.capture.__enter__()
        return self

    def __exit__(self, *exc_info):
        self.capture.__exit__(*exc_info)
        if exc_info[0] is not None:
            return False
        statements = [q["sql"] for q in self.capture.captured_queries if "SAVEPOINT" not in q["sql"]]
        assert len(statements) <= self.limit, f"{len(statements)} queries > {self.limit}:\n" + "\n".join(statements)
        return False


@contextmanager
def connection_kept():
    """Keep the connection for the block as production keeps it (CONN_MAX_AGE): django-q2's ORM
    broker closes an expired connection when it enqueues, and the test settings' age is 0. Warm
    a connection inside it (its statements prepared) for a count_round_trips after it."""
    from django.db import connection

    connection.ensure_connection()
    close_at, connection.close_at = connection.close_at, None
    try:
        yield connection
    finally:
        connection.close_at = close_at


class count_round_trips:  # noqa: N801 - reads as a context manager
    """Count what a block costs the database: the statements Django sends (`statements`, SAVEPOINT
    included) and the protocol round trips psycopg makes (`round_trips`: every statement, and the
    BEGIN, COMMIT and ROLLBACK psycopg sends on its own, each waits for its answer).

    The connection is kept for the block as production keeps it (`connection_kept`).

    Round trips are counted from libpq's protocol trace: each exchange ends with the server's
    ReadyForQuery. Run it in a `transaction=True` test: inside the test case's own transaction
    each atomic() becomes a savepoint pair instead of BEGIN/COMMIT.
    """

    def __init__(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        self.connection = connection
        self.capture = CaptureQueriesContext(connection)
        self.round_trips = 0

    def __enter__(self):
        import tempfile

        from psycopg import pq

        self.kept = connection_kept()
        self.kept.__enter__()
        self.pgconn = self.connection.connection.pgconn
        self.trace = tempfile.TemporaryFile()
        self.pgconn.trace(self.trace.fileno())
        self.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        self.capture.__enter__()
        return self

    def __exit__(self, *exc_info):
        self.capture.__exit__(*exc_info)
        self.pgconn.untrace()
        self.kept.__exit__(*exc_info)
        assert self.connection.connection.pgconn is self.pgconn, "the block reconnected: round trips not counted"
        self.trace.seek(0)
        self.lines = self.trace.read().decode(errors="replace").splitlines()
        self.trace.close()
        self.round_trips = sum(1 for line in self.lines if "\tReadyForQuery\t" in line or line.endswith("ReadyForQuery"))
        return False

    @property
    def statements(self) -> list[str]:
        return [q["sql"] for q in self.capture.captured_queries]

    def __str__(self) -> str:
        return f"{len(self.statements)} statements, {self.round_trips} round trips:\n" + "\n".join(
            line.split("\t", 3)[-1][:120] for line in self.lines
            if line.startswith("F") and line.split("\t")[2:3] in (["Query"], ["Parse"], ["Sync"])
        )


def count_model_calls(monkeypatch) -> list[list[str]]:
    """Record every call of the local model (the texts of each), letting it predict as usual."""
    from moderation.providers import local

    calls: list[list[str]] = []
    real = local.predictor

    def counting():
        predict = real()
        return lambda texts: calls.append(list(texts)) or predict(texts)

    monkeypatch.setattr(local, "predictor", counting)
    return calls


POISON = "poisoned"  # a text holding it breaks wherever a test puts the poison (tests of isolation)


def raise_on_poison(texts: str | list[str]) -> None:
    if any(POISON in text for text in ([texts] if isinstance(texts, str) else texts)):
        raise RuntimeError(f"{POISON} input")


def poison_the_rules(monkeypatch) -> None:
    """The rules' term matcher raises on a text holding POISON (as it once did on a text without
    words): deciding that one review fails, wherever it is decided."""
    from moderation import verdicts

    real = verdicts.rule_matches

    def rule_matches(policy, text, *args, **kwargs):
        raise_on_poison(text)
        return real(policy, text, *args, **kwargs)

    monkeypatch.setattr(verdicts, "rule_matches", rule_matches)


class LoopbackJsonServer:
    """An HTTP server on loopback for a test's provider: every POST is answered by
    `respond(path, headers, body)` -> (status, answer, delay_s), `headers` as http.server reads
    them (case-insensitive), `answer` a JSON-able object or raw bytes sent after `delay_s`.
    `url` is its address; `shutdown()` stops it."""

    def __init__(self, respond: Callable[[str, Message, bytes], tuple[int, object, float]]):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, answer, delay_s = respond(self.path, self.headers, body)
                time.sleep(delay_s)
                raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def shutdown(self) -> None:
        self.server.shutdown()


def staff_browser(django_user_model, username: str, role: str | None):
    """A logged-in Django test client for a new staff user in group `role` (None: no group);
    its `.user` is that user."""
    from django.contrib.auth.models import Group
    from django.test import Client

    user = django_user_model.objects.create_user(username, password="pw-long-enough-1", is_staff=True)
    if role:
        user.groups.add(Group.objects.get(name=role))
    browser = Client()
    browser.force_login(user)
    browser.user = user
    return browser


def active_points(author) -> int:
    """The sum of an author's active strikes, counted afresh: what `Author.strike_points` keeps."""
    from django.db.models import Sum

    from moderation.models import Strike

    return Strike.objects.filter(author=author, ended_at__isnull=True).aggregate(n=Sum("points"))["n"] or 0


def violations_with_rated_reporters(review_ids) -> list[str]:
    """The checker's findings, less the reporters' counts: for tests whose reporters come rated
    (their `resolved` / `actioned` set directly rather than earned by judged reports, which the
    checker would rightly report as counts no moderator judged)."""
    from moderation.invariants import violations

    return [v for v in violations(review_ids) if not v.startswith("reporter ")]


def transition_unconditional(groups):
    """A transition's UPDATE without `WHERE status = <status read>` (the guard taken out, for
    `monkeypatch.setattr(transitions, "_unmoved", ...)`): any status is not null. Each argument
    still reaches the SQL, as the UPDATE's compiled form requires."""
    return reduce(operator.or_, (Q(pk__in=pks) & (Q(status=status) | Q(status__isnull=False)) for status, pks in groups))


@contextmanager
def statements_compiled():
    """The statements Django's compilers build inside the block (each compiler, by its model):
    what a path that should compile nothing compiled."""
    from unittest.mock import patch

    from django.db.backends.postgresql import compiler as postgresql_compiler
    from django.db.models.sql import compiler as sql_compiler

    built: list[str] = []
    classes = {cls for module in (sql_compiler, postgresql_compiler) for cls in vars(module).values()
               if isinstance(cls, type) and issubclass(cls, sql_compiler.SQLCompiler) and "as_sql" in vars(cls)}

    def spying(cls):
        as_sql = vars(cls)["as_sql"]
        return lambda self, *args, **kwargs: built.append(
            f"{type(self).__name__} {getattr(self.query.model, '__name__', None)}") or as_sql(self, *args, **kwargs)

    patches = [patch.object(cls, "as_sql", spying(cls)) for cls in classes]
    for each in patches:
        each.start()
    try:
        yield built
    finally:
        for each in patches:
            each.stop()


def outcome_of(call):
    """What a racing call came to: its return value, or the name of the domain refusal it raised
    (anything else raised is returned as the exception, for `raised`)."""
    try:
        return call()
    except ModerationError as exc:
        return type(exc).__name__


def raised(results) -> list:
    """What no thread may do: raise (a domain refusal is returned as its name instead)."""
    return [r for r in results if isinstance(r, BaseException)]


def git_repository(work: Path, files: dict[str, str | bytes], message: str = "files") -> list[str]:
    """A git repository at `work` with `files` (path: text or bytes) written and committed;
    returns the argv that runs git in it (its author set), for more commits."""
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return git
