"""The decide panel's rules in the service: violation categories, notes, stale decisions."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from moderation import services
from moderation.errors import InvalidCategory, NoteTooLong, ReasonRequired, StaleVersion
from moderation.models import NOTE_MAX_CHARS, Decision, ModeratorNote
from moderation.observability.timeline import review_timeline
from tests.helpers import decided


@pytest.fixture
def mia(db, django_user_model):
    return django_user_model.objects.create_user("mia")


@pytest.mark.django_db
class TestViolationCategory:
    def test_a_rejection_records_its_violation_category(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="rejected", category="hate", reason="slur",
                                            moderator=mia)
        assert (decision.label, decision.category) == ("rejected", "hate")

    def test_a_rejection_without_a_category_is_refused_and_changes_nothing(self, api_client, mia):
        review = decided(api_client, "manual_review")
        with pytest.raises(InvalidCategory, match="needs a violation category"):
            services.review_override(review_id=review.pk, label="rejected", reason="slur", moderator=mia)
        review.refresh_from_db()
        assert review.status == "manual_review" and review.decisions.count() == 1

    def test_a_category_the_active_policy_lacks_is_refused(self, api_client, mia):
        review = decided(api_client, "manual_review")
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, categories=["spam", "scam"])
        with pytest.raises(InvalidCategory, match="not a category of the active policy"):
            services.review_override(review_id=review.pk, label="rejected", category="hate", reason="x", moderator=mia)
        decision = services.review_override(review_id=review.pk, label="rejected", category="scam", reason="x",
                                            moderator=mia)
        assert decision.category == "scam"

    def test_a_category_with_its_own_thresholds_is_a_category_too(self, api_client, mia):
        services.policy_publish(reject_threshold=0.9, review_threshold=0.5, categories=["spam"],
                                category_thresholds={"violence": {"reject": 0.7}})
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="rejected", category="violence", reason="x",
                                            moderator=mia)
        assert decision.category == "violence"

    def test_an_approval_carries_no_category(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="approved", category="hate", reason="fine",
                                            moderator=mia)
        assert decision.category == ""


@pytest.mark.django_db
class TestNotes:
    def test_a_note_given_with_a_decision_is_written_in_its_transaction(self, api_client, mia):
        review = decided(api_client, "manual_review")
        decision = services.review_override(review_id=review.pk, label="approved", reason="satire",
                                            note="Checked the author's other posts.", moderator=mia)
        note = ModeratorNote.objects.get(review=review)
        assert (note.text, note.author, note.decision) == ("Checked the author's other posts.", mia, decision)

    def test_a_stale_decision_applies_nothing_not_even_its_note(self, api_client, mia, django_user_model):
        review = decided(api_client, "manual_review")
        seen = review.version
        services.review_reprocess(review_id=review.pk, actor="admin", actor_id="sam", reason="new model")
        with pytest.raises(StaleVersion) as refused:
            services.review_override(review_id=review.pk, label="rejected", category="hate", reason="x",
                                     note="should not stay", moderator=mia, expected_version=seen)
        assert refused.value.changes == ["manual_review -> pending (reprocess, by admin:sam)"]
        assert not ModeratorNote.objects.exists()
        assert Decision.objects.filter(review=review).count() == 1

    def test_a_note_alone_needs_text_and_has_a_limit(self, api_client, mia):
        review = decided(api_client, "approved")
        with pytest.raises(ReasonRequired):
            services.review_note_add(review_id=review.pk, author=mia, text="   ")
        with pytest.raises(NoteTooLong):
            services.review_note_add(review_id=review.pk, author=mia, text="x" * (NOTE_MAX_CHARS + 1))
        note = services.review_note_add(review_id=review.pk, author=mia, text="Known spam ring, see ticket 42.")
        assert note.review_id == review.pk and note.decision is None

    @pytest.mark.parametrize("statement", ["UPDATE moderation_moderatornote SET text = 'rewritten'",
                                           "DELETE FROM moderation_moderatornote"])
    def test_notes_are_append_only_in_the_database_itself(self, api_client, mia, statement):
        review = decided(api_client, "approved")
        services.review_note_add(review_id=review.pk, author=mia, text="first look: fine")
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
        assert ModeratorNote.objects.get().text == "first look: fine"

    def test_notes_are_on_the_internal_timeline_and_never_on_the_clients(self, api_client, http, mia):
        review = decided(api_client, "approved")
        services.review_note_add(review_id=review.pk, author=mia, text="internal: reporter is a known troll")

        internal = [e for e in review_timeline(review, notes=True) if e.kind == "note"]
        assert [(e.title, e.detail["text"]) for e in internal] == [("note by mia", "internal: reporter is a known troll")]
        assert all(e.kind != "note" for e in review_timeline(review))
        body = http.get(f"/api/v1/reviews/{review.pk}/timeline/").content.decode()
        assert "known troll" not in body and '"note"' not in body

    def test_the_operators_timeline_command_shows_the_notes(self, api_client, mia):
        from io import StringIO

        from django.core.management import call_command

        review = decided(api_client, "approved")
        services.review_note_add(review_id=review.pk, author=mia, text="escalated to legal")
        out = StringIO()
        call_command("review_timeline", str(review.pk), stdout=out)
        assert "note by mia" in out.getvalue() and "escalated to legal" in out.getvalue()
