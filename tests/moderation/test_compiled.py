"""CompiledSelect and CompiledUpdate (moderation/db/compiled.py): the ORM's answer and the
ORM's statement, without compiling them again."""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.sql import UpdateQuery
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.models import ApiClient, Author, Content, ContentReview, ModerationRequest
from moderation.services.clients import hash_token
from moderation.db.compiled import CompiledSelect, CompiledUpdate
from moderation.services.policy import policy_active_id_subquery
from tests.helpers import examples, statements_compiled, submit

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _whole(instance, depth: int = 2) -> dict:
    """The instance's fields, its annotations and the objects select_related cached on it."""
    if instance is None or depth == 0:
        return None if instance is None else _fields(instance)
    found = {**_fields(instance), "_state.adding": instance._state.adding, "_state.db": instance._state.db}
    for name in ("active_policy_id",):
        if hasattr(instance, name):
            found[name] = getattr(instance, name)
    for name, related in instance._state.fields_cache.items():
        found[f"related:{name}"] = _whole(related, depth - 1)
    return found


@contextmanager
def sent():
    """The (SQL, parameters) each statement inside the block sent, transaction control left out."""
    statements = []

    def record(execute, sql, params, many, context):
        if not sql.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")):
            statements.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield statements


@pytest.fixture
def compiles():
    """The statements Django's compilers build from here on."""
    with statements_compiled() as built:
        yield built


def test_it_answers_as_the_querysets_first_and_compiles_once(compiles):
    active, token = services.api_client_create(name="acme")
    revoked, revoked_token = services.api_client_create(name="globex")
    services.api_client_revoke(name="globex")
    lookup = CompiledSelect(lambda token_hash: ApiClient.objects.filter(token_hash=token_hash, is_active=True))
    lookup.first(hash_token(token))  # compiled here
    compiles.clear()
    for candidate in (token, revoked_token, "mod_unknown", "", "x\u2028'; --"):
        found = lookup.first(hash_token(candidate))
        assert compiles == [], "the compiled lookup compiled a statement"
        expected = ApiClient.objects.filter(token_hash=hash_token(candidate), is_active=True).first()
        assert _whole(found) == _whole(expected)
        compiles.clear()
    found = lookup.first(hash_token(token))
    assert compiles == [] and found.pk == active.pk and found._state.adding is False and found._state.db == "default"
    assert revoked.pk != found.pk


def test_locking_reads_of_lists_with_related_rows_annotations_and_json_answer_as_the_orm(api_client, compiles):
    """What a callback's locks read: reviews by their operations' keys (select_related, FOR
    UPDATE OF), the operations with the newest policy's id, authors by id."""
    reviews = [submit(api_client, text=f"text {n} \u202e\u0000"[:-1]) for n in range(4)]
    for review in reviews[:3]:
        services.review_claim(review_id=review.pk, worker_id="w")
    keys = list(ModerationRequest.objects.filter(review__in=reviews).values_list("idempotency_key", flat=True))
    reviews_lock = CompiledSelect(
        lambda keys: ContentReview.objects.select_for_update(of=("self",)).select_related("client", "content")
        .filter(requests__idempotency_key__in=keys).order_by("pk"))
    requests_read = CompiledSelect(
        lambda keys: ModerationRequest.objects.annotate(active_policy_id=policy_active_id_subquery())
        .filter(idempotency_key__in=keys).order_by("pk"))
    unknown = uuid.uuid4()
    cases = [keys, keys[:1], [keys[1], unknown], [unknown], [keys[0], keys[0]], keys[::-1], []]
    for case in cases * 2:  # the second time round, every shape is compiled already
        compiles.clear()
        with transaction.atomic(), sent() as compiled_sent:
            found = [_whole(r) for r in reviews_lock.all(case)]
        with transaction.atomic(), sent() as orm_sent:
            expected = [_whole(r) for r in ContentReview.objects.select_for_update(of=("self",))
                        .select_related("client", "content").filter(requests__idempotency_key__in=case).order_by("pk")]
        assert found == expected
        # The very statement the ORM sends (its lock clause included), with the same parameters;
        # a key given twice the ORM sends once (the same rows).
        if len(set(case)) == len(case):
            assert compiled_sent == orm_sent
        assert case == [] or "FOR UPDATE OF" in compiled_sent[0][0]
        if case is keys:
            assert len(found) == 3 and all(f["related:content"] and f["related:client"] for f in found)
        found = [_whole(r) for r in requests_read.all(case)]
        expected = [_whole(r) for r in ModerationRequest.objects.annotate(active_policy_id=policy_active_id_subquery())
                    .filter(idempotency_key__in=case).order_by("pk")]
        assert found == expected
    compiles.clear()
    with transaction.atomic():
        reviews_lock.all(keys)
    requests_read.all([unknown, keys[0]])
    assert compiles == [], "a shape compiled before was compiled again"

    services.review_submit(client=api_client, external_id="by-ann", kind="text", text="hi", author_id="ann")
    ids = list(Author.objects.values_list("pk", flat=True)) + [10**12]
    authors_lock = CompiledSelect(
        lambda ids: Author.objects.select_for_update(no_key=True, of=("self",)).select_related("client")
        .filter(pk__in=ids).order_by("pk"))
    with transaction.atomic():
        assert [_whole(a) for a in authors_lock.all(ids)] == [
            _whole(a) for a in Author.objects.select_for_update(no_key=True, of=("self",)).select_related("client")
            .filter(pk__in=ids).order_by("pk")]


