"""Moderator QA under real PostgreSQL concurrency (docs/design.md, invariant 21; docs/qa.md):
threads on their own connections, released together, against the row locks and constraints
that keep a golden item once per moderator and a second review away from the first decider.
Each test was run with its guard taken out and failed then."""

from __future__ import annotations

import pytest

from moderation import services
from moderation.errors import NotApplicable
from moderation.models import GoldenItem, QaItem
from tests.helpers import collide, reads_wait_for_each_other
from tests.moderation.qa_helpers import decided_by, golden, qa_rates

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def people(django_user_model):
    make = django_user_model.objects.create_user
    return {name: make(name) for name in ("mia", "sam", "lea", "ada")}


def test_one_moderator_asking_twice_at_once_gets_a_golden_item_once(api_client, people, monkeypatch):
    """Guard: the unique constraint qa_golden_once_per_moderator arbitrating the INSERT. Both
    requests read the golden item as not yet had (each waits until the other has read it)."""
    item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
    qa_rates(golden=1.0)
    reads_wait_for_each_other(monkeypatch, GoldenItem, 2)
    handed = collide(2, lambda i: services.review_take_next(moderator=people["mia"]))
    assert QaItem.objects.filter(golden=item_golden, moderator=people["mia"]).count() == 1
    assert [review.pk for review in handed if review is not None] == [item_golden.review_id]


def test_two_answers_at_once_to_one_golden_item_leave_one_answer(api_client, people, monkeypatch):
    """Guard: the answer's row lock on the item, and its "already decided" check under it. Both
    answers load the item before either writes, unless the lock makes the second wait."""
    golden(api_client, decider=people["sam"], lead=people["lea"])
    qa_rates(golden=1.0)
    services.review_take_next(moderator=people["mia"])
    item = QaItem.objects.get()
    reads_wait_for_each_other(monkeypatch, QaItem, 2)
    answers = [{"label": "approved"}, {"label": "rejected", "category": "hate", "reason": "slur"}]
    outcomes = collide(2, lambda i: services.qa_answer(item_id=item.pk, moderator=people["mia"], **answers[i]),
                       expect=NotApplicable)
    accepted = [o for o in outcomes if isinstance(o, QaItem)]
    assert len(accepted) == 1
    assert [str(o) for o in outcomes if isinstance(o, NotApplicable)] == ["already decided"]
    item.refresh_from_db()
    assert item.label == accepted[0].label


def test_a_second_review_never_goes_to_the_first_decider_however_they_race(api_client, people):
    """Guard: the first decider left out in the locking SELECT of "Review next". Each round, the
    first decider asks from three tabs at once with one other moderator: the other gets it."""
    qa_rates(double=1.0)
    for _ in range(4):
        decision = decided_by(api_client, people["mia"])
        askers = [people["mia"], people["mia"], people["mia"], people["sam"]]
        handed = collide(4, lambda i: services.review_take_next(moderator=askers[i]))
        assert [review and review.pk for review in handed[:3]] == [None, None, None]
        assert handed[3].pk == decision.review_id
        assert QaItem.objects.get(first_decision=decision).moderator == people["sam"]
        services.qa_answer(item_id=QaItem.objects.get(first_decision=decision).pk, moderator=people["sam"],
                           label="rejected", category="harassment", reason="agreed")


def test_two_moderators_asking_at_once_never_share_a_second_review(api_client, people, monkeypatch):
    """Guard: the row lock with SKIP LOCKED on the second review "Review next" leases. Both
    would read it free before either leases it, unless the lock keeps the second away."""
    qa_rates(double=1.0)
    decision = decided_by(api_client, people["mia"])
    reads_wait_for_each_other(monkeypatch, QaItem, 2)
    askers = [people["sam"], people["ada"]]
    handed = collide(2, lambda i: services.review_take_next(moderator=askers[i]))
    got = [askers[i] for i, review in enumerate(handed) if review is not None]
    assert len(got) == 1 and handed[askers.index(got[0])].pk == decision.review_id
    assert QaItem.objects.get().moderator == got[0]
