"""Statements of reasons in the admin (moderation/admin/statements.py): the list by state and by
overturn, the exact puid search, the statement page with the database's errors field by field,
and "Re-queue with the active policy", for supervisors only.

No sender writes `submitted` or `rejected` yet in this checkout's services: those states are set
on the rows the decide path wrote, as the sender would leave them."""

from __future__ import annotations

import re
from html import escape, unescape

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from moderation import services
from moderation.admin.paginator import EstimatedCountPaginator
from moderation.models import StatementStatus, TransparencyStatement
from tests.helpers import examples, decided, staff_browser

pytestmark = pytest.mark.django_db
LIST = "/admin/moderation/transparencystatement/"
PAGE = LIST + "{}/change/"
REFUSED = {"statement_0": {"category": ["The selected category is invalid."],
                           "content_language": ["The selected content language is invalid."]}}
INJECTION = '"><img src=x onerror=alert(1)>'


@pytest.fixture
def ada(django_user_model):
    return staff_browser(django_user_model, "ada", "auditor")


def statement(api_client, status: str = StatementStatus.PENDING, **fields) -> TransparencyStatement:
    """A rejection's statement, left in `status` as the sender would leave it."""
    review = decided(api_client, "rejected")
    row = TransparencyStatement.objects.get(decision=review.decision)
    if status == StatementStatus.SUBMITTED:
        fields = {"submitted_at": timezone.now(), "attempts": 1, "tdb_uuid": "a-uuid", **fields}
    if status == StatementStatus.REJECTED:
        fields = {"errors": REFUSED, "attempts": 1, "last_error": "422", **fields}
    TransparencyStatement.objects.filter(pk=row.pk).update(status=status, **fields)
    row.refresh_from_db()
    return row


def text_of(response) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def messages_of(response) -> str:
    return " ".join(str(m) for m in response.context["messages"])


def listed(browser, query: str = "") -> set[str]:
    response = browser.get(LIST + query)
    assert response.status_code == 200
    return {s.puid for s in response.context["cl"].result_list}


def requeue(browser, *statements: TransparencyStatement):
    return browser.post(LIST, {"action": "requeue", "_selected_action": [s.pk for s in statements]}, follow=True)


# --- the list -------------------------------------------------------------------------------------

def test_the_list_filters_by_each_state_and_by_overturn(api_client, ada, django_user_model):
    pending, submitted, refused = (statement(api_client, status) for status in StatementStatus.values)
    lifted = statement(api_client, StatementStatus.SUBMITTED)
    services.review_override(review_id=lifted.review_id, label="approved", reason="fine after all",
                             moderator=django_user_model.objects.create_user("mod"))

    assert listed(ada, "?status__exact=pending") == {pending.puid}
    assert listed(ada, "?status__exact=submitted") == {submitted.puid, lifted.puid}
    assert listed(ada, "?status__exact=rejected") == {refused.puid}
    assert listed(ada, "?overturned=yes") == {lifted.puid}
    assert listed(ada, "?overturned=no") == {pending.puid, submitted.puid, refused.puid}
    assert listed(ada, "?overturned=no&status__exact=submitted") == {submitted.puid}


def test_the_list_finds_a_statement_by_its_exact_puid_without_counting_the_table(api_client, ada):
    first, second = statement(api_client), statement(api_client)

    assert listed(ada, f"?q={first.puid}") == {first.puid}
    assert listed(ada, f"?q=%20{second.puid}%20") == {second.puid}
    assert listed(ada, f"?q={first.puid}0") == set()
    response = ada.get(LIST)
    assert isinstance(response.context["cl"].paginator, EstimatedCountPaginator)
    assert not response.context["cl"].show_full_result_count
    assert ada.get(LIST + "?q=%00").status_code == 400  # PostgreSQL text holds no NUL: refused, not a 500


def test_the_list_says_what_each_statement_states_and_links_to_it(api_client, ada, django_user_model):
    restriction = statement(api_client)
    review, _ = services.review_submit(client=api_client, external_id="by-author", kind="text", text="a post",
                                       author_id="person-<b>1</b>")
    ban = services.author_act(author_pk=review.author_id, moderator=django_user_model.objects.create_user("mod"),
                              action="ban", reason="r")

    html = ada.get(LIST).content.decode()

    assert f'href="/admin/moderation/contentreview/{restriction.review_id}/change/"' in html
    assert f'href="/admin/moderation/author/{review.author_id}/change/"' in html
    assert "ban of author person-&lt;b&gt;1&lt;/b&gt;" in html
    page = ada.get(PAGE.format(TransparencyStatement.objects.get(account_action=ban).pk))
    assert page.status_code == 200 and "DECISION_ACCOUNT_TERMINATED" in page.content.decode()
    assert "<b>1</b>" not in page.content.decode()


