"""A second look at a decided review (moderation/services/second_looks.py, `review_second_look`;
docs/workplace.md, "A second look at a decided review"): a moderator or team lead sends a decided
review to the escalations queue with a reason; the decision stands, and the client hears nothing,
until a senior moderator changes it through the override path (one decision, one notification,
audited) or confirms it (nothing changes, nobody is told). One open second look per review,
however concurrent the requests (real PostgreSQL threads)."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth.models import Group
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.models import ReviewTransition
from moderation import services
from moderation.errors import (
    NotApplicable,
    ReasonRequired,
    SecondLookOpen,
    SecondLookRefused,
)
from moderation.models import ContentReview, Decision, DecisionNotification, ReviewStatus, SecondLook, SecondLookStatus
from moderation.services import moderator as moderator_services
from tests.helpers import collide, decided, staff_browser
from tests.moderation.test_admin_authors import messages_of, text_of
from tests.moderation.test_author_races import Meeting, meeting_before

QUEUES = "/admin/moderation/contentreview/queues/"
PAGE = "/admin/moderation/contentreview/{}/timeline/"
ACT = "/admin/moderation/contentreview/{}/act/{}/"



def told(review) -> list[str]:
    """The client's notifications about the review, in order: their kinds."""
    return list(DecisionNotification.objects.filter(review=review).order_by("id").values_list("kind", flat=True))


@pytest.fixture
def tina(django_user_model):
    return staff_browser(django_user_model, "tina", "team_lead")


@pytest.fixture
def rejected(api_client):
    return decided(api_client, "rejected")


def asked(review, by, reason: str = "Looks like satire to me") -> SecondLook:
    return services.review_second_look(review_id=review.pk, reason=reason, moderator=by.user,
                                       expected_version=ContentReview.objects.get(pk=review.pk).version)


@pytest.mark.django_db
class TestAskingForASecondLook:
    def test_the_decision_stands_and_the_client_hears_nothing(self, rejected, mia):
        before = (rejected.status, rejected.decision_id, rejected.version, told(rejected))
        transitions = ReviewTransition.objects.filter(review=rejected).count()
        sent = mia.post(ACT.format(rejected.pk, "second_look"),
                        {"reason": "Looks like satire to me", "version": rejected.version}, follow=True)
        assert ("Sent for a second look: it waits in the escalations queue for a senior moderator. The decision "
                "stands meanwhile, and the client is told only if it changes.") in messages_of(sent)
        review = ContentReview.objects.get(pk=rejected.pk)
        assert (review.status, review.decision_id, review.version, told(review)) == before
        assert ReviewTransition.objects.filter(review=review).count() == transitions
        look = SecondLook.objects.get()
        assert (look.status, look.reason, look.requested_by, look.decision_id) == (
            SecondLookStatus.OPEN, "Looks like satire to me", mia.user, rejected.decision_id)
        page = text_of(sent)
        assert "Sent for a second look by mia" in page and "The decision stands" in page
        assert "second look asked by mia" in page  # the timeline records it (internal, like a note)

    def test_it_waits_in_the_escalations_queue_with_the_decision_and_the_reason(self, rejected, mia, tina):
        asked(rejected, mia)
        page = tina.get(QUEUES + "?queue=escalations").content.decode()
        listed = page.split('id="second-looks"')[1].split("</table>")[0]
        assert rejected.short_id in listed and "Looks like satire to me" in listed and "mia" in listed
        assert "Rejected by the model" in unescape(listed)
        assert "+ 1 decided review for a second look" in page

    def test_a_reason_is_required(self, rejected, mia):
        with pytest.raises(ReasonRequired):
            services.review_second_look(review_id=rejected.pk, reason="  ", moderator=mia.user)
        refused = mia.post(ACT.format(rejected.pk, "second_look"), {"reason": "", "version": rejected.version},
                           follow=True)
        assert "Not sent for a second look: reason" in messages_of(refused)
        assert not SecondLook.objects.exists()

    def test_a_review_waiting_for_a_human_is_decided_not_looked_at_again(self, api_client, mia):
        waiting = decided(api_client, "manual_review")
        with pytest.raises(NotApplicable, match="waiting for a human, not decided"):
            services.review_second_look(review_id=waiting.pk, reason="why", moderator=mia.user)
        assert 'id="second-look-form"' not in mia.get(PAGE.format(waiting.pk)).content.decode()

    def test_a_second_request_while_one_is_open_is_refused_in_words(self, rejected, mia, tina):
        asked(rejected, mia)
        with pytest.raises(SecondLookOpen, match="mia already asked for a second look"):
            asked(rejected, tina)
        assert SecondLook.objects.count() == 1

    def test_a_stale_page_is_refused(self, rejected, mia, sam):
        services.review_override(review_id=rejected.pk, label="approved", reason="fine", moderator=sam.user)
        refused = mia.post(ACT.format(rejected.pk, "second_look"), {"reason": "hm", "version": rejected.version},
                           follow=True)
        assert "Nothing was applied" in messages_of(refused) and not SecondLook.objects.exists()

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(reason=st.text(min_size=1, max_size=400).filter(lambda s: s.strip() and "\x00" not in s))
    def test_any_unicode_reason_is_kept_and_shown_escaped(self, api_client, mia, tina, reason):
        review = decided(api_client, "rejected")
        look = asked(review, mia, reason)
        assert look.reason == reason.strip()
        shown = tina.get(PAGE.format(review.pk)).content.decode().split('id="second-look-state">')[1].split("</p>")[0]
        assert "<script" not in shown
        assert unescape(shown.replace("<br>", "")).replace("\n", "").find(
            reason.strip().replace("\r\n", "\n").replace("\r", "\n").replace("\n", "")) >= 0


