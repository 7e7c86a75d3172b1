"""Moderator QA in the admin (docs/qa.md): QA work is blind on the review page, a team lead marks
golden items, and the QA page shows each role what it may see, with Cohen's kappa right on a
worked example."""

from __future__ import annotations

import random
import re

import pytest
from django.urls import reverse
from django.utils.html import escape
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from moderation import services
from moderation.models import GoldenItem, QaItem
from moderation.observability.qa import category_kappa, cohen_kappa
from tests.helpers import examples, staff_browser
from tests.moderation.qa_helpers import decided_by, golden, qa_rates, waiting

QA_PAGE = "admin:moderation_qaitem_changelist"


def page_url(review_id) -> str:
    return reverse("admin:moderation_contentreview_timeline", args=[review_id])


def take_next(browser) -> str:
    response = browser.post(reverse("admin:moderation_contentreview_next"))
    assert response.status_code == 302
    return response["Location"]


def sections(html: str) -> set[str]:
    """The ids of the review page's parts: what a moderator sees the page made of."""
    return set(re.findall(r'id="((?:decide|skip|review|scores|notes|timeline|golden|note)[-\w]*)"', html))


@pytest.fixture
def roles(db, django_user_model):
    return {"mia": staff_browser(django_user_model, "mia", "moderator"),
            "sam": staff_browser(django_user_model, "sam", "moderator"),
            "lea": staff_browser(django_user_model, "lea", "team_lead"),
            "ada": staff_browser(django_user_model, "ada", "auditor"),
            "bob": staff_browser(django_user_model, "bob", None)}


@pytest.mark.django_db
class TestBlindReviewPage:
    def test_a_golden_item_looks_like_a_waiting_review_and_its_answer_is_scored_not_applied(self, api_client, roles):
        mia, sam, lea = roles["mia"], roles["sam"], roles["lea"]
        item_golden = golden(api_client, decider=sam.user, lead=lea.user)
        qa_rates(golden=1.0)
        assert take_next(mia) == page_url(item_golden.review_id)
        response = mia.post(reverse("admin:moderation_contentreview_note", args=[item_golden.review_id]),
                            {"text": "a note on it"})
        assert response.status_code == 302 and not item_golden.review.notes.exists()
        blind = mia.get(page_url(item_golden.review_id)).content.decode()
        real_review = waiting(api_client)
        assert take_next(sam) == page_url(real_review.pk)  # sam decided the golden item: a review for him
        services.review_note_add(review_id=real_review.pk, author=sam.user, text="a note on it")
        real = sam.get(page_url(real_review.pk)).content.decode()
        assert sections(blind) == sections(real)  # the same page, part for part
        assert "Waiting for a human" in blind and "a note on it" in blind
        for tell in ("olden", "the golden reason", "moderator sam", "Rejected as harassment"):
            assert tell not in blind
        status = item_golden.review.status
        response = mia.post(reverse("admin:moderation_contentreview_act", args=[item_golden.review_id, "override"]),
                            {"label": "rejected", "category": "harassment", "reason": "an insult", "version": 1})
        assert response.status_code == 302
        item = QaItem.objects.get()
        assert (item.label, item.correct) == ("rejected", True)
        item_golden.review.refresh_from_db()
        assert item_golden.review.status == status and item_golden.review.decisions.count() == 2
        after = mia.get(page_url(item_golden.review_id)).content.decode()
        assert "Rejected as harassment by moderator mia" in after and "the golden reason" not in after

    def test_a_refused_answer_shows_the_blind_page_again_as_posted(self, api_client, roles):
        item_golden = golden(api_client, decider=roles["sam"].user, lead=roles["lea"].user)
        qa_rates(golden=1.0)
        take_next(roles["mia"])
        response = roles["mia"].post(reverse("admin:moderation_contentreview_act", args=[item_golden.review_id, "override"]),
                                     {"label": "rejected", "reason": "no category", "version": 1})
        html = response.content.decode()
        assert response.status_code == 400 and "no category" in html and "the golden reason" not in html
        assert QaItem.objects.get().answered_at is None

    def test_a_second_review_does_not_show_the_first_decision(self, api_client, roles):
        qa_rates(double=1.0)
        decision = decided_by(api_client, roles["mia"].user, reason="first-decider-words")
        assert take_next(roles["sam"]) == page_url(decision.review_id)
        html = roles["sam"].get(page_url(decision.review_id)).content.decode()
        assert 'id="decide-form"' in html and "Waiting for a human" in html
        assert "first-decider-words" not in html and "moderator mia" not in html
        # The first decider, and everyone else, still see the review as it is.
        assert "first-decider-words" in roles["mia"].get(page_url(decision.review_id)).content.decode()

    def test_the_page_survives_arbitrary_unicode_in_the_answer(self, api_client, roles):
        item_golden = golden(api_client, decider=roles["sam"].user, lead=roles["lea"].user)
        qa_rates(golden=1.0)
        take_next(roles["mia"])
        words = "\u202eesrever id\u200biot 👩‍💻 \U000e0068 ̷"
        roles["mia"].post(reverse("admin:moderation_contentreview_act", args=[item_golden.review_id, "override"]),
                          {"label": "rejected", "category": "hate", "reason": words, "note": words, "version": 1})
        assert roles["mia"].get(page_url(item_golden.review_id)).status_code == 200
        assert QaItem.objects.get().correct is False


