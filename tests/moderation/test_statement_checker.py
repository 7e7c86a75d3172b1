"""The checker's statements of reasons (moderation/invariants.py, `statement_violations`) can fail:
each test writes one corruption past the services and the checker names it; the same reviews
as the services left them report nothing."""

from __future__ import annotations


import pytest
from django.utils import timezone

from moderation import services
from moderation.invariants import statement_violations, violations
from moderation.models import ContentReview, Decision, TransparencyStatement
from tests.helpers import decided
from tests.moderation.test_authors import authored

pytestmark = pytest.mark.django_db
TEXT = "a long enough sentence to be quoted"


@pytest.fixture
def moderators(django_user_model):
    return (django_user_model.objects.create_user("mia"), django_user_model.objects.create_user("sam"))


def appealed_and_upheld(api_client, moderators) -> tuple[ContentReview, Decision]:
    """A rejection, appealed and upheld by a moderator: the first statement stands, alone."""
    review = authored(api_client, "person-1", "rejected", text=TEXT)
    services.appeal_file(review_id=review.pk, appellant_id="person-1", statement="it was fine")
    upheld = services.review_override(review_id=review.pk, label="rejected", reason="the rejection stands firm",
                                      moderator=moderators[0], category="harassment")
    assert violations([review.pk]) == []
    return review, upheld


def statement_for(decision: Decision) -> TransparencyStatement:
    """A statement written past the services, as if the decide path had written one for `decision`."""
    return TransparencyStatement.objects.create(
        decision=decision, review_id=decision.review_id, facts={}, body={"puid": str(decision.pk)},
        policy=services.policy_active(), dsa_category="x", automated_decision="x", source_type="x")


def found(review, text: str) -> list[str]:
    problems = statement_violations([review.pk])
    assert any(text in problem for problem in problems), problems
    return problems


def test_a_clean_history_has_no_violations(api_client, moderators):
    review, _ = appealed_and_upheld(api_client, moderators)
    services.review_override(review_id=review.pk, label="approved", reason="overturned after all",
                             moderator=moderators[1])
    services.review_override(review_id=review.pk, label="rejected", reason="rejected once more",
                             moderator=moderators[0], category="spam")
    for _ in range(8):  # the ladder: a warning, a suspension, a ban
        authored(api_client, "person-1", "rejected", text=TEXT)
    warned = authored(api_client, "person-2", "approved", text=TEXT)
    services.author_act(author_pk=warned.author_id, moderator=moderators[0], action="warn", reason="be nicer now")
    reviews = list(ContentReview.objects.values_list("pk", flat=True))

    assert TransparencyStatement.objects.filter(overturned_at__isnull=False).count() == 1
    assert TransparencyStatement.objects.filter(account_action__isnull=False).count() == 2
    assert statement_violations(reviews) == [] and violations(reviews) == []


def test_a_restriction_without_its_statement_is_reported(api_client):
    review = decided(api_client, "rejected")
    TransparencyStatement.objects.filter(decision=review.decision).delete()

    found(review, f"decision {review.decision_id} (rejected), statement none: restricts the content, but has no "
                  "statement")


def test_a_second_statement_for_an_upheld_appeal_is_reported(api_client, moderators):
    review, upheld = appealed_and_upheld(api_client, moderators)
    second = statement_for(upheld)

    problems = found(review, f"decision {upheld.pk} (rejected), statement {second.pk}: has a statement, but "
                             "restricts nothing new")
    assert len(problems) == 1  # the first statement stands as it was


def test_a_statement_on_an_approval_is_reported(api_client):
    review = decided(api_client, "approved")
    statement_for(review.decision)

    found(review, f"decision {review.decision_id} (approved)")
    found(review, "has a statement, but restricts nothing new")


def test_a_statement_whose_body_names_another_puid_is_reported(api_client):
    review = decided(api_client, "rejected")
    statement = TransparencyStatement.objects.get(decision=review.decision)
    TransparencyStatement.objects.filter(pk=statement.pk).update(body={**statement.body, "puid": "review-42"})

    found(review, "its statement's puid is not the decision's id")