@pytest.mark.django_db
class TestSettlingIt:
    def test_a_senior_changes_the_decision_through_the_override_path_and_the_client_is_told_once(
        self, rejected, mia, tina
    ):
        asked(rejected, mia)
        before = told(rejected)
        page = tina.get(PAGE.format(rejected.pk)).content.decode()
        assert 'id="decide-form"' in page and 'id="confirm-form"' in page
        changed = tina.post(ACT.format(rejected.pk, "override"),
                            {"label": "approved", "reason": "satire, clearly", "version": rejected.version},
                            follow=True)
        assert "Approved." in messages_of(changed)
        assert "The second look is closed with this decision, and the client is told of it." in messages_of(changed)
        review = ContentReview.objects.get(pk=rejected.pk)
        assert review.status == ReviewStatus.APPROVED and review.decision.moderator == tina.user
        assert told(review) == [*before, told(review)[-1]] and len(told(review)) == len(before) + 1
        look = SecondLook.objects.get()
        assert (look.status, look.resolved_by, look.resolution_id) == (SecondLookStatus.CHANGED, tina.user,
                                                                      review.decision_id)
        transition = ReviewTransition.objects.filter(review=review).order_by("-id").first()
        assert (transition.from_status, transition.to_status, transition.cause, transition.actor_id) == (
            "rejected", "approved", "manual_override", "tina")
        assert review.history.order_by("-history_id").first().history_user == tina.user

    def test_a_senior_confirms_it_and_nothing_changes_and_nobody_is_told(self, rejected, mia, sam):
        asked(rejected, mia)
        before = (rejected.status, rejected.decision_id, rejected.version, told(rejected))
        decisions = Decision.objects.filter(review=rejected).count()
        confirmed = sam.post(ACT.format(rejected.pk, "confirm_second_look"), {"reason": "a threat, not satire"},
                             follow=True)
        assert ("Decision confirmed: the second look is closed. Nothing changed, and the client is not told."
                in messages_of(confirmed))
        review = ContentReview.objects.get(pk=rejected.pk)
        assert (review.status, review.decision_id, review.version, told(review)) == before
        assert Decision.objects.filter(review=review).count() == decisions
        look = SecondLook.objects.get()
        assert (look.status, look.resolved_by, look.resolution_reason, look.resolution_id) == (
            SecondLookStatus.CONFIRMED, sam.user, "a threat, not satire", None)
        assert "Confirmed: the decision stands: asked by mia" in text_of(confirmed)

    def test_a_moderator_who_is_not_senior_may_not_change_it_and_the_page_says_why(self, rejected, tina, mia):
        asked(rejected, tina)
        page = mia.get(PAGE.format(rejected.pk))
        assert 'id="decide-form"' not in page.content.decode() and 'id="confirm-form"' not in page.content.decode()
        assert ("Tina asked a senior moderator for a second look at this decision: it stands until a senior "
                "moderator changes or confirms it.") in text_of(page)
        with pytest.raises(SecondLookOpen):
            services.review_override(review_id=rejected.pk, label="approved", reason="fine", moderator=mia.user)
        with pytest.raises(SecondLookOpen):
            services.second_look_confirm(review_id=rejected.pk, moderator=mia.user, reason="fine")
        refused = mia.post(ACT.format(rejected.pk, "confirm_second_look"), {"reason": "fine"})
        assert refused.status_code == 403
        assert ContentReview.objects.get(pk=rejected.pk).status == ReviewStatus.REJECTED
        assert SecondLook.objects.get().is_open

    def test_who_asked_and_who_made_the_decision_may_not_settle_it(self, api_client, mia, tina, sam):
        waiting = decided(api_client, "manual_review")
        services.review_override(review_id=waiting.pk, label="rejected", category="harassment", reason="insult",
                                 moderator=sam.user)
        asked(waiting, tina)
        with pytest.raises(SecondLookRefused, match="you asked for this second look"):
            services.second_look_confirm(review_id=waiting.pk, moderator=tina.user, reason="stands")
        with pytest.raises(SecondLookRefused, match="you made the decision sent for a second look"):
            services.review_override(review_id=waiting.pk, label="approved", reason="mine", moderator=sam.user)
        assert "you asked for this second look: another senior moderator settles it" in text_of(
            tina.get(PAGE.format(waiting.pk))).lower()
        assert SecondLook.objects.get().is_open

    def test_undo_and_reprocess_are_refused_while_it_is_open(self, api_client, mia, tina, sam):
        waiting = decided(api_client, "manual_review")
        decision = services.review_override(review_id=waiting.pk, label="rejected", category="harassment",
                                            reason="insult", moderator=mia.user)
        asked(waiting, tina)
        version = ContentReview.objects.get(pk=waiting.pk).version
        with pytest.raises(SecondLookOpen, match="cannot be undone"):
            services.review_undo(review_id=waiting.pk, decision_id=decision.pk, moderator=mia.user,
                                 expected_version=version)
        with pytest.raises(SecondLookOpen, match="cannot be reprocessed"):
            services.review_reprocess(review_id=waiting.pk, actor="admin", actor_id="sam", user=sam.user)
        assert ContentReview.objects.get(pk=waiting.pk).status == ReviewStatus.REJECTED

    def test_once_settled_a_new_second_look_may_be_asked(self, rejected, mia, sam):
        asked(rejected, mia)
        services.second_look_confirm(review_id=rejected.pk, moderator=sam.user, reason="stands")
        asked(rejected, mia, "new facts from the reporter")
        assert list(SecondLook.objects.order_by("id").values_list("status", flat=True)) == ["confirmed", "open"]


