"""CompiledSelect (moderation/services/compiled.py): the ORM's answer, without compiling it again."""

from __future__ import annotations

import pytest
from django.db.models.sql.compiler import SQLCompiler

from moderation import services
from moderation.models import ApiClient, Content
from moderation.services.clients import hash_token
from moderation.services.compiled import CompiledSelect

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def test_it_answers_as_the_querysets_first_and_compiles_once(monkeypatch):
    active, token = services.api_client_create(name="acme")
    revoked, revoked_token = services.api_client_create(name="globex")
    services.api_client_revoke(name="globex")
    lookup = CompiledSelect(lambda token_hash: ApiClient.objects.filter(token_hash=token_hash, is_active=True))
    lookup.first(hash_token(token))  # compiled here

    compiled = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(self) or as_sql(self, *a, **k))
    for candidate in (token, revoked_token, "mod_unknown", "", "x\u2028'; --"):
        found = lookup.first(hash_token(candidate))
        assert compiled == [], "the compiled lookup compiled a statement"
        expected = ApiClient.objects.filter(token_hash=hash_token(candidate), is_active=True).first()
        assert (None if found is None else _fields(found)) == (None if expected is None else _fields(expected))
        compiled.clear()
    found = lookup.first(hash_token(token))
    assert compiled == [] and found.pk == active.pk and found._state.adding is False and found._state.db == "default"
    assert revoked.pk != found.pk


def test_it_refuses_what_it_cannot_answer_alike():
    with pytest.raises(ValueError, match="whole rows"):
        CompiledSelect(lambda name: ApiClient.objects.filter(name=name).only("pk")).first("acme")
    with pytest.raises(ValueError, match="converting"):
        CompiledSelect(lambda external_id: Content.objects.filter(external_id=external_id)).first("x")  # jsonb
    lookup = CompiledSelect(lambda name: ApiClient.objects.filter(name=name))
    with pytest.raises(TypeError):
        lookup.first(None)