# What a stored text can hold: UTF-8 without NUL (lone surrogates are refused at the API door,
# test_matching_properties.test_a_lone_surrogate_is_refused_at_the_api_door).
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_TEXT, max_size=5), _TEXT, st.lists(_TEXT, max_size=5))
def test_any_text_is_answered_as_the_orm_answers_it(api_client, names, one, stored):
    """Authors named by arbitrary text, some of them stored: the same rows, related client
    included, whichever are asked for."""
    for name in [*stored, *names[::2]]:
        Author.objects.get_or_create(client=api_client, author_id=name)
    lookup = CompiledSelect(lambda names, one: Author.objects.select_related("client")
                            .filter(Q(author_id__in=names) | Q(author_id=one), client=api_client.pk).order_by("pk"))
    expected = [_whole(a) for a in Author.objects.select_related("client")
                .filter(Q(author_id__in=names) | Q(author_id=one), client=api_client).order_by("pk")]
    assert [_whole(a) for a in lookup.all(names, one)] == expected
    assert {a["author_id"] for a in expected} >= set(names[::2])  # (not only empty answers)


def test_it_refuses_what_it_cannot_answer_alike():
    with pytest.raises(ValueError, match="whole rows"):
        CompiledSelect(lambda name: ApiClient.objects.filter(name=name).only("pk")).first("acme")
    with pytest.raises(ValueError, match="whole rows"):
        CompiledSelect(lambda name: ApiClient.objects.filter(name=name).values("pk")).first("acme")
    # An argument the ORM rewrites (LIKE's escaping and wildcard) cannot be put in afterwards.
    with pytest.raises(ValueError, match="once, as it is"):
        CompiledSelect(lambda name: ApiClient.objects.filter(name__startswith=name)).first("acme")
    lookup = CompiledSelect(lambda name: ApiClient.objects.filter(name=name))
    for wrong in (None, True, 1.5, b"acme"):
        with pytest.raises(TypeError):
            lookup.first(wrong)
    with pytest.raises(TypeError, match="one type"):
        CompiledSelect(lambda ids: ApiClient.objects.filter(pk__in=ids)).all([1, "2"])


def test_content_with_json_columns_is_read_through_their_converters(api_client):
    review = submit(api_client)
    Content.objects.filter(pk=review.content_id).update(language_candidates=[["en", 1.0]])
    lookup = CompiledSelect(lambda pk: Content.objects.filter(pk=pk))
    assert _whole(lookup.first(review.content_id)) == _whole(Content.objects.get(pk=review.content_id))
    assert lookup.first(review.content_id).language_candidates == [["en", 1.0]]


def test_an_update_is_the_orms_statement_with_the_values_prepared_alike(api_client, compiles):
    reviews = [submit(api_client) for _ in range(3)]
    requests = [services.review_claim(review_id=r.pk, worker_id="w") for r in reviews]
    completed = CompiledUpdate(lambda pk: ModerationRequest.objects.filter(pk=pk),
                               ("status", "completed_at", "next_attempt_at", "updated_at"),
                               fixed={"cause": F("cause")})
    now = timezone.now()
    values = {"status": "completed", "completed_at": now, "next_attempt_at": now, "updated_at": now}
    orm = ModerationRequest.objects.filter(pk=requests[0].pk).query.chain(UpdateQuery)
    orm.add_update_values({"cause": F("cause"), **values})
    statement, params = orm.get_compiler("default").as_sql()
    assert completed.statement(requests[0].pk, **values) == (statement, list(params))
    # None: the ORM writes NULL in the SQL, the compiled statement passes it as a parameter.
    values["next_attempt_at"] = None
    ModerationRequest.objects.filter(pk=requests[1].pk).update(next_attempt_at=now)
    compiles.clear()
    assert completed.run(requests[1].pk, **values) == 1
    assert completed.run(10**12, **values) == 0
    assert compiles == [], "the compiled update compiled a statement"
    assert _fields(ModerationRequest.objects.get(pk=requests[1].pk)) == {
        **_fields(requests[1]), "status": "completed", "completed_at": now, "next_attempt_at": None, "updated_at": now}
    # An expression as a value is the ORM's to compile, each time.
    assert completed.run(requests[2].pk, **{**values, "updated_at": F("created_at")}) == 1 and compiles
    with pytest.raises(TypeError, match="writes"):
        completed.run(requests[2].pk, status="completed")


def test_a_transition_of_reviews_read_in_two_statuses_moves_each_only_from_its_own(api_client):
    """The transition's compiled UPDATE with two (status, ids) groups: each row moves only if it
    still has the status it was read with; one that moved meanwhile fails the whole UPDATE."""
    from django_fsm import ConcurrentTransition

    from moderation.services import transitions

    pending, processing = submit(api_client), submit(api_client)
    services.review_claim(review_id=processing.pk, worker_id="w")
    processing.refresh_from_db()
    for moved in (False, True):
        reviews = [ContentReview.objects.get(pk=pending.pk), ContentReview.objects.get(pk=processing.pk)]
        statuses = [review.status for review in reviews]
        assert statuses == ["pending", "processing"] or moved
        if moved:  # another writer moved the processing one on
            ContentReview.objects.filter(pk=processing.pk).update(status="approved")
        versions = [review.version for review in reviews]
        now = timezone.now()
        for review in reviews:
            review.updated_at = now
        if moved:
            with pytest.raises(ConcurrentTransition, match="1 of 2"):
                transitions._update_unless_moved(reviews, statuses, {"updated_at"})
        else:
            transitions._update_unless_moved(reviews, statuses, {"updated_at"})
            assert [ContentReview.objects.get(pk=r.pk).version for r in reviews] == [v + 1 for v in versions]