@pytest.mark.django_db
def test_a_moderator_who_may_not_see_the_review_never_sees_its_second_look_counts_included(
    api_client, django_user_model
):
    group = Group.objects.create(name="senior-safety")
    services.review_queue_save(queue_id=None, slug="low_confidence", name="", description="", groups=[group])
    member = staff_browser(django_user_model, "ina", "team_lead")
    member.user.groups.add(group)
    outsider = staff_browser(django_user_model, "mia", "team_lead")
    waiting = decided(api_client, "manual_review")  # waits in low_confidence: the group's
    services.review_override(review_id=waiting.pk, label="rejected", category="harassment", reason="insult",
                             moderator=member.user)
    services.review_second_look(review_id=waiting.pk, reason="a secret reason", moderator=member.user)

    seen = {name: browser.get(QUEUES + "?queue=escalations").content.decode()
            for name, browser in (("member", member), ("outsider", outsider))}
    assert waiting.short_id in seen["member"] and "+ 1 decided review for a second look" in seen["member"]
    assert waiting.short_id not in seen["outsider"] and "a secret reason" not in seen["outsider"]
    assert "second look" not in seen["outsider"].split('id="queue-summary"')[1].split("</table>")[0]
    assert "No decided review waits for a second look." in seen["outsider"]
    assert outsider.get(PAGE.format(waiting.pk)).status_code == 404


