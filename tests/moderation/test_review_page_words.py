"""The review page in a moderator's words (docs/workplace.md, "Moderator words"): no ids, UUIDs or
cause codes outside the raw record; the success message names the decision and undoes it;
an erased review says when, why and by whom and offers no decision; the list's top category
for a moderator's decision."""

from __future__ import annotations

import itertools
import re
import time
import uuid
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django.urls import reverse
from django.utils import timezone

from audit.models import Actor
from moderation import services
from moderation.api.errors import exception_handler
from moderation.errors import IllegalTransition, ReviewChange, StaleVersion
from moderation.privacy.erasure import content_erase
from moderation.models import BulkItemOutcome, Cause, Content, ContentReview, DecisionNotification, ReviewStatus
from moderation.words import change_words, refusal_words
from tests.helpers import examples, claimed, result, staff_browser
from tests.moderation.test_workplace_pages import LIST, page_of

UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE)
# The codes a moderator should never have to read: causes and statuses as stored (snake_case),
# "decided_by" forms ("request:46", "moderator:mia"), and the old bare message.
CODES = sorted({c for c in [*Cause.values, *ReviewStatus.values] if "_" in c})
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
CODE = re.compile(r"\b(" + "|".join(CODES) + r")\b|\b(request|callback|moderator|provider):\S|Review overridden")


class VisibleText(HTMLParser):
    """The text a moderator reads on the page: no script or style, no attributes (a form's action
    carries the review's id for the browser, not for the reader), and nothing of the raw record
    (the element with id="raw")."""

    SKIP = {"script", "style", "title"}
    VOID = {"input", "br", "img", "meta", "link", "hr", "source", "col", "area", "base", "wbr", "track", "embed"}

    def __init__(self):
        super().__init__()
        self.stack: list[bool] = []  # for each open element: is its text hidden?
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        hidden = bool(self.stack and self.stack[-1]) or tag in self.SKIP or dict(attrs).get("id") == "raw"
        self.stack.append(hidden)

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]):
            self.parts.append(data)


def visible(html: str) -> str:
    parser = VisibleText()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


@pytest.fixture
def mia(db, django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


def model_said(api_client, score: float, **content) -> ContentReview:
    """A review the (scripted) model decided by `score`; its default text holds no default term
    (moderation/data/terms), so that the score alone decides."""
    review, _ = services.review_submit(client=api_client, external_id=str(uuid.uuid4()), kind="text",
                                       text=content.pop("text", "you are a clown"), **content)
    request = services.review_claim(review_id=review.pk, worker_id="w")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(score), cause="provider_result")
    review.refresh_from_db()
    return review


def reject(review, user, **extra):
    return services.review_override(review_id=review.pk, label=ReviewStatus.REJECTED, category="harassment",
                                    reason="insults another user", moderator=user,
                                    expected_version=ContentReview.objects.get(pk=review.pk).version, **extra)


def reviews_in_every_state(api_client, user) -> dict[str, ContentReview]:
    reviews = {"pending": services.review_submit(client=api_client, external_id=str(uuid.uuid4()), kind="text",
                                                 text="hello")[0],
               "processing": claimed(api_client)[0],
               # (The author's id is the client's name for its user, shown as it is: not a UUID here.)
               "sent to a human by the model": model_said(api_client, 0.6, author_id="author-7"),
               "approved by the model": model_said(api_client, 0.1)}
    decided = model_said(api_client, 0.6)
    reject(decided, user, note="seen before")
    reviews["rejected by a moderator"] = decided
    reported = model_said(api_client, 0.1)
    for i in range(3):
        services.report_file(review_id=reported.pk, reporter_id=f"user-{i}", reason="harassment")
    reviews["sent to a human by reports"] = reported
    appealed = model_said(api_client, 0.95)
    services.appeal_file(review_id=appealed.pk, appellant_id="owner-1", statement="it was a joke")
    reviews["appealed"] = appealed
    erased = model_said(api_client, 0.6)
    content_erase(review_id=erased.pk, actor="admin", actor_id="sam", reason="GDPR request 17")
    reviews["erased"] = erased
    undone = model_said(api_client, 0.6)
    decision = reject(undone, user)
    services.review_undo(review_id=undone.pk, decision_id=decision.pk, moderator=user,
                         expected_version=ContentReview.objects.get(pk=undone.pk).version)
    reviews["undone"] = undone
    return reviews


