"""Several writes in one statement (moderation/db/one_statement.py): Django's own INSERTs
and UPDATEs chained, committed or refused together, each row as `save()` would write it."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.db import IntegrityError, connection, models, transaction
from django.db.models import signals
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import EventKind, PipelineEvent
from tests.helpers_media import b64, encoded, picture
from moderation import services, tasks
from moderation.models import Content, ContentReview, ModerationRequest, RequestStatus
from moderation.db.one_statement import OneStatement
from tests.helpers import claimed

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("on_commit_callbacks_run")]  # (the provider is called outside any transaction)


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


def test_a_read_rides_in_the_statement_and_sees_the_rows_as_they_were_before_its_writes(api_client):
    content = Content(client=api_client, external_id="read", kind="text", text="hello")
    writes = OneStatement()
    writes.insert(content)
    before = writes.read("SELECT count(*) FROM moderation_content WHERE external_id = %s", ("read",))
    assert before.value is None  # not run yet

    with CaptureQueriesContext(connection) as queries:
        writes.execute()

    assert len(queries) == 1 and before.value == 0  # one statement; its snapshot predates the insert
    assert Content.objects.filter(external_id="read").count() == 1


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


# The rows OneStatement writes are the rows `save()` writes (the module's docstring says what a
# statement bypasses and how its callers make up for it). The models are not listed by hand: a
# real run (a submission through the API, the local model's decision, reports that send the
# review to a human, a moderator's decision) is watched, and every INSERT and UPDATE it sends
# through OneStatement is compared, as it runs, with what `save()` writes for the same values.
# A model a caller starts writing later is compared without a change here; the list below only
# says which models the run reaches today.

# What the run reaches: (model, "insert" | "update").
WRITTEN_BY_THE_RUN = {
    ("Content", "insert"),
    ("ContentReview", "insert"),
    ("HistoricalContentReview", "insert"),
    ("PipelineEvent", "insert"),
    ("ReviewTransition", "insert"),
    ("Decision", "insert"),
    ("DecisionNotification", "insert"),
    ("ModerationRequest", "update"),
    ("ReviewMedia", "insert"),  # an image sent as image_base64, with its content
    ("Strike", "insert"),  # the author's, for the moderator's rejection; revoked by the approval
    ("Strike", "update"),
    ("Author", "update"),  # its points, up and back down
    ("TransparencyStatement", "insert"),  # the rejection's statement of reasons
    ("TransparencyStatement", "update"),  # and the correction the approval records
    ("OrmQ", "insert"),  # a new submission's job, with the ORM broker (moderation/jobs.py)
    ("QueueVisit", "insert"),  # the review's stay in the reports queue, opened as it enters it
    ("QueueVisit", "update"),  # and closed by the moderator's decision (docs/design.md, "Deadlines")
}

# The save() signal receivers of those models, which OneStatement does not send: each is made up
# for by the callers (the docstring of moderation/db/one_statement.py says how).
RECEIVERS_MADE_UP_FOR = {
    ("ContentReview", "post_save", "HistoricalRecords.post_save"),  # transitions.review_history_row
}


class _Rollback(Exception):
    pass


def _row(model: type[models.Model], pk) -> dict:
    return model._base_manager.filter(pk=pk).values(*[f.attname for f in _written_fields(model)]).get()


def _written_fields(model: type[models.Model]) -> list[models.Field]:
    """The columns a write sets: a generated one (Content.search_vector) is the database's."""
    return [f for f in model._meta.concrete_fields if not f.generated]


def _automatic(model: type[models.Model]) -> list[models.Field]:
    """The fields save() sets itself: `auto_now` and `auto_now_add`."""
    return [f for f in model._meta.concrete_fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)]