@pytest.mark.django_db
class TestGoldenForm:
    def test_a_team_lead_marks_a_decided_review_golden_from_its_page(self, api_client, roles):
        decision = decided_by(api_client, roles["sam"].user, label="rejected", category="hate")
        html = roles["lea"].get(page_url(decision.review_id)).content.decode()
        assert 'id="golden-form"' in html
        response = roles["lea"].post(reverse("admin:moderation_contentreview_golden", args=[decision.review_id]),
                                     {"expected_label": "rejected", "expected_category": "hate"})
        assert response.status_code == 302
        assert GoldenItem.objects.get().expected_category == "hate"
        assert 'id="golden-state"' in roles["lea"].get(page_url(decision.review_id)).content.decode()

    @pytest.mark.parametrize("who", ["mia", "ada"])
    def test_a_moderator_or_an_auditor_may_not(self, api_client, roles, who):
        decision = decided_by(api_client, roles["sam"].user)
        assert 'id="golden-form"' not in roles[who].get(page_url(decision.review_id)).content.decode()
        response = roles[who].post(reverse("admin:moderation_contentreview_golden", args=[decision.review_id]),
                                   {"expected_label": "approved"})
        assert response.status_code == 403 and not GoldenItem.objects.exists()


def answered_pairs(api_client, first, second, pairs) -> None:
    """Second reviews answered: `first` decides each review, `second` reviews it again."""
    qa_rates(double=1.0)
    for (label1, category1), (label2, category2) in pairs:
        decision = decided_by(api_client, first, label=label1, category=category1)
        assert services.review_take_next(moderator=second).pk == decision.review_id
        services.qa_answer(item_id=QaItem.objects.get(first_decision=decision).pk, moderator=second, label=label2,
                           category=category2, reason="second look")


HATE, OK = ("rejected", "hate"), ("approved", "")
# The textbook example: 50 items, both say yes 20, only the first 5, only the second 10, both no
# 15. p_o = 35/50 = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5: kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
WORKED = [(HATE, HATE)] * 20 + [(HATE, OK)] * 5 + [(OK, HATE)] * 10 + [(OK, OK)] * 15