def test_moderators_read_statements_but_cannot_requeue_them(api_client, mia):
    refused = statement(api_client, StatementStatus.REJECTED)

    assert mia.get(LIST).status_code == 200
    assert b"Re-queue" not in mia.get(PAGE.format(refused.pk)).content


# --- the statement page ---------------------------------------------------------------------------

def test_a_refused_statements_page_shows_the_databases_errors_field_by_field(api_client, ada, sam):
    refused = statement(api_client, StatementStatus.REJECTED)

    response = ada.get(PAGE.format(refused.pk))

    assert response.status_code == 200
    text = text_of(response)
    assert "category : The selected category is invalid." in text
    assert "content_language : The selected content language is invalid." in text
    assert "statement_0" not in text  # the batch's position is not the statement's
    assert f'"puid": "{refused.puid}"' in unescape(response.content.decode())  # the body, as pretty JSON
    assert '"kind": "decision"' in unescape(response.content.decode())  # and the facts
    assert "Re-queue with the active policy" not in text  # an auditor changes nothing
    assert "Re-queue with the active policy" in text_of(sam.get(PAGE.format(refused.pk)))
    assert "Re-queue with the active policy" not in text_of(sam.get(PAGE.format(statement(api_client).pk)))


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=300)


@given(field=_text, message=_text)
@example(field=INJECTION, message="<script>alert(1)</script>")
@example(field="\u202Eevil\u202C", message="\U0001F468\u200D\U0001F469\u200D\U0001F467 \u0301\u200B")
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_unicode_in_the_databases_errors_is_shown_escaped(api_client, sam, field, message):
    refused = statement(api_client, StatementStatus.REJECTED,
                        errors={"statement_0": {field: [message, {"nested": INJECTION}]}, "puid": message})

    response = sam.get(PAGE.format(refused.pk))

    assert response.status_code == 200
    html = response.content.decode()
    assert escape(message) in html and escape(field) in html
    assert "<img src=x" not in html and "<script>alert" not in html


# --- re-queue -------------------------------------------------------------------------------------

def test_a_supervisor_requeues_the_refused_statements_and_is_told_of_the_others(api_client, sam):
    refused = [statement(api_client, StatementStatus.REJECTED) for _ in range(2)]
    submitted = statement(api_client, StatementStatus.SUBMITTED)

    response = requeue(sam, *refused, submitted)

    assert response.status_code == 200
    told = messages_of(response)
    assert f"Re-queued 2 statements with the active policy (v{services.policy_active().version})." in told
    assert f"Not re-queued: {submitted.puid} (submitted). Only statements the database refused" in told
    for row in refused:
        row.refresh_from_db()
        assert (row.status, row.errors, row.attempts, row.requeued_at is not None) == ("pending", {}, 0, True)
    submitted.refresh_from_db()
    assert submitted.status == StatementStatus.SUBMITTED


def test_the_statement_pages_button_requeues_it(api_client, sam):
    refused = statement(api_client, StatementStatus.REJECTED)

    response = sam.post(PAGE.format(refused.pk).replace("change/", "requeue/"), follow=True)

    assert "Re-queued 1 statement with the active policy" in messages_of(response)
    refused.refresh_from_db()
    assert refused.status == StatementStatus.PENDING
    again = sam.post(PAGE.format(refused.pk).replace("change/", "requeue/"), follow=True)
    assert f"Not re-queued: {refused.puid} (pending)" in messages_of(again)  # refused, not a crash


def test_an_auditor_cannot_requeue(api_client, ada):
    refused = statement(api_client, StatementStatus.REJECTED)

    form = ada.get(LIST).context["action_form"]
    assert form is None or "requeue" not in dict(form.fields["action"].choices)
    requeue(ada, refused)
    assert ada.post(PAGE.format(refused.pk).replace("change/", "requeue/")).status_code == 403

    refused.refresh_from_db()
    assert refused.status == StatementStatus.REJECTED and refused.errors == REFUSED