def _as_saved(model: type[models.Model], values: dict, *, adding: bool) -> dict:
    """The row `save()` writes for `values` (attnames), read back; nothing of it is kept. The
    row OneStatement wrote has the same key and is in the way (unique constraints, the transition
    log's append-only trigger): it is removed first, with triggers off (which also leaves the
    foreign keys unchecked), all inside a savepoint that is rolled back."""
    pk = values[model._meta.pk.attname]
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL session_replication_role = replica")
                if adding:
                    table, column = model._meta.db_table, model._meta.pk.column
                    cursor.execute(f'DELETE FROM "{table}" WHERE "{column}" = %s', [pk])
            twin = model(**values)
            twin._state.adding = adding
            twin.save(force_insert=adding, force_update=not adding)
            saved = _row(model, pk)
            raise _Rollback
    except _Rollback:
        pass
    return saved


def _differences(model: type[models.Model], written: dict, saved: dict) -> dict:
    automatic = {f.attname for f in _automatic(model)} | {model._meta.pk.attname}
    return {name: (written[name], saved[name]) for name in written if name not in automatic and written[name] != saved[name]}


@pytest.fixture
def compared(monkeypatch):
    """Watch every OneStatement: each write is compared with save()'s as soon as it has run.
    Returns the comparisons: (model, "insert" | "update", pk, differences, stale automatic fields)."""
    results: list[tuple] = []
    insert, update, execute = OneStatement.insert, OneStatement.update, OneStatement.execute
    update_compiled = OneStatement.update_compiled

    def watched_insert(self, obj):
        # The caller's values, before OneStatement prepares them (as save() gets them).
        given = {f.attname: getattr(obj, f.attname) for f in _written_fields(type(obj))}
        added = timezone.now()
        insert(self, obj)
        self.__dict__.setdefault("watched", []).append(("insert", obj, (given, added)))

    def watched_update(self, queryset, **values):
        update(self, queryset, **values)
        self.__dict__.setdefault("watched", []).append(("update", queryset, values))

    def watched_update_compiled(self, compiled, *args, **values):
        update_compiled(self, compiled, *args, **values)
        self.__dict__.setdefault("watched", []).append(("update", compiled._queryset_for(*args), values))

    def watched_execute(self):
        watched = self.__dict__.pop("watched", [])
        before = {}
        for action, target, _ in watched:
            if action == "update":
                before[id(target)] = [_row(target.model, pk) for pk in target.values_list("pk", flat=True)]
        execute(self)
        for action, target, values in watched:
            if action == "insert":
                _compare_insert(type(target), target.pk, *values, results)
            else:
                _compare_update(target.model, before[id(target)], values, results)

    monkeypatch.setattr(OneStatement, "insert", watched_insert)
    monkeypatch.setattr(OneStatement, "update", watched_update)
    monkeypatch.setattr(OneStatement, "update_compiled", watched_update_compiled)
    monkeypatch.setattr(OneStatement, "execute", watched_execute)
    return results


def _compare_insert(model, pk, given: dict, added: datetime, results: list) -> None:
    written = _row(model, pk)
    values = dict(given)
    for field in _written_fields(model):
        # Keys are the statement's to wire (key_of, or a row inserted with it): taken as written.
        if field.primary_key or field.is_relation or isinstance(values[field.attname], RawSQL):
            values[field.attname] = written[field.attname]
    saved = _as_saved(model, values, adding=True)
    # save() sets them as it writes; OneStatement when the write is added (insert()).
    stale = [f.attname for f in _automatic(model)
             if written[f.attname] is None or not added <= written[f.attname] <= timezone.now()]
    results.append((model, "insert", pk, _differences(model, written, saved), stale))


def _compare_update(model, rows_before: list[dict], values: dict, results: list) -> None:
    assert rows_before, f"an UPDATE of {model.__name__} matched no row"
    for before in rows_before:
        pk = before[model._meta.pk.attname]
        written = _row(model, pk)
        changed = dict(before)
        for name, value in values.items():
            field = model._meta.get_field(name)
            changed[field.attname] = value.pk if isinstance(value, models.Model) else value
        saved = _as_saved(model, changed, adding=False)
        # save() sets every auto_now field: the UPDATE must too (a value left as it was is stale).
        stale = [f.attname for f in _automatic(model) if getattr(f, "auto_now", False)
                 and (written[f.attname] is None or written[f.attname] == before[f.attname])]
        results.append((model, "update", pk, _differences(model, written, saved), stale))