@pytest.mark.django_db
def test_no_id_uuid_or_cause_code_is_shown_outside_the_raw_record(mia, api_client):
    for state, review in reviews_in_every_state(api_client, mia.user).items():
        html = mia.get(page_of(review)).content.decode()
        text = visible(html)
        assert 'id="raw"' in html and str(review.pk) in html  # the raw record still has every id
        assert not UUID.search(text), (state, UUID.search(text).group())
        assert not CODE.search(text), (state, CODE.search(text).group(), text[max(0, CODE.search(text).start() - 80):][:160])


@pytest.mark.django_db
def test_the_page_says_how_the_review_came_to_its_status(mia, api_client):
    reviews = reviews_in_every_state(api_client, mia.user)

    def status(state):
        return visible(mia.get(page_of(reviews[state])).content.decode())

    assert "Sent to a human by 3 user reports" in status("sent to a human by reports")
    assert "Sent to a human by the model" in status("sent to a human by the model")
    assert "Rejected by a moderator" in status("rejected by a moderator")
    assert "Rejected as harassment by moderator mia: insults another user" in status("rejected by a moderator")
    assert "Sent to a human because its owner appealed" in status("appealed")
    assert "Sent to a human because a moderator undid their decision" in status("undone")
    assert "Sent to a human by the model, top score 0.60" in status("undone")  # the decision in force before


@pytest.mark.django_db
def test_the_success_message_says_what_the_ladder_did_to_the_author(mia, api_client):
    """Issue: the message did not say what the ladder did. The policy's ladder warns at 3, suspends
    at 5 for 7 days, bans at 8; harassment counts 1 point here. Two rejections before: the third
    warns; a rejection of another author's first content names the next rung."""
    for _ in range(2):
        model_said(api_client, 0.95, author_id="u-7")
    third = model_said(api_client, 0.6, author_id="u-7")
    first = model_said(api_client, 0.6, author_id="u-8")

    def reject(review):
        response = mia.post(f"{LIST}{review.pk}/act/override/", {
            "label": "rejected", "category": "harassment", "reason": "insults", "version": review.version}, follow=True)
        return visible(response.content.decode())

    warned, counted = reject(third), reject(first)

    assert ("Rejected as harassment. A strike of 1 point: the author has 3 active points, and the enforcement "
            "ladder warned them. Undo") in warned
    assert "Rejected as harassment. A strike of 1 point: the author has 1 active point (next: warn at 3). Undo" in counted


@pytest.mark.django_db
def test_the_success_message_names_the_decision_and_its_undo_button_takes_it_back(mia, api_client):
    review = model_said(api_client, 0.6)

    decided = mia.post(f"{LIST}{review.pk}/act/override/", {
        "label": "rejected", "category": "harassment", "reason": "insults", "version": review.version}, follow=True)

    message = visible(decided.content.decode())
    assert "Rejected as harassment. Undo" in message
    form = re.search(r'<form method="post" action="([^"]+)" class="undo-form">(.*?)</form>',
                     decided.content.decode(), re.S)
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form.group(2)))
    assert form.group(1) == f"{LIST}{review.pk}/act/undo/" and set(fields) == {"csrfmiddlewaretoken", "decision", "version"}

    undone = mia.post(form.group(1), fields, follow=True)

    assert "Undone: the review waits for a decision again (yours until" in visible(undone.content.decode())
    review.refresh_from_db()
    assert review.status == ReviewStatus.MANUAL_REVIEW and review.leased_to == mia.user
    again = mia.post(form.group(1), fields, follow=True)
    assert "Not undone: it changed since you opened it: sent to a human because you undid your decision" in visible(again.content.decode())  # stale: nothing twice


