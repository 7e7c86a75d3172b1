"""Account appeals in the workplace (moderation/admin/account_appeals.py; docs/workplace.md,
"Account appeals"): their own queue, one page with the appeal, the action, its strikes and the
content behind them, the decision under four eyes through `account_appeal_resolve`, the client
told, queue access respected, and two moderators deciding at once (real PostgreSQL threads)."""

from __future__ import annotations

import json
import uuid
from html import unescape

import pytest
from django.contrib.auth.models import Group
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.errors import FourEyesRequired, NotApplicable
from moderation.models import (
    AccountAppeal,
    ActionCause,
    Author,
    ContentReview,
    DecisionNotification,
    NotificationKind,
    ReviewStatus,
    Standing,
    StandingTransition,
)
from moderation.services import account_appeals
from tests.helpers import collide, staff_browser
from tests.moderation.test_admin_authors import authored, messages_of, text_of
from tests.moderation.test_author_races import Meeting, meeting_before

QUEUE = "/admin/moderation/accountappeal/"
PAGE = QUEUE + "{}/change/"
DECIDE = QUEUE + "{}/decide/"



def suspended_by_the_ladder(client, author_id: str = "u1", *, statement: str = "I was quoting a film") -> AccountAppeal:
    """Five rejections of the author's content by the model: the ladder warns at 3 points and
    suspends at 5; the author appeals the suspension."""
    for _ in range(5):
        authored(client, author_id, "rejected")
    author = Author.objects.get(client=client, author_id=author_id)
    assert author.standing == Standing.SUSPENDED and author.restriction.cause == ActionCause.STRIKES
    return services.account_appeal_file(client=client, author_id=author_id, statement=statement)


def banned_by(moderator, client, author_id: str = "u2", statement: str = "not a spammer") -> AccountAppeal:
    authored(client, author_id, "approved")
    author = Author.objects.get(client=client, author_id=author_id)
    services.author_act(author_pk=author.pk, moderator=moderator, action="ban", reason="a spam ring", days=None,
                        expected_version=author.version)
    return services.account_appeal_file(client=client, author_id=author_id, statement=statement)


def appeal_told(appeal) -> list[dict]:
    return [json.loads(n.payload) for n in DecisionNotification.objects.filter(
        kind=NotificationKind.ACCOUNT_APPEAL_RESOLVED, account_appeal=appeal)]


@pytest.mark.django_db
class TestTheQueueAndThePage:
    def test_the_queue_lists_open_appeals_longest_waiting_first_and_the_decided_ones_on_request(
        self, api_client, mia, sam
    ):
        first = suspended_by_the_ladder(api_client, "u1")
        second = banned_by(sam.user, api_client, "u2")
        services.account_appeal_resolve(appeal_id=first.pk, moderator=mia.user, outcome="upheld", reason="it stands")
        third = suspended_by_the_ladder(api_client, "u3")

        listed = mia.get(QUEUE).content.decode()
        assert listed.index(str(second.pk)) < listed.index(str(third.pk)) and str(first.pk) not in listed
        assert "Ban with no end, taken by moderator sam" in unescape(listed)
        assert "Suspension until" in listed and "taken by the enforcement ladder (5 strike points)" in listed
        everything = mia.get(QUEUE + "?status=all").content.decode()
        assert all(str(a.pk) in everything for a in (first, second, third))
        assert str(first.pk) in mia.get(QUEUE + "?status=upheld").content.decode()

    def test_the_page_shows_the_appeal_the_action_its_strikes_and_the_content_behind_them(self, api_client, mia):
        appeal = suspended_by_the_ladder(api_client, statement="Those were quotes from a film review")
        page = mia.get(PAGE.format(appeal.pk))
        assert page.status_code == 200
        text = text_of(page)
        assert "Those were quotes from a film review" in text
        assert "taken by the enforcement ladder (5 strike points)" in text and "It is in force." in text
        strikes = page.content.decode().split('id="appeal-strikes"')[1].split("</table>")[0]
        reviews = ContentReview.objects.filter(author__author_id="u1")
        assert all(review.short_id in strikes for review in reviews) and strikes.count("a sentence") == 5
        assert "Rejected by the model, top score 0.95" in unescape(strikes)
        assert 'id="appeal-decide"' in page.content.decode()
        assert "The enforcement ladder took this action: any moderator may decide." in text

    def test_an_unknown_or_malformed_appeal_is_not_found(self, mia):
        assert mia.get(PAGE.format(uuid.uuid4())).status_code == 404
        assert mia.get(PAGE.format("not-a-uuid")).status_code in (302, 404)  # the admin's own answer to a bad id

    def test_the_author_page_links_each_appeal_to_its_page(self, api_client, mia):
        appeal = suspended_by_the_ladder(api_client)
        author = Author.objects.get(author_id="u1")
        assert f'href="{PAGE.format(appeal.pk)}"' in mia.get(f"/admin/moderation/author/{author.pk}/change/").content.decode()

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(statement=st.text(min_size=1, max_size=300).filter(lambda s: s.strip() and "\x00" not in s))
    def test_any_unicode_statement_is_shown_escaped(self, api_client, mia, sam, statement):
        appeal = banned_by(sam.user, api_client, uuid.uuid4().hex, statement=statement)
        page = mia.get(PAGE.format(appeal.pk))
        assert page.status_code == 200
        shown = page.content.decode().split('id="appeal-statement">')[1].split("</div>")[0]
        assert "<" not in shown.replace("<br>", "")  # every character the author wrote is escaped
        assert unescape(shown.replace("<br>", "")).replace("\n", "") == statement.replace("\r\n", "\n").replace(
            "\r", "\n").replace("\n", "")