@pytest.mark.parametrize("quoted", ["content", "reason", "reporter", "author"])
def test_a_statement_quoting_what_it_must_not_is_reported(api_client, moderators, quoted):
    review = authored(api_client, "person-9", "approved", text=TEXT)
    services.report_file(review_id=review.pk, reporter_id="rep-7", reason="harassment")
    services.review_override(review_id=review.pk, label="rejected", reason="my own private words",
                             moderator=moderators[0], category="harassment")
    review.refresh_from_db()
    assert statement_violations([review.pk]) == []
    statement = TransparencyStatement.objects.get(decision=review.decision)
    quote = {"content": TEXT[2:-2], "reason": "my own private words", "reporter": "rep-7", "author": "person-9"}[quoted]
    body = {**statement.body, "decision_facts": f'{statement.body["decision_facts"]} "{quote}"'}
    if quoted == "author":  # found in a list in a list as well
        body = {**statement.body, "territorial_scope": [["DE", f"by {quote}"]]}
    TransparencyStatement.objects.filter(pk=statement.pk).update(body=body)

    if quoted == "content":  # the whole text, not a part of it, is what is looked for
        assert statement_violations([review.pk]) == []
        body["illegal_content_explanation"] = f"quoting: {TEXT}"
        TransparencyStatement.objects.filter(pk=statement.pk).update(body=body)
    found(review, "its statement quotes the content, the author's or a reporter's id, or a moderator's reason")


def test_an_overturn_no_approval_made_is_reported(api_client):
    review = decided(api_client, "rejected")
    TransparencyStatement.objects.filter(decision=review.decision).update(overturned_at=timezone.now())

    found(review, "its statement is overturned, but no later approval of its review lifted it")


@pytest.mark.parametrize("action", ["suspend", "ban"])
def test_an_account_restriction_without_its_statement_is_reported(api_client, moderators, action):
    review = authored(api_client, "person-3", "approved", text=TEXT)
    taken = services.author_act(author_pk=review.author_id, moderator=moderators[0], action=action,
                                days=3 if action == "suspend" else None, reason="a private reason")
    assert statement_violations([review.pk]) == []
    TransparencyStatement.objects.filter(account_action=taken).delete()

    found(review, f"action {taken.pk}: a {action} without a statement")


def test_a_warning_with_a_statement_or_an_action_statement_quoting_its_reason_is_reported(api_client, moderators):
    review = authored(api_client, "person-4", "approved", text=TEXT)
    warning = services.author_act(author_pk=review.author_id, moderator=moderators[0], action="warn",
                                  reason="a private reason")
    ban = services.author_act(author_pk=review.author_id, moderator=moderators[0], action="ban",
                              reason="another private reason")
    statement = TransparencyStatement.objects.get(account_action=ban)
    TransparencyStatement.objects.create(account_action=warning, facts={}, body={"puid": str(warning.pk)},
                                         policy=statement.policy, dsa_category="x", automated_decision="x",
                                         source_type="x")
    TransparencyStatement.objects.filter(pk=statement.pk).update(
        body={**statement.body, "decision_facts": "another private reason"})

    found(review, f"action {warning.pk}: a warn with a statement")
    found(review, f"action {ban.pk}: its statement quotes the author's id or the moderator's reason")


def test_the_checker_reads_the_statements_in_two_queries(api_client, moderators, django_assert_num_queries):
    reviews = [authored(api_client, f"person-{i % 3}", label, text=TEXT).pk for i, label in
               enumerate(["rejected", "approved", "rejected", "manual_review"] * 3)]

    with django_assert_num_queries(2):
        assert statement_violations(reviews) == []


def test_the_checker_finds_what_the_decide_path_writes_without_its_guard(api_client, moderators, monkeypatch):
    """Without the guard that a rejection under a restriction in force restricts nothing new, an
    upheld appeal writes a second statement, and the checker names it."""
    from moderation.services import decide, statements

    def unguarded(review, decision, *, decided_before, **kwargs):
        return statements.statement_after_decision_locked(review, decision, decided_before=False, **kwargs)

    monkeypatch.setattr(decide, "statement_after_decision_locked", unguarded)
    review = authored(api_client, "person-1", "rejected", text=TEXT)
    services.appeal_file(review_id=review.pk, appellant_id="person-1", statement="it was fine")
    upheld = services.review_override(review_id=review.pk, label="rejected", reason="the rejection stands firm",
                                      moderator=moderators[0], category="harassment")

    assert TransparencyStatement.objects.filter(review=review).count() == 2
    found(review, f"decision {upheld.pk} (rejected), statement")
    assert any("restricts nothing new" in p for p in violations([review.pk]))