@pytest.mark.django_db
@pytest.mark.parametrize("decision, said", [
    ("abc", "Not undone: decision: Enter a whole number."),
    (None, "Not undone: decision: This field is required."),
    ("99999999", "Not undone: it is no longer the decision in force"),
])
def test_a_bad_undo_is_refused_with_a_clear_message(mia, api_client, decision, said):
    review = model_said(api_client, 0.6)
    reject(review, mia.user)
    posted = {"version": ContentReview.objects.get(pk=review.pk).version}
    if decision is not None:
        posted["decision"] = decision

    refused = mia.post(f"{LIST}{review.pk}/act/undo/", posted, follow=True)

    assert said in visible(refused.content.decode())
    assert ContentReview.objects.get(pk=review.pk).status == ReviewStatus.REJECTED


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_an_undo_after_the_client_was_notified_says_so(mia, api_client, webhook_receiver):
    review = model_said(api_client, 0.6)
    decision = reject(review, mia.user)
    notification = DecisionNotification.objects.get(decision=decision)
    services.notification_deliver(notification_id=notification.pk)
    notification.refresh_from_db()

    refused = mia.post(f"{LIST}{review.pk}/act/undo/", {
        "decision": decision.pk, "version": ContentReview.objects.get(pk=review.pk).version}, follow=True)

    assert (f"Not undone: the client was already notified at {notification.delivered_at:%H:%M} UTC"
            in visible(refused.content.decode()))


@pytest.mark.django_db
def test_an_erased_review_says_when_why_and_by_whom_and_offers_no_decision(mia, api_client):
    review = model_said(api_client, 0.6)
    content_erase(review_id=review.pk, actor="admin", actor_id="sam", reason="GDPR request 17")

    page = mia.get(page_of(review))

    html, text = page.content.decode(), visible(page.content.decode())
    erased_at = ContentReview.objects.get(pk=review.pk).content.erasure.erased_at
    assert f"Content erased {erased_at:%Y-%m-%d %H:%M} UTC by moderator sam: GDPR request 17." in text
    assert page.context["decide_form"] is None and 'id="decide-form"' not in html and 'id="skip-form"' not in html
    assert "Nothing is left to judge" in text
    assert "content erased" in [entry.title for entry in page.context["entries"].rows]
    # And the server refuses what the page no longer offers.
    posted = mia.post(f"{LIST}{review.pk}/act/override/", {
        "label": "approved", "reason": "fine", "version": ContentReview.objects.get(pk=review.pk).version}, follow=True)
    assert "its content was erased; nothing is left to decide" in visible(posted.content.decode())


@pytest.mark.django_db
def test_escalating_from_the_page_keeps_the_review_unless_released(mia, api_client):
    kept, released = claimed(api_client)[0], claimed(api_client)[0]

    page = mia.get(page_of(kept))
    assert 'name="release"' in page.content.decode()
    kept_msg = mia.post(f"{LIST}{kept.pk}/act/escalate/", {"reason": "a threat", "version": kept.version}, follow=True)
    mia.post(f"{LIST}{released.pk}/act/escalate/", {"reason": "a threat", "version": released.version, "release": "on"})

    assert "Escalated to a human: it is yours until" in visible(kept_msg.content.decode())
    kept.refresh_from_db()
    released.refresh_from_db()
    assert kept.leased_to == mia.user and released.leased_to is None
    assert [t.cause for t in kept.transitions.order_by("id")][-1] == Cause.MANUAL_ESCALATION  # one step


@pytest.mark.django_db
def test_the_list_shows_the_moderators_category_and_the_models_score(mia, api_client):
    review = model_said(api_client, 0.6)
    reject(review, mia.user)
    plain = model_said(api_client, 0.1)
    services.review_override(review_id=plain.pk, label=ReviewStatus.REJECTED, category="spam", reason="ads",
                             moderator=mia.user, expected_version=plain.version)

    rows = {r.pk: r for r in mia.get(LIST).context["cl"].result_list}
    admin = mia.get(LIST).context["cl"].model_admin

    assert admin.top_category(rows[review.pk]) == "harassment (moderator; model 0.60)"
    assert admin.top_category(rows[plain.pk]) == "spam (moderator; model 0.10)"
    assert admin.top_category(model_said(api_client, 0.7)) == "harassment 0.70"