@pytest.mark.django_db
class TestDecidingUnderFourEyes:
    def test_the_moderator_who_took_the_action_sees_why_and_is_refused(self, api_client, mia, sam):
        appeal = banned_by(mia.user, api_client)
        page = mia.get(PAGE.format(appeal.pk))
        assert "You took this action, so another moderator must decide its appeal (four eyes)." in text_of(page)
        assert 'id="appeal-decide"' not in page.content.decode()
        refused = mia.post(DECIDE.format(appeal.pk), {"outcome": "overturned", "reason": "mine to undo"}, follow=True)
        assert "Not decided: mia took the appealed action: another moderator must decide its appeal" in messages_of(refused)
        appeal.refresh_from_db()
        assert appeal.is_open and not appeal_told(appeal)
        with pytest.raises(FourEyesRequired):
            services.account_appeal_resolve(appeal_id=appeal.pk, moderator=mia.user, outcome="upheld", reason="x")

    def test_overturning_lifts_the_suspension_restores_the_standing_logs_it_and_tells_the_client(
        self, api_client, mia
    ):
        appeal = suspended_by_the_ladder(api_client)
        decided = mia.post(DECIDE.format(appeal.pk), {"outcome": "overturned", "reason": "quotes, not insults"},
                           follow=True)
        assert ("Appeal overturned: the restriction is lifted. The client is told the outcome and that it was lifted."
                in messages_of(decided))
        author = Author.objects.get(author_id="u1")
        assert author.standing == Standing.WARNED and author.restriction is None  # the standing before the suspension
        change = StandingTransition.objects.filter(author=author).order_by("-id").first()
        assert (change.from_standing, change.to_standing, change.cause, change.reason) == (
            "suspended", "warned", "overturned", "quotes, not insults")
        assert change.actor_id == str(mia.user.pk)
        [told] = appeal_told(appeal)
        assert told["type"] == "account_appeal.resolved" and told["data"]["outcome"] == "overturned"
        restored = [json.loads(n.payload) for n in DecisionNotification.objects.filter(kind="author.restored")]
        assert [body["data"]["why"] for body in restored] == ["overturned"]
        text = text_of(decided)
        assert "Overturned (restriction lifted) by moderator mia" in text and "quotes, not insults" in text
        assert "The client is being told" in text

    def test_upholding_keeps_the_suspension_and_tells_the_client(self, api_client, mia):
        appeal = suspended_by_the_ladder(api_client)
        decided = mia.post(DECIDE.format(appeal.pk), {"outcome": "upheld", "reason": "insults, not quotes"},
                           follow=True)
        assert "Appeal upheld: the action stays in force. The client is told the outcome." in messages_of(decided)
        assert Author.objects.get(author_id="u1").standing == Standing.SUSPENDED
        assert [body["data"]["outcome"] for body in appeal_told(appeal)] == ["upheld"]

    def test_a_reason_is_required_and_nothing_is_written_without_one(self, api_client, mia):
        appeal = suspended_by_the_ladder(api_client)
        refused = mia.post(DECIDE.format(appeal.pk), {"outcome": "overturned", "reason": ""}, follow=True)
        assert "Not decided: reason" in messages_of(refused)
        appeal.refresh_from_db()
        assert appeal.is_open and not appeal_told(appeal)

    def test_an_appeal_decided_already_says_by_whom(self, api_client, mia, sam):
        appeal = suspended_by_the_ladder(api_client)
        services.account_appeal_resolve(appeal_id=appeal.pk, moderator=sam.user, outcome="upheld", reason="stands")
        late = mia.post(DECIDE.format(appeal.pk), {"outcome": "overturned", "reason": "too late"}, follow=True)
        assert "Not decided: sam already decided it (upheld)" in messages_of(late)
        assert len(appeal_told(appeal)) == 1

    def test_only_post_and_only_with_the_permission_to_act_on_authors(self, api_client, django_user_model):
        appeal = suspended_by_the_ladder(api_client)
        auditor = staff_browser(django_user_model, "aud", "auditor")
        page = auditor.get(PAGE.format(appeal.pk))
        assert page.status_code == 200 and 'id="appeal-decide"' not in page.content.decode()
        assert "deciding it needs the permission to act on authors" in text_of(page)
        assert auditor.post(DECIDE.format(appeal.pk), {"outcome": "overturned", "reason": "x"}).status_code == 403
        moderator = staff_browser(django_user_model, "mod", "moderator")
        assert moderator.get(DECIDE.format(appeal.pk)).status_code == 403
        nobody = staff_browser(django_user_model, "nobody", None)
        assert nobody.get(QUEUE).status_code == 403
        assert AccountAppeal.objects.get().is_open