def test_every_row_one_statement_writes_is_the_row_save_writes(compared, http, settings, django_user_model):
    settings.MODERATION_PROVIDER = "local"
    submitted = http.post("/api/v1/reviews/", {"external_id": "rows-1", "content_type": "text",
                                               "text": "Thanks for the lovely dinner", "author_id": "writer-1"},
                          format="json")
    assert submitted.status_code == 201, submitted.content
    review_id = submitted.json()["id"]
    tasks.moderate_review(review_id)  # the local model decides: approved
    for reporter in ("user-1", "user-2", "user-3"):  # the report threshold: to a human
        assert http.post(f"/api/v1/reviews/{review_id}/reports/", {"reporter_id": reporter, "reason": "spam"},
                         format="json").status_code == 201
    moderator = django_user_model.objects.create_user("moderator-1")
    services.review_override(review_id=review_id, label="rejected", reason="spam after all",
                              category="spam", moderator=moderator)
    services.review_override(review_id=review_id, label="approved", reason="satire, on a second look",
                              moderator=django_user_model.objects.create_user("moderator-2"))
    image = http.post("/api/v1/reviews/", {"external_id": "rows-2", "content_type": "image",
                                           "image_base64": b64(encoded(picture(1)))}, format="json")
    assert image.status_code == 201, image.content

    reached = {(model.__name__, action) for model, action, *_ in compared}
    assert reached == WRITTEN_BY_THE_RUN
    unlike_save = [(model.__name__, action, diff) for model, action, _pk, diff, _ in compared if diff]
    assert unlike_save == [], "columns (written, as save() writes them) that differ"
    stale = [(model.__name__, action, fields) for model, action, _pk, _, fields in compared if fields]
    assert stale == [], "auto_now / auto_now_add fields left unset or stale"
    receivers = {
        (model.__name__, name, receiver.__qualname__)
        for model in {model for model, *_ in compared}
        for name, signal in (("pre_save", signals.pre_save), ("post_save", signals.post_save))
        for receiver in _receivers(signal, model)
    }
    assert receivers == RECEIVERS_MADE_UP_FOR, "a save() signal the callers do not make up for"


def _receivers(signal, model) -> list:
    sync, async_ = signal._live_receivers(model)
    return [*sync, *async_]


def test_an_insert_compiled_once_is_the_insert_the_compiler_builds_each_time(http, monkeypatch, settings):
    """The INSERT SQL is compiled once per shape (moderation/db/insert_sql.py): every row of the
    run, cached or not, gets the statement and the values Django's compiler gives it afresh."""
    from moderation.db import insert_sql

    settings.MODERATION_PROVIDER = "local"
    calls: list[tuple[str, bool, bool]] = []
    cached_insert = insert_sql.insert_sql

    def compared(obj, fields, using, connection_):
        was_cached = insert_sql.insert_shape(obj, fields, using) in insert_sql._INSERT_SQL
        statement, params = cached_insert(obj, fields, using, connection_)
        fresh_statement, fresh_params = insert_sql.compiled_insert(obj, fields, using, connection_)
        same = statement == fresh_statement and _plain(params) == _plain(fresh_params)
        calls.append((type(obj).__name__, was_cached, same))
        return statement, params

    monkeypatch.setattr(insert_sql, "insert_sql", compared)
    for n in range(3):
        answer = http.post("/api/v1/reviews/", {"external_id": f"shape-{n}", "content_type": "text",
                                                "text": "Thanks for the lovely dinner", "author_id": f"a-{n % 2}"},
                           format="json")
        assert answer.status_code == 201, answer.content
        tasks.moderate_review(answer.json()["id"])

    assert [call for call in calls if not call[2]] == [], "rows whose cached INSERT differs from the compiler's"
    reused = {name for name, was_cached, _ in calls if was_cached}
    assert {"Content", "ContentReview", "HistoricalContentReview"} <= reused


def _plain(params: list) -> list:
    return [getattr(param, "obj", param) for param in params]  # psycopg's Jsonb wraps the value
