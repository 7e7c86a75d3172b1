"""How a transactional test's teardown empties the database (tests/conftest.py, `_flush_by_delete`):
every row goes, the append-only tables' too, the defaults are written again, and the append-only
guards and foreign keys are set aside for the flush's own transaction only."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import IntegrityError, ProgrammingError, connection, transaction

from moderation import services
from moderation.models import ContentReview, ModeratorNote
from tests.helpers import decided

pytestmark = pytest.mark.django_db(transaction=True)


def _counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for model in apps.get_models(include_auto_created=True):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(model._meta.db_table)}")
            counts[model._meta.db_table] = cursor.fetchone()[0]
        return counts


def _teardown_flush() -> None:
    """What Django's TransactionTestCase._fixture_teardown runs."""
    call_command("flush", verbosity=0, interactive=False, database="default", reset_sequences=False,
                 allow_cascade=False, inhibit_post_migrate=False)


def _client():
    client, _ = services.api_client_create(name="acme")
    return client


def test_the_teardown_empties_every_table_the_append_only_ones_too_and_writes_the_defaults_again(
        django_user_model):
    _teardown_flush()
    defaults = _counts()  # what post_migrate writes into an empty database
    assert defaults["moderation_moderationpolicy"] >= 1

    review = decided(_client(), "manual_review")
    mia = django_user_model.objects.create_superuser("mia", password="pw")
    services.review_note_add(review_id=review.pk, author=mia, text="seen twice")
    written = _counts()
    for table in ("audit_reviewtransition", "moderation_moderatornote", "moderation_contentreview", "auth_user"):
        assert written[table] > defaults[table], table

    statements = connection.ops.sql_flush(None, ["moderation_moderatornote"])
    assert statements[0] == "SET LOCAL session_replication_role = replica"  # (a superuser: the test databases')
    _teardown_flush()
    assert _counts() == defaults


def test_the_append_only_guards_and_foreign_keys_hold_again_after_the_flush(django_user_model):
    _teardown_flush()
    review = decided(_client(), "manual_review")
    mia = django_user_model.objects.create_superuser("mia", password="pw")
    note = services.review_note_add(review_id=review.pk, author=mia, text="seen")
    with pytest.raises(ProgrammingError, match="append-only"), transaction.atomic():
        ModeratorNote.objects.filter(pk=note.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        with connection.cursor() as cursor:  # a review of content that does not exist
            cursor.execute("UPDATE moderation_contentreview SET content_id = gen_random_uuid() WHERE id = %s", [review.pk])
    assert ContentReview.objects.filter(pk=review.pk).exists()