def row(html: str, table: str, *cells: str) -> str:
    """The row of table `table` whose cells start with `cells` (after the week)."""
    body = re.search(rf'<table id="{table}">(.*?)</table>', html, re.S).group(1)
    for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        texts = [re.sub(r"<[^>]+>", "", td).strip() for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if texts[1:1 + len(cells)] == list(cells):
            return " | ".join(texts)
    raise AssertionError(f"no row {cells} in {table}: {body}")


@pytest.mark.django_db
class TestQaPage:
    def test_the_page_shows_the_worked_examples_kappa(self, api_client, roles):
        answered_pairs(api_client, roles["mia"].user, roles["sam"].user, WORKED)
        html = roles["lea"].get(reverse(QA_PAGE)).content.decode()
        assert row(html, "qa-kappa", "hate", "50", "20").endswith("| 0.400")
        assert row(html, "qa-kappa-moderators", "sam", "50", "35").endswith("| 0.700 | 0.400")

    def test_a_moderator_sees_only_their_own_figures(self, api_client, roles, django_user_model):
        ben = django_user_model.objects.create_user("ben")
        answered_pairs(api_client, roles["sam"].user, ben, [(HATE, OK)])
        qa_rates(golden=1.0)
        item_golden = golden(api_client, decider=ben, lead=roles["lea"].user)
        services.review_take_next(moderator=roles["mia"].user)
        services.qa_answer(item_id=QaItem.objects.get(golden=item_golden).pk, moderator=roles["mia"].user,
                           label="approved")
        html = roles["mia"].get(reverse(QA_PAGE)).content.decode()
        assert row(html, "qa-golden", "mia", "harassment", "1", "0")
        assert ">sam<" not in html and ">ben<" not in html and 'id="qa-disagreements"' not in html
        # A name in the query changes nothing for a moderator.
        assert ">ben<" not in roles["mia"].get(reverse(QA_PAGE), {"moderator": "ben"}).content.decode()

    def test_a_team_lead_sees_everyone_and_settles_a_disagreement(self, api_client, roles):
        answered_pairs(api_client, roles["mia"].user, roles["sam"].user, [(HATE, OK), (OK, OK)])
        html = roles["lea"].get(reverse(QA_PAGE)).content.decode()
        assert row(html, "qa-kappa-moderators", "mia", "2", "1")
        assert row(html, "qa-kappa-moderators", "sam", "2", "1")
        disagreement = QaItem.objects.get(agrees=False)
        assert 'action="{}"'.format(reverse("admin:moderation_qaitem_settle", args=[disagreement.pk])) in html
        response = roles["lea"].post(reverse("admin:moderation_qaitem_settle", args=[disagreement.pk]),
                                     {"settlement": "a quote: the first was right"})
        assert response.status_code == 302
        disagreement.refresh_from_db()
        assert disagreement.settled_by == roles["lea"].user
        only_mia = roles["lea"].get(reverse(QA_PAGE), {"moderator": "mia"}).content.decode()
        assert row(only_mia, "qa-kappa-moderators", "mia", "2", "1") and ">sam</td><td class=\"figure\">" not in only_mia

    def test_an_auditor_reads_everyone_and_changes_nothing(self, api_client, roles):
        answered_pairs(api_client, roles["mia"].user, roles["sam"].user, [(HATE, OK)])
        html = roles["ada"].get(reverse(QA_PAGE)).content.decode()
        assert row(html, "qa-kappa-moderators", "mia", "1", "0") and 'id="qa-disagreements"' in html
        assert "Settle</button>" not in html
        item = QaItem.objects.get()
        assert roles["ada"].post(reverse("admin:moderation_qaitem_settle", args=[item.pk]),
                                 {"settlement": "no"}).status_code == 403
        item.refresh_from_db()
        assert item.settled_at is None

    def test_staff_without_a_role_may_not_open_it(self, roles):
        assert roles["bob"].get(reverse(QA_PAGE)).status_code == 403

    def test_overturns_and_decision_times_are_shown_by_moderator(self, api_client, roles):
        review = waiting(api_client)
        assert services.review_take_next(moderator=roles["mia"].user).pk == review.pk
        services.review_override(review_id=review.pk, label="rejected", category="hate", reason="slur",
                                 moderator=roles["mia"].user)
        services.appeal_file(review_id=review.pk, appellant_id="u1", statement="a quote")
        services.review_override(review_id=review.pk, label="approved", reason="it was a quote",
                                 moderator=roles["sam"].user)
        html = roles["lea"].get(reverse(QA_PAGE)).content.decode()
        assert row(html, "qa-overturns", "mia", "hate", "1", "1").endswith("| 1.000")
        assert row(html, "qa-times", "mia", "1")

    def test_bad_filters_are_refused_in_words(self, roles):
        response = roles["lea"].get(reverse(QA_PAGE), {"weeks": "0", "moderator": "\u202e" * 3})
        assert response.status_code == 200 and "Ensure this value is greater than or equal to 1" in response.content.decode()


class TestKappa:
    def test_the_worked_example_is_0_4(self):
        pairs = [("hate" if a == HATE else "ok", "hate" if b == HATE else "ok") for a, b in WORKED]
        assert cohen_kappa(pairs) == pytest.approx(0.4)
        assert category_kappa([(f"{a[0]}:{a[1]}" if a == HATE else "approved", f"{b[0]}:{b[1]}" if b == HATE
                                else "approved") for a, b in WORKED], "hate") == pytest.approx(0.4)

    def test_perfect_agreement_is_1_and_one_shared_label_is_undefined(self):
        assert cohen_kappa([("a", "a"), ("b", "b")]) == 1.0
        assert cohen_kappa([("a", "a"), ("a", "a")]) is None
        assert cohen_kappa([]) is None

    def test_it_agrees_with_scikit_learn(self):
        sklearn = pytest.importorskip("sklearn.metrics")
        rng = random.Random(48)
        for _ in range(50):
            labels = ["approved", "rejected:hate", "rejected:spam"][:rng.randint(2, 3)]
            pairs = [(rng.choice(labels), rng.choice(labels)) for _ in range(rng.randint(2, 40))]
            ours = cohen_kappa(pairs)
            if ours is not None:
                assert ours == pytest.approx(sklearn.cohen_kappa_score(*zip(*pairs, strict=True)))


@pytest.mark.django_db
@hypothesis_settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.text(max_size=300))
def test_any_words_of_a_second_review_show_escaped_on_the_qa_page(api_client, roles, words):
    qa_rates(double=1.0)
    decision = decided_by(api_client, roles["mia"].user)
    assert take_next(roles["sam"]) == page_url(decision.review_id)
    response = roles["sam"].post(reverse("admin:moderation_contentreview_act", args=[decision.review_id, "override"]),
                                 {"label": "approved", "reason": words, "version": 1})
    item = QaItem.objects.get(first_decision=decision)
    assert response.status_code == (302 if item.answered_at else 400)
    page = roles["lea"].get(reverse(QA_PAGE))
    assert page.status_code == 200
    if item.answered_at is not None and item.reason:
        assert escape(item.reason) in page.content.decode()
    QaItem.objects.filter(pk=item.pk).update(skipped_at=decision.created_at)  # out of the next example's way