FEW = settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WEIRD = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=80)


@pytest.mark.django_db
@FEW
@given(reason=WEIRD.filter(str.strip))
@example(reason="\u202eesrever <b>&amp;</b> 👩\u200d💻")
def test_any_reason_shows_on_an_erased_and_a_decided_page(mia, api_client, reason):
    decided = model_said(api_client, 0.6)
    services.review_override(review_id=decided.pk, label=ReviewStatus.APPROVED, reason=reason, moderator=mia.user,
                             expected_version=decided.version)
    erased = model_said(api_client, 0.6)
    content_erase(review_id=erased.pk, actor="admin", actor_id="sam", reason=reason)

    for review in (decided, erased):
        page = mia.get(page_of(review))
        html = page.content.decode()
        assert page.status_code == 200 and "<b>&amp;</b>" not in html  # escaped, never markup
        assert not BIDI.search(visible(html))  # bidi controls shown as markers, as in the content


# --- refusals and skip reasons in words (docs/workplace.md, "Refusals in words") ---------------

@pytest.fixture
def sam(db, django_user_model):
    return staff_browser(django_user_model, "sam", "supervisor")


def assert_no_codes(text: str, where: str) -> None:
    assert not UUID.search(text), (where, UUID.search(text).group())
    found = CODE.search(text)
    assert not found, (where, found.group(), text[max(0, found.start() - 80):][:160])
    assert " -> " not in text and "admin:" not in text, where


@pytest.mark.django_db
def test_a_stale_refusal_says_what_changed_in_words_and_keeps_the_codes_for_the_api(mia, sam, api_client):
    review = model_said(api_client, 0.6)
    seen = review.version
    sam.post(f"{LIST}{review.pk}/act/override/", {"label": "approved", "reason": "fine", "version": seen})
    sam.post(f"{LIST}{review.pk}/act/reprocess/", {"reason": "new model", "version": seen + 1})
    approved_at, reprocessed_at = [t.created_at for t in review.transitions.order_by("-id")[:2]][::-1]

    refused = mia.post(f"{LIST}{review.pk}/act/override/", {
        "label": "rejected", "category": "harassment", "reason": "insults", "version": seen}, follow=True)

    html = refused.content.decode()
    text = visible(html)
    assert refused.status_code == 409 and 'id="raw"' in html
    assert (f"Not overridden: it changed since you opened it: approved by moderator sam at {approved_at:%H:%M} UTC; "
            f"then sent to the model again by moderator sam at {reprocessed_at:%H:%M} UTC. Nothing was applied") in text
    assert_no_codes(text, "stale refusal")
    # The error itself, as the API's body and the logs carry it, keeps the codes.
    with pytest.raises(StaleVersion) as stale:
        services.review_override(review_id=review.pk, label="rejected", category="harassment", reason="x",
                                 moderator=mia.user, expected_version=seen)
    body = exception_handler(stale.value, {}).data
    assert body["error"] == "stale_version" and str(review.pk) in body["detail"]
    assert ("manual_review -> approved (manual_override, by admin:sam); "
            "approved -> pending (reprocess, by admin:sam)") in body["detail"]


@pytest.mark.django_db
def test_a_refusal_by_the_other_moderators_lease_and_by_your_own_change_name_the_people(mia, sam, api_client):
    held = model_said(api_client, 0.6)
    services.review_take_next(moderator=sam.user)  # sam holds the one review waiting
    held.refresh_from_db()
    assert held.leased_to == sam.user

    leased = mia.post(f"{LIST}{held.pk}/act/override/", {"label": "approved", "reason": "fine",
                                                         "version": held.version}, follow=True)

    text = visible(leased.content.decode())
    assert f"Not overridden: sam is reviewing this until {held.lease_expires_at:%H:%M} UTC" in text
    assert_no_codes(text, "leased")

    mine = model_said(api_client, 0.6)
    mia.post(f"{LIST}{mine.pk}/act/override/", {"label": "approved", "reason": "fine", "version": mine.version})
    again = mia.post(f"{LIST}{mine.pk}/act/override/", {"label": "rejected", "category": "harassment",
                                                        "reason": "insults", "version": mine.version}, follow=True)
    assert "it changed since you opened it: approved by you at " in visible(again.content.decode())