# --- concurrent requests and decisions --------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_five_concurrent_requests_for_a_second_look_open_exactly_one(api_client, django_user_model, monkeypatch):
    """Five moderators ask at once. The review's row lock serialises them: the first opens it, the
    others find it open (SecondLookOpen, in words). The meeting holds each asker just before the
    "already open?" check until the others arrive: without the lock all five would pass the check
    together and insert (the partial unique index would then fail four with an IntegrityError)."""
    review = decided(api_client, "rejected")
    moderators = [staff_browser(django_user_model, f"mod{i}", "moderator").user for i in range(5)]
    meeting_before(monkeypatch, moderator_services, "second_look_open_locked", Meeting(5))

    results = collide(5, lambda i: services.review_second_look(review_id=review.pk, reason=f"look {i}",
                                                               moderator=moderators[i]), expect=SecondLookOpen)

    opened = [r for r in results if isinstance(r, SecondLook)]
    refused = [r for r in results if isinstance(r, SecondLookOpen)]
    assert len(opened) == 1 and len(refused) == 4
    assert SecondLook.objects.filter(review=review, status=SecondLookStatus.OPEN).count() == 1
    assert all("already asked for a second look" in r.reason for r in refused)
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.REJECTED


@pytest.mark.django_db(transaction=True)
def test_two_seniors_settling_at_once_one_wins_and_the_client_is_told_at_most_once(api_client, django_user_model):
    """One senior confirms while another changes the decision, at once: one wins; the client is
    told once if the change won, never if the confirmation did."""
    review = decided(api_client, "rejected")
    mia = staff_browser(django_user_model, "mia", "moderator").user
    seniors = [staff_browser(django_user_model, name, "supervisor").user for name in ("sam", "tom")]
    services.review_second_look(review_id=review.pk, reason="satire?", moderator=mia)
    before = told(review)

    def settle(i):
        if i == 0:
            return services.second_look_confirm(review_id=review.pk, moderator=seniors[0], reason="stands")
        return services.review_override(review_id=review.pk, label="approved", reason="satire", moderator=seniors[1])

    results = collide(2, settle, expect=(NotApplicable, SecondLookRefused, SecondLookOpen))
    look = SecondLook.objects.get()
    assert look.status in (SecondLookStatus.CONFIRMED, SecondLookStatus.CHANGED)
    review.refresh_from_db()
    if look.status == SecondLookStatus.CONFIRMED:
        # The change came second: an override of a decided review is still the override path; a
        # senior deciding after the confirmation changes the decision as any later override would.
        assert isinstance(results[0], SecondLook)
        assert len(told(review)) - len(before) == (1 if isinstance(results[1], Decision) else 0)
    else:
        assert isinstance(results[0], NotApplicable) and isinstance(results[1], Decision)
        assert review.status == ReviewStatus.APPROVED and len(told(review)) == len(before) + 1
