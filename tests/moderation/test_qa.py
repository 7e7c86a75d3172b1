"""Moderator QA services (docs/qa.md): golden items and second reviews handed out by "Review
next", answers scored and never applied, the time per decision."""

from __future__ import annotations

import pytest

from audit.models import ReviewTransition
from moderation import services
from moderation.errors import ContentErased, FourEyesRequired, InvalidCategory, LeasedToOther, NotApplicable
from moderation.models import (
    Decision,
    DecisionNotification,
    DecisionTime,
    ModeratorNote,
    QaItem,
    QaKind,
    TransparencyStatement,
)
from moderation.privacy.erasure import content_erase
from tests.moderation.qa_helpers import decided_by, golden, qa_rates, waiting


@pytest.fixture
def people(db, django_user_model):
    make = django_user_model.objects.create_user
    return {name: make(name) for name in ("mia", "sam", "lea", "ada")}


def footprint(review):
    """What a QA answer must leave as it was: the review's state and everything a decision writes."""
    review.refresh_from_db()
    return (review.status, review.version, review.decision_id, review.leased_to_id, Decision.objects.count(),
            DecisionNotification.objects.count(), TransparencyStatement.objects.count(),
            ReviewTransition.objects.count(), ModeratorNote.objects.count())


@pytest.mark.django_db
class TestGoldenItems:
    def test_review_next_hands_a_golden_item_at_the_policy_rate_leaving_its_review_untouched(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        real = waiting(api_client)
        qa_rates(golden=1.0)
        before = footprint(item_golden.review)
        handed = services.review_take_next(moderator=people["mia"])
        assert handed.pk == item_golden.review_id
        item = QaItem.objects.get()
        assert (item.kind, item.golden_id, item.moderator, item.answered_at) == (QaKind.GOLDEN, item_golden.pk, people["mia"], None)
        assert footprint(item_golden.review) == before
        real.refresh_from_db()
        assert real.leased_to is None  # the real review still waits for someone

    def test_review_next_gives_back_the_golden_item_a_moderator_holds(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        waiting(api_client)
        qa_rates(golden=1.0)
        assert services.review_take_next(moderator=people["mia"]).pk == item_golden.review_id
        qa_rates(golden=0.0)  # held, it comes back whatever the rate
        assert services.review_take_next(moderator=people["mia"]).pk == item_golden.review_id
        assert QaItem.objects.count() == 1

    def test_at_rate_zero_review_next_hands_out_reviews_only(self, api_client, people):
        golden(api_client, decider=people["sam"], lead=people["lea"])
        real = waiting(api_client)
        qa_rates(golden=0.0)
        assert services.review_take_next(moderator=people["mia"]).pk == real.pk
        assert not QaItem.objects.exists()

    def test_an_answer_as_expected_scores_correct_and_is_not_applied(self, api_client, people,
                                                                     django_capture_on_commit_callbacks):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"], label="rejected", category="harassment")
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        before = footprint(item_golden.review)
        item = QaItem.objects.get()
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            answered = services.qa_answer(item_id=item.pk, moderator=people["mia"], label="rejected",
                                          category="harassment", reason="insult", note="looked twice")
        assert answered.correct is True and answered.agrees is None and answered.seconds >= 0
        assert footprint(item_golden.review) == before
        assert callbacks == []  # no job, no notification delivery: nobody is told

    @pytest.mark.parametrize(("label", "category"), [("approved", ""), ("rejected", "hate")])
    def test_another_label_or_category_scores_wrong(self, api_client, people, label, category):
        golden(api_client, decider=people["sam"], lead=people["lea"], label="rejected", category="harassment")
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        answered = services.qa_answer(item_id=QaItem.objects.get().pk, moderator=people["mia"], label=label,
                                      category=category, reason="because")
        assert answered.correct is False

    def test_an_answer_is_checked_as_a_decision_is(self, api_client, people):
        golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        item = QaItem.objects.get()
        with pytest.raises(InvalidCategory):
            services.qa_answer(item_id=item.pk, moderator=people["mia"], label="rejected", reason="x")
        with pytest.raises(NotApplicable):
            services.qa_answer(item_id=item.pk, moderator=people["mia"], label="manual_review")
        item.refresh_from_db()
        assert item.answered_at is None

    def test_a_moderator_never_gets_the_same_golden_item_twice(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        services.qa_answer(item_id=QaItem.objects.get().pk, moderator=people["mia"], label="approved")
        assert services.review_take_next(moderator=people["mia"]) is None
        assert services.review_take_next(moderator=people["ada"]).pk == item_golden.review_id  # another moderator may
        assert QaItem.objects.filter(golden=item_golden).count() == 2

    def test_a_golden_item_passed_over_is_not_handed_back(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        assert services.review_release(review_id=item_golden.review_id, moderator=people["mia"])
        assert services.review_take_next(moderator=people["mia"]) is None
        item = QaItem.objects.get()
        assert item.skipped_at is not None and item.correct is None

    def test_a_second_answer_to_one_item_is_refused(self, api_client, people):
        golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        services.review_take_next(moderator=people["mia"])
        item = QaItem.objects.get()
        services.qa_answer(item_id=item.pk, moderator=people["mia"], label="approved")
        with pytest.raises(NotApplicable, match="already decided"):
            services.qa_answer(item_id=item.pk, moderator=people["mia"], label="rejected", category="hate", reason="x")
        item.refresh_from_db()
        assert item.label == "approved"

    def test_a_golden_item_goes_neither_to_its_team_lead_nor_to_who_decided_it(self, api_client, people):
        golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        assert services.review_take_next(moderator=people["lea"]) is None
        assert services.review_take_next(moderator=people["sam"]) is None
        assert not QaItem.objects.exists()

    def test_marking_golden_is_refused_for_an_undecided_review_and_twice(self, api_client, people):
        review = waiting(api_client)
        with pytest.raises(NotApplicable, match="only a decided review"):
            services.golden_mark(review_id=review.pk, expected_label="approved", lead=people["lea"])
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        with pytest.raises(NotApplicable, match="already a golden item"):
            services.golden_mark(review_id=item_golden.review_id, expected_label="approved", lead=people["lea"])
        with pytest.raises(InvalidCategory):
            services.golden_mark(review_id=item_golden.review_id, expected_label="rejected", lead=people["lea"])

    def test_erased_content_is_neither_marked_nor_handed_out(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        other = golden(api_client, decider=people["sam"], lead=people["lea"], label="approved")
        qa_rates(golden=1.0)
        for target in (item_golden, other):
            content_erase(review_id=target.review_id, actor="admin", actor_id="lea", reason="GDPR")
        assert services.review_take_next(moderator=people["mia"]) is None
        review = decided_by(api_client, people["sam"]).review
        content_erase(review_id=review.pk, actor="admin", actor_id="lea", reason="GDPR")
        with pytest.raises(ContentErased):
            services.golden_mark(review_id=review.pk, expected_label="rejected", expected_category="harassment",
                                 lead=people["lea"])

    def test_a_golden_review_back_with_a_human_is_decided_for_real_not_handed_out_as_qa(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        services.appeal_file(review_id=item_golden.review_id, appellant_id="u1", statement="a quote")
        qa_rates(golden=1.0)
        assert services.review_take_next(moderator=people["mia"]).pk == item_golden.review_id
        assert not QaItem.objects.exists()
        assert services.qa_item_shown(moderator=people["mia"], review_id=item_golden.review_id) is None

    def test_a_retired_golden_item_is_handed_out_no_more(self, api_client, people):
        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0)
        services.golden_retire(golden_id=item_golden.pk, lead=people["lea"])
        assert services.review_take_next(moderator=people["mia"]) is None


@pytest.mark.django_db
class TestSecondReviews:
    def test_at_the_policy_share_a_decision_gets_a_second_review_waiting_in_its_queue(self, api_client, people):
        qa_rates(double=1.0)
        decision = decided_by(api_client, people["mia"])
        item = QaItem.objects.get()
        assert (item.kind, item.first_decision, item.moderator, item.queue) == (
            QaKind.SECOND_REVIEW, decision, None, decision.review.last_queue)

    def test_at_share_zero_no_decision_gets_one(self, api_client, people):
        qa_rates(double=0.0)
        decided_by(api_client, people["mia"])
        assert not QaItem.objects.exists()

    def test_the_second_review_goes_to_another_moderator_never_the_first(self, api_client, people):
        qa_rates(double=1.0)
        decision = decided_by(api_client, people["mia"])
        assert services.review_take_next(moderator=people["mia"]) is None
        assert services.review_take_next(moderator=people["sam"]).pk == decision.review_id
        assert QaItem.objects.get().moderator == people["sam"]

    def test_a_disagreeing_second_review_is_scored_not_applied_and_waits_for_a_team_lead(self, api_client, people):
        qa_rates(double=1.0)
        decision = decided_by(api_client, people["mia"], label="rejected", category="harassment")
        services.review_take_next(moderator=people["sam"])
        before = footprint(decision.review)
        item = services.qa_answer(item_id=QaItem.objects.get().pk, moderator=people["sam"], label="approved")
        assert item.agrees is False and item.settled_at is None
        assert footprint(decision.review) == before
        settled = services.qa_disagreement_settle(item_id=item.pk, lead=people["lea"], settlement="quote, not insult")
        assert settled.settled_by == people["lea"]
        with pytest.raises(NotApplicable, match="already settled"):
            services.qa_disagreement_settle(item_id=item.pk, lead=people["lea"], settlement="again")

    def test_an_agreeing_second_review_agrees_and_is_not_settled(self, api_client, people):
        qa_rates(double=1.0)
        decided_by(api_client, people["mia"], label="rejected", category="harassment")
        services.review_take_next(moderator=people["sam"])
        item = services.qa_answer(item_id=QaItem.objects.get().pk, moderator=people["sam"], label="rejected",
                                  category="harassment", reason="insult")
        assert item.agrees is True
        with pytest.raises(NotApplicable, match="disagreed"):
            services.qa_disagreement_settle(item_id=item.pk, lead=people["lea"], settlement="fine")

    def test_the_first_decider_may_not_answer_it_and_nobody_else_while_another_holds_it(self, api_client, people):
        qa_rates(double=1.0)
        decided_by(api_client, people["mia"])
        item = QaItem.objects.get()
        QaItem.objects.filter(pk=item.pk).update(moderator=people["mia"])  # as if handed out wrongly
        with pytest.raises(FourEyesRequired):
            services.qa_answer(item_id=item.pk, moderator=people["mia"], label="approved")
        QaItem.objects.filter(pk=item.pk).update(moderator=None)
        services.review_take_next(moderator=people["sam"])
        with pytest.raises(LeasedToOther):
            services.qa_answer(item_id=item.pk, moderator=people["ada"], label="approved")

    def test_a_second_review_passed_over_goes_back_for_another_moderator(self, api_client, people):
        qa_rates(double=1.0)
        decision = decided_by(api_client, people["mia"])
        services.review_take_next(moderator=people["sam"])
        assert services.review_release(review_id=decision.review_id, moderator=people["sam"])
        assert services.review_take_next(moderator=people["ada"]).pk == decision.review_id

    def test_an_undone_decision_takes_its_open_second_review_with_it(self, api_client, people):
        qa_rates(double=1.0)
        review = waiting(api_client)
        services.review_take_next(moderator=people["mia"])
        decision = services.review_override(review_id=review.pk, label="approved", moderator=people["mia"])
        assert QaItem.objects.filter(first_decision=decision).exists()
        review.refresh_from_db()
        services.review_undo(review_id=review.pk, decision_id=decision.pk, moderator=people["mia"],
                             expected_version=review.version)
        assert not QaItem.objects.exists()


@pytest.mark.django_db
class TestTimePerDecision:
    def test_a_decision_on_a_review_leased_by_review_next_records_its_time(self, api_client, people):
        review = waiting(api_client)
        assert services.review_take_next(moderator=people["mia"]).pk == review.pk
        decision = services.review_override(review_id=review.pk, label="approved", moderator=people["mia"])
        timed = DecisionTime.objects.get(decision=decision)
        assert timed.moderator == people["mia"] and 0 <= timed.seconds < 60

    def test_a_decision_without_a_lease_records_no_time(self, api_client, people):
        review = waiting(api_client)
        services.review_override(review_id=review.pk, label="approved", moderator=people["mia"])
        assert not DecisionTime.objects.exists()


@pytest.mark.django_db
class TestChecker:
    def test_the_checker_passes_qa_work_done_right_and_names_what_went_wrong(self, api_client, people):
        from moderation.invariants import qa_violations, violations

        item_golden = golden(api_client, decider=people["sam"], lead=people["lea"])
        qa_rates(golden=1.0, double=1.0)
        services.review_take_next(moderator=people["mia"])
        services.qa_answer(item_id=QaItem.objects.get(golden=item_golden).pk, moderator=people["mia"], label="approved")
        decision = decided_by(api_client, people["ada"])
        services.review_take_next(moderator=people["mia"])
        services.qa_answer(item_id=QaItem.objects.get(first_decision=decision).pk, moderator=people["mia"],
                           label="rejected", category="harassment", reason="same")
        reviews = [item_golden.review_id, decision.review_id]
        assert violations(reviews) == []
        QaItem.objects.filter(golden=item_golden).update(correct=True)  # it was answered wrongly
        QaItem.objects.filter(first_decision=decision).update(moderator=people["ada"])
        found = qa_violations(reviews)
        assert len(found) == 2
        assert "scored correct=True" in found[0] + found[1] and "held by the first decision's moderator" in found[0] + found[1]