@pytest.mark.django_db
def test_content_in_a_queue_the_moderator_may_not_see_is_neither_shown_nor_linked(api_client, django_user_model):
    """A strike whose review last waited in a group-only queue stays in the list (it counts in
    the action), but its content, its id and its link are not on the page for a non-member."""
    group = Group.objects.create(name="senior-safety")
    services.review_queue_save(queue_id=None, slug="low_confidence", name="", description="", groups=[group])
    member = staff_browser(django_user_model, "ina", "moderator")
    member.user.groups.add(group)
    outsider = staff_browser(django_user_model, "mia", "moderator")
    unsure = authored(api_client, "u1", "manual_review", text="a secret of the safety team")
    assert unsure.status == ReviewStatus.MANUAL_REVIEW and unsure.queue == "low_confidence"
    services.review_override(review_id=unsure.pk, label="rejected", category="harassment", reason="a threat",
                             moderator=member.user)
    appeal = suspended_by_the_ladder(api_client, "u1")  # four more: five points

    seen_by_member, seen_by_outsider = (b.get(PAGE.format(appeal.pk)).content.decode() for b in (member, outsider))
    assert "a secret of the safety team" in seen_by_member and unsure.short_id in seen_by_member
    assert "a secret of the safety team" not in seen_by_outsider and unsure.short_id not in seen_by_outsider
    assert str(unsure.pk) not in seen_by_outsider
    assert seen_by_outsider.count("Not shown: this content is in a review queue you may not see.") == 1
    assert seen_by_outsider.split('id="appeal-strikes"')[1].count("<tr>") == 1 + 5  # the head and every strike


# --- two moderators at once -----------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_two_moderators_deciding_one_appeal_at_once_one_wins_and_the_client_is_told_once(
    api_client, django_user_model, monkeypatch
):
    """Both decide together, one upholding and one overturning. The author's row lock orders them:
    the second finds the appeal decided (NotApplicable, in words). Without the lock both would pass
    the "still open" check (the meeting holds the first there until the second arrives) and both
    would write their outcome."""
    appeal = suspended_by_the_ladder(api_client)
    moderators = [django_user_model.objects.create_user(name, is_staff=True) for name in ("sam", "tom")]
    meeting_before(monkeypatch, account_appeals, "four_eyes_check", Meeting(2))
    outcomes = ["upheld", "overturned"]

    results = collide(2, lambda i: account_appeals.account_appeal_resolve(
        appeal_id=appeal.pk, moderator=moderators[i], outcome=outcomes[i], reason=f"{outcomes[i]} by {i}"),
        expect=NotApplicable)

    won = [r for r in results if isinstance(r, AccountAppeal)]
    lost = [r for r in results if isinstance(r, NotApplicable)]
    assert len(won) == 1 and len(lost) == 1
    appeal.refresh_from_db()
    assert appeal.status == won[0].status and appeal.resolved_by_id == won[0].resolved_by_id
    assert "already decided it" in lost[0].reason
    assert [body["data"]["outcome"] for body in appeal_told(appeal)] == [appeal.status]
    overturned = StandingTransition.objects.filter(cause="overturned").count()
    assert overturned == (1 if appeal.status == "overturned" else 0)
    author = Author.objects.get(author_id="u1")
    assert author.standing == (Standing.WARNED if appeal.status == "overturned" else Standing.SUSPENDED)

