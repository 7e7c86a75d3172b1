"""Authors through the API (docs/design.md, "Authors, strikes and account actions"): the author_id
of a submission, the author page, account appeals and erasure of an author's content."""

from __future__ import annotations

import json
import unicodedata
import uuid
from io import StringIO
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from moderation import services
from moderation.api import authors as authors_api
from moderation.privacy.erasure import author_content_erase
from moderation.models import (
    ERASED,
    AccountAction,
    AccountAppeal,
    Author,
    Content,
    ContentReview,
    DecisionNotification,
    StandingTransition,
    Strike,
)
from tests.helpers import examples, collide
from tests.moderation.test_authors import authored

pytestmark = pytest.mark.django_db

PAGE_KEYS = {"author_id", "standing", "strike_points", "strikes", "restriction", "actions", "review_count",
             "rejected_count"}


def url(author_id: str, tail: str = "") -> str:
    """The author's path: its id percent-encoded, a slash left as it is."""
    return f"/api/v1/authors/{quote(author_id, safe='/')}/{tail}"


def body(external_id: str | None = None, **extra) -> dict:
    return {"external_id": external_id or uuid.uuid4().hex, "content_type": "text", "text": "hello", **extra}


@pytest.fixture
def moderator(db):
    return get_user_model().objects.create_user("mod-a", is_staff=True)


def banned(client, author_id: str, moderator, *, reason: str = "ban evasion") -> AccountAction:
    authored(client, author_id, "approved")
    return services.author_act(author_pk=Author.objects.get(client=client, author_id=author_id).pk,
                               moderator=moderator, action="ban", reason=reason)


# --- author_id on a submission ------------------------------------------------------------------

def test_a_submission_names_its_author_and_the_review_echoes_it(http, api_client):
    created = http.post("/api/v1/reviews/", body("e1", author_id="ann"), format="json")
    assert created.status_code == 201 and created.json()["author_id"] == "ann"
    review_id = created.json()["id"]
    assert http.get(f"/api/v1/reviews/{review_id}/").json()["author_id"] == "ann"
    assert ContentReview.objects.get(pk=review_id).author == Author.objects.get(client=api_client, author_id="ann")
    # A replay of the external_id answers the review as it was, whatever author the repeat names.
    replay = http.post("/api/v1/reviews/", body("e1", author_id="bob"), format="json")
    assert replay.status_code == 200 and replay.json()["id"] == review_id and replay.json()["author_id"] == "ann"
    assert not Author.objects.filter(author_id="bob", reviews__isnull=False).exists()


def test_a_submission_without_an_author_echoes_null(http):
    for sent in ({}, {"author_id": None}):
        created = http.post("/api/v1/reviews/", body(**sent), format="json")
        assert created.status_code == 201 and created.json()["author_id"] is None
        assert http.get(f"/api/v1/reviews/{created.json()['id']}/").json()["author_id"] is None
    assert http.get("/api/v1/reviews/").json()["results"][0]["author_id"] is None