@pytest.mark.django_db
def test_the_bulk_job_page_says_why_each_review_was_skipped_in_words(mia, sam, api_client):
    moderated, reprocessed, leased, erased, fine = (model_said(api_client, 0.6) for _ in range(5))
    job = services.bulk_job_draft(reviews=ContentReview.objects.filter(
        pk__in=[r.pk for r in (moderated, reprocessed, leased, erased, fine)]), moderator=sam.user,
        action="override", label="rejected", category="harassment", reason="a wave", query="")
    services.bulk_job_start(job_id=job.pk, moderator=sam.user)
    reject(moderated, mia.user)
    services.review_reprocess(review_id=reprocessed.pk, actor=Actor.ADMIN, actor_id="mia", user=mia.user)
    ContentReview.objects.filter(pk=leased.pk).update(leased_to=mia.user,
                                                      lease_expires_at=timezone.now() + timedelta(minutes=10))
    Content.objects.filter(pk=erased.content_id).update(erased_at=timezone.now())
    services.bulk_job_run(job_id=job.pk, deadline=time.monotonic() + 60)

    page = sam.get(reverse("admin:moderation_bulkjob_job", args=[job.pk]))

    html, text = page.content.decode(), visible(page.content.decode())
    assert page.status_code == 200 and job.items.filter(outcome=BulkItemOutcome.SKIPPED).count() == 4
    reasons = [r.strip() for r in re.findall(r'<td class="skip-reason">(.*?)</td>', html, re.S)]
    assert len(reasons) == 4
    assert any(r.startswith("it changed since you opened it: rejected by moderator mia at ") for r in reasons), reasons
    assert any(r.startswith("it changed since you opened it: sent to the model again by moderator mia at ")
               for r in reasons), reasons
    assert any(r.startswith("mia is reviewing this until ") and r.endswith(" UTC") for r in reasons), reasons
    assert "its content was erased: nothing is left to judge" in reasons
    assert_no_codes(text, "bulk job page")


def test_every_change_and_refusal_is_said_without_codes():
    """Each cause to each status, by each kind of actor, named or not: the words have no code."""
    for cause, status, actor, actor_id in itertools.product(Cause.values, ReviewStatus.values, Actor.values,
                                                             ("", "sam")):
        change = ReviewChange("manual_review", status, cause, actor, actor_id)
        said = change_words(change)
        assert said and not CODE.search(said) and "_" not in said, (change, said)
        refused = refusal_words(StaleVersion(review_id=uuid.uuid4(), expected=1, actual=2, changes=[change]))
        assert not UUID.search(refused) and not CODE.search(refused), refused
        illegal = refusal_words(IllegalTransition(review_id=uuid.uuid4(), from_status=status, cause=cause))
        assert not UUID.search(illegal) and not CODE.search(illegal) and "_" not in illegal, illegal


@pytest.mark.django_db
@FEW
@given(reason=WEIRD)
@example(reason="\u202eesrever <b>&amp;</b> manual_review -> 👩\u200d💻")
def test_any_skip_reason_shows_escaped_on_the_bulk_job_page(mia, api_client, reason):
    review = model_said(api_client, 0.6)
    job = services.bulk_job_draft(reviews=ContentReview.objects.filter(pk=review.pk), moderator=mia.user,
                                  action="escalate", reason="a wave", query="")
    # (Only the job's own run writes a reason; any text a moderator's name or an old row could hold.)
    job.items.update(outcome=BulkItemOutcome.SKIPPED, reason=reason)

    page = mia.get(reverse("admin:moderation_bulkjob_job", args=[job.pk]))

    html = page.content.decode()
    assert page.status_code == 200 and "<b>&amp;</b>" not in html