def test_an_idempotent_replay_with_an_author_answers_the_first_response(http):
    first = http.post("/api/v1/reviews/", body("e2", author_id="ann"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    again = http.post("/api/v1/reviews/", body("e2", author_id="ann"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert again.json()["author_id"] == "ann"
    other = http.post("/api/v1/reviews/", body("e2", author_id="bob"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert other.status_code == 422


@pytest.mark.parametrize("author_id", ["", "a" * 256, "a\x00b", "a\nb", "tab\there", "del\x7f", "c1\x85", "\x9f", 7,
                                       True, ["ann"], "\ud800"])
def test_an_author_id_out_of_bounds_or_with_a_control_character_is_refused(http, author_id):
    # As sent on the wire (a lone surrogate only exists escaped: \\ud800).
    answer = http.post("/api/v1/reviews/", json.dumps(body(author_id=author_id)), content_type="application/json")
    assert answer.status_code == 400, answer.json()
    assert answer.json()["error"] == "invalid" and "author_id" in answer.json()["fields"]
    assert not Author.objects.exists() and not ContentReview.objects.exists()


@pytest.mark.parametrize("author_id", ["a" * 255, "x", " ann ", "Ünïcødé ✓", "👩‍👩‍👧", "team/ann", "a?b#c%2F", "عربي\u200f"])
def test_an_author_id_is_kept_as_written(http, api_client, author_id):
    answer = http.post("/api/v1/reviews/", body(author_id=author_id), format="json")
    assert answer.status_code == 201 and answer.json()["author_id"] == author_id
    assert Author.objects.get(client=api_client).author_id == author_id
    page = http.get(url(author_id))
    assert page.status_code == 200 and page.json()["author_id"] == author_id


# Any Unicode (control characters, emoji, combining marks, bidi and zero-width characters), of
# any length around the bound, and ids that end like the paths after an author's id.
AUTHOR_IDS = st.one_of(
    st.text(max_size=8), st.text(min_size=250, max_size=260),
    st.text(alphabet=st.sampled_from("a/\x00\x1f\x7f\x85\u200d\u200f\u0301 .%?#"), max_size=12),
    st.tuples(st.text(min_size=1, max_size=8), st.sampled_from(["/appeals", "/content", "/", "//"]))
    .map("".join),
)


@given(author_id=AUTHOR_IDS)
@example(author_id="x/appeals")
@example(author_id="team/ann/content")
@example(author_id="\u200d")
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_author_id_is_taken_as_written_or_refused_and_its_page_is_found_by_it(http, author_id):
    valid = 1 <= len(author_id) <= 255 and not any(unicodedata.category(c) == "Cc" for c in author_id)
    answer = http.post("/api/v1/reviews/", json.dumps(body(author_id=author_id)), content_type="application/json")
    if not valid:
        assert answer.status_code == 400 and "author_id" in answer.json()["fields"]
        return
    assert answer.status_code == 201 and answer.json()["author_id"] == author_id
    page = http.get(url(author_id))
    assert page.status_code == 200 and page.json()["author_id"] == author_id


# --- the author page ----------------------------------------------------------------------------

def test_the_author_page_shows_standing_strikes_restriction_actions_and_counts(http, api_client, moderator):
    for label in ("rejected", "rejected", "rejected", "approved"):
        authored(api_client, "ann", label)
    ban = services.author_act(author_pk=Author.objects.get(author_id="ann").pk, moderator=moderator, action="ban",
                              reason="spam ring")
    appeal = services.account_appeal_file(client=api_client, author_id="ann", statement="not me")

    page = http.get(url("ann"))

    assert page.status_code == 200
    data = page.json()
    assert set(data) == PAGE_KEYS
    assert (data["author_id"], data["standing"], data["strike_points"]) == ("ann", "banned", 3)
    assert (data["review_count"], data["rejected_count"]) == (4, 3)
    strikes = Strike.objects.filter(author__author_id="ann").order_by("-created_at", "-id")
    assert data["strikes"] == [{"review_id": str(s.review_id), "category": s.category, "points": 1,
                                "created_at": s.created_at.isoformat().replace("+00:00", "Z"),
                                "expires_at": s.expires_at.isoformat().replace("+00:00", "Z")} for s in strikes]
    assert data["restriction"] == {"action_id": str(ban.pk), "action": "ban", "until": None, "reason": "spam ring"}
    newest, warning = data["actions"]
    assert set(newest) == {"action_id", "action", "until", "cause", "created_at", "appeal", "statement"}
    assert (newest["action_id"], newest["action"], newest["cause"]) == (str(ban.pk), "ban", "moderator")
    assert newest["appeal"] == {"id": str(appeal.pk), "status": "open",
                                "created_at": appeal.created_at.isoformat().replace("+00:00", "Z"), "resolved_at": None}
    assert (warning["action"], warning["cause"], warning["appeal"]) == ("warn", "strikes", None)
    assert warning["statement"]["automated"] is True and warning["statement"]["strike_points"] == 3
    assert "mod-a" not in str(data)  # a statement names no moderator


def test_an_author_of_another_client_or_never_sent_is_not_found(http, api_client, other_client):
    authored(other_client, "ann", "approved")
    for path in (url("ann"), url("nobody")):
        answer = http.get(path)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    assert http.post(url("ann", "appeals/"), {"statement": "x"}, format="json").status_code == 404
    assert http.delete(url("ann", "content")).status_code == 404


def test_the_lists_are_capped_and_the_counts_are_not(http, api_client, monkeypatch):
    monkeypatch.setattr(authors_api, "LIST_MAX", 2)
    for _ in range(5):
        authored(api_client, "ann", "rejected")
    data = http.get(url("ann")).json()
    assert len(data["strikes"]) == 2 and len(data["actions"]) == 2
    assert data["strike_points"] == 5 and data["review_count"] == data["rejected_count"] == 5
    newest = Strike.objects.filter(author__author_id="ann").order_by("-created_at")[:2]
    assert [s["review_id"] for s in data["strikes"]] == [str(s.review_id) for s in newest]


def test_the_docs_state_the_list_cap_the_code_has():
    design = " ".join((Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text().split())
    assert f"list the newest {authors_api.LIST_MAX} (`LIST_MAX`)" in design


def test_the_author_page_costs_the_same_queries_however_many_strikes(http, api_client, django_assert_max_num_queries):
    for _ in range(6):
        authored(api_client, "ann", "rejected")
    # The token's client; its rate count; the author and its restriction; the counts; the
    # strikes; the actions with their policies and appeals.
    with django_assert_max_num_queries(6):
        assert http.get(url("ann")).status_code == 200


def test_ids_ending_like_the_other_paths_reach_their_own_page(http, api_client, moderator):
    banned(api_client, "team/ann", moderator)
    banned(api_client, "team/ann/appeals", moderator)
    authored(api_client, "team/ann/content", "approved")
    # GET: each page; POST to .../appeals/: the appeal of the author before the suffix.
    for author_id in ("team/ann", "team/ann/appeals", "team/ann/content"):
        assert http.get(url(author_id)).json()["author_id"] == author_id
    filed = http.post(url("team/ann/appeals", "appeals/"), {"statement": "x"}, format="json")
    assert filed.status_code == 201
    assert AccountAppeal.objects.get(pk=filed.json()["id"]).author.author_id == "team/ann/appeals"
    assert http.post(url("team/ann", "appeals/"), {"statement": "x"}, format="json").status_code == 201
    # A percent-encoded slash is the same path.
    assert http.get("/api/v1/authors/team%2Fann/").json()["author_id"] == "team/ann"


# --- account appeals ----------------------------------------------------------------------------

def test_an_appeal_of_the_ban_in_force_is_open_and_a_second_is_refused(http, api_client, moderator):
    ban = banned(api_client, "ann", moderator)
    filed = http.post(url("ann", "appeals/"), {"statement": "it was my brother"}, format="json")
    assert filed.status_code == 201
    appeal = AccountAppeal.objects.get()
    assert filed.json() == {"id": str(appeal.pk), "action_id": str(ban.pk), "status": "open",
                            "created_at": appeal.created_at.isoformat().replace("+00:00", "Z")}
    again = http.post(url("ann", "appeals/"), {"statement": "again"}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "appeal_exists"


def test_an_author_with_nothing_in_force_cannot_appeal(http, api_client):
    authored(api_client, "ann", "rejected")
    answer = http.post(url("ann", "appeals/"), {"statement": "why"}, format="json")
    assert answer.status_code == 409 and answer.json()["error"] == "not_appealable"


@pytest.mark.parametrize("sent", [{}, {"statement": ""}, {"statement": "x" * 5001}, {"statement": 5}])
def test_an_appeal_without_a_statement_or_with_too_long_a_one_is_refused(http, api_client, moderator, sent):
    banned(api_client, "ann", moderator)
    answer = http.post(url("ann", "appeals/"), sent, format="json")
    assert answer.status_code == 400 and "statement" in answer.json()["fields"]
    assert not AccountAppeal.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_of_concurrent_appeals_of_one_ban_exactly_one_is_created(api_client, moderator):
    banned(api_client, "ann", moderator)

    def appeal(i: int) -> int:
        http = APIClient()
        http.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
        return http.post(url("ann", "appeals/"), {"statement": f"appeal {i}"}, format="json").status_code

    answers = collide(8, appeal)

    assert sorted(answers) == [201] + [409] * 7
    assert AccountAppeal.objects.count() == 1


# --- erasure of an author's content -------------------------------------------------------------

def test_erasing_an_author_erases_each_content_and_keeps_strikes_and_actions(http, api_client, moderator):
    rejected = [authored(api_client, "ann", "rejected", text=f"buy cheap pills number {i} now") for i in range(3)]
    pending, _ = services.review_submit(client=api_client, external_id="p1", kind="text", text="still being judged",
                                        author_id="ann")
    other, _ = services.review_submit(client=api_client, external_id="o1", kind="text", text="someone else",
                                      author_id="bob")
    author = Author.objects.get(author_id="ann")
    # A moderator's reason (which quotes the content) goes whole; the action and its strikes stay.
    action = services.author_act(author_pk=author.pk, moderator=moderator, action="ban",
                                 reason='posted "buy cheap pills number 0 now" three times')
    strikes_before = list(Strike.objects.filter(author=author).values_list("review_id", "category", "points"))
    facts_before = action.strikes

    answer = http.delete(url("ann", "content") + "?reason=ticket-7")

    assert answer.status_code == 200
    assert answer.json() == {"author_id": "ann", "erased": 4, "stopped_moderation": 1, "already_erased": 0,
                             "remaining": 0, "held": 0, "reason": "ticket-7"}
    for review in [*rejected, pending]:
        content = Content.objects.get(pk=review.content_id)
        assert content.erased_at is not None and content.text == ""
    assert Content.objects.get(pk=other.content_id).erased_at is None
    assert list(Strike.objects.filter(author=author).values_list("review_id", "category", "points")) == strikes_before
    action.refresh_from_db()
    assert (action.action, action.reason, action.strikes) == ("ban", ERASED, facts_before)
    assert StandingTransition.objects.get(action=action).reason == action.reason
    payloads = DecisionNotification.objects.filter(client=api_client, review=None).values_list("payload", flat=True)
    assert len(payloads) == 2 and not any("cheap pills" in payload for payload in payloads)
    # The ban's notification: the moderator's reason whole, not only its quotes of the content.
    banned = [json.loads(p)["data"] for p in payloads if json.loads(p)["data"].get("action") == "ban"]
    assert [data["reason"] for data in banned] == [ERASED]
    assert AccountAction.objects.filter(author=author).count() == 2  # the ladder's warning, the ban
    assert http.get(url("ann")).json()["standing"] == "banned"
    # Again: nothing erased twice.
    again = http.delete(url("ann", "content/"))
    assert again.json() | {"reason": ""} == {"author_id": "ann", "erased": 0, "stopped_moderation": 0,
                                             "already_erased": 4, "remaining": 0, "held": 0, "reason": ""}


def test_an_author_erasure_stopped_midway_erases_the_rest_when_run_again(http, api_client, monkeypatch):
    for i in range(5):
        authored(api_client, "ann", "approved", text=f"content number {i}")
    monkeypatch.setattr(authors_api, "AUTHOR_ERASE_PER_CALL", 2)
    first = http.delete(url("ann", "content")).json()
    assert (first["erased"], first["remaining"]) == (2, 3)
    author = Author.objects.get(author_id="ann")
    stopped = author_content_erase(author_pk=author.pk, actor="command", actor_id="op", reason="r",
                                   stop=lambda: True)  # a SIGTERM during the first review
    assert (stopped.erased, stopped.already_erased, stopped.remaining) == (1, 2, 2)
    rest = http.delete(url("ann", "content")).json()
    assert (rest["erased"], rest["already_erased"], rest["remaining"]) == (2, 3, 0)
    assert not Content.objects.filter(review__author=author, erased_at__isnull=True).exists()


def test_a_request_out_of_time_still_erases_one_content(http, api_client, monkeypatch):
    for _ in range(3):
        authored(api_client, "ann", "approved")
    monkeypatch.setattr(authors_api, "AUTHOR_ERASE_SECONDS", 0)
    answers = [http.delete(url("ann", "content")).json() for _ in range(4)]
    assert [(a["erased"], a["remaining"]) for a in answers] == [(1, 2), (1, 1), (1, 0), (0, 0)]


def test_the_command_erases_an_author_named_by_client_and_id_after_a_dry_run(api_client, other_client):
    mine = [authored(api_client, "team/ann", "approved") for _ in range(2)]
    theirs = authored(other_client, "team/ann", "approved")
    out = StringIO()
    call_command("erase_content", "--author", "team/ann", "--client", "acme", "--reason", "r", stdout=out)
    assert "would erase 2 contents" in out.getvalue() and "dry run" in out.getvalue()
    assert not Content.objects.filter(erased_at__isnull=False).exists()
    out = StringIO()
    call_command("erase_content", "--author", "team/ann", "--client", "acme", "--reason", "r", "--for-real", stdout=out)
    assert "erased 2 contents" in out.getvalue() and "0 left" in out.getvalue()
    assert all(Content.objects.get(pk=r.content_id).erased_at for r in mine)
    assert Content.objects.get(pk=theirs.content_id).erased_at is None


@pytest.mark.parametrize("args, message", [
    (["--author", "ann"], "--author with --client"),
    (["--client", "acme"], "--author with --client"),
    ([str(uuid.uuid4()), "--author", "ann", "--client", "acme"], "--author with --client"),
    (["--author", "nobody", "--client", "acme"], "sent no author"),
    (["--author", "ann", "--client", "nobody"], "no API client named"),
])
def test_the_command_refuses_an_author_it_cannot_name(api_client, args, message):
    authored(api_client, "ann", "approved")
    with pytest.raises(CommandError, match=message):
        call_command("erase_content", *args, "--reason", "r", "--for-real", stdout=StringIO())
