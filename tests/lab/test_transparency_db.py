"""The fake Transparency Database over real HTTP (lab/transparency_db.py, docs/transparency.md):
it accepts what the database accepts, refuses what it refuses with the database's answers, all or
nothing per batch, and injects the faults a sender must survive."""

from __future__ import annotations

import json
import re
import threading
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.transparency_db import DUPLICATE_MESSAGE, FakeTransparencyDatabase
from tests.lab import tdb_statements as make
from tests.helpers import examples

TOKEN = "fake-tdb-token"
HTTP: httpx.Client


@pytest.fixture
def fake():
    with FakeTransparencyDatabase(tokens={TOKEN: "Acme Forum"}) as fake:
        yield fake


@pytest.fixture(scope="module", autouse=True)
def http():
    """One client for the module: a new httpx client per request costs more than the request."""
    global HTTP
    with httpx.Client() as HTTP:
        yield HTTP


def post(fake, statements, *, token=TOKEN, timeout=5.0):
    headers = {"Accept": "application/json", "Authorization": f"Bearer {token}"}
    return HTTP.post(f"{fake.url}/api/v1/statements", json={"statements": statements}, headers=headers, timeout=timeout)


# --- Accepted -------------------------------------------------------------------------------------

def test_a_statement_of_every_kind_the_platform_sends_is_accepted_in_one_batch(fake):
    statements = [kind() for kind in make.KINDS.values()]

    answer = post(fake, statements)

    assert answer.status_code == 201, answer.text
    created = answer.json()["statements"]
    assert [s["puid"] for s in created] == [s["puid"] for s in statements]
    assert fake.stored_puids() == {s["puid"] for s in statements}
    for statement in created:
        assert re.fullmatch(r"[0-9a-f-]{36}", statement["uuid"])
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", statement["created_at"])
        assert statement["self"] == f"{fake.url}/api/v1/statement/{statement['uuid']}"
        assert statement["platform_name"] == "Acme Forum"


def test_the_answer_fills_what_a_statement_left_out_as_the_database_does(fake):
    statement = make.account_termination()
    statement["territorial_scope"] = ["DE", "AT", "DE"]
    statement["content_id"] = {"EAN-13": "0123456789123"}

    created = post(fake, [statement]).json()["statements"][0]

    assert created["territorial_scope"] == ["AT", "DE"]  # deduplicated and sorted
    assert created["content_id_ean"] == "0123456789123" and "content_id" not in created
    assert created["decision_visibility"] == [] and created["end_date_account_restriction"] is None


def test_what_is_stored_drops_the_fields_whose_condition_does_not_hold(fake):
    statement = make.removal_by_provider()  # own initiative, incompatible content
    statement.update(source_identity="ignored for own-initiative decisions", decision_monetary_other="ignored",
                     category_specification_other="ignored without KEYWORD_OTHER")

    assert post(fake, [statement]).status_code == 201

    (stored,) = fake.statements()
    assert stored["source_identity"] is None and stored["decision_monetary_other"] is None
    assert stored["category_specification_other"] is None and stored["illegal_content_legal_ground"] is None
    assert stored["incompatible_content_ground"] == statement["incompatible_content_ground"]


# --- Refused: one field at a time -----------------------------------------------------------------

INVALID = [
    # (what the sender got wrong, changes to a valid statement, the field, its messages)
    ("a category of the schema before 1 July 2025", {"category": "STATEMENT_CATEGORY_PORNOGRAPHY_OR_SEXUALIZED_CONTENT"},
     "category", ["The selected category is invalid."]),
    ("a keyword of the schema before 1 July 2025", {"category_specification": ["KEYWORD_DISINFORMATION"]},
     "category_specification", ["The selected category specification is invalid."]),
    ("a visibility decision that is not a list", {"decision_visibility": "DECISION_VISIBILITY_CONTENT_REMOVED"},
     "decision_visibility", ["The decision visibility field must be an array."]),
    ("other content type without saying which", {"content_type": ["CONTENT_TYPE_OTHER"]},
     "content_type_other", ["The content type other field is required."]),
    ("illegal content without its legal ground", {"decision_ground": "DECISION_GROUND_ILLEGAL_CONTENT", "illegal_content_explanation": "why"},
     "illegal_content_legal_ground", ["The illegal content legal ground field is required when decision ground is illegal content."]),
    ("a country outside the EEA", {"territorial_scope": ["DE", "GB"]}, "territorial_scope", ["The selected territorial scope is invalid."]),
    ("a language code in lower case", {"content_language": "en"}, "content_language", ["The selected content language is invalid."]),
    ("a date with a time", {"content_date": "2025-07-02T10:00:00"}, "content_date", ["The content date does not match the format YYYY-MM-DD."]),
    ("an application date before 2020", {"application_date": "2019-12-31"}, "application_date",
     ["The application date field must be a date after or equal to 2020-01-01."]),
    ("an end date after 2038", {"decision_account": "DECISION_ACCOUNT_SUSPENDED", "end_date_account_restriction": "2038-01-02"},
     "end_date_account_restriction", ["The end date account restriction field must be a date before or equal to 2038-01-01."]),
    ("facts longer than 5000 characters", {"decision_facts": "x" * 5001}, "decision_facts",
     ["The decision facts field must not be greater than 5000 characters."]),
    ("facts of only spaces", {"decision_facts": " \u00a0\u2003 "}, "decision_facts", ["The decision facts field is required."]),
    ("a puid with a slash", {"puid": "review/42"}, "puid", ["The puid format is invalid."]),
    ("a puid longer than 500 characters", {"puid": "p" * 501}, "puid", ["The puid field must not be greater than 500 characters."]),
    ("automated detection as a JSON boolean", {"automated_detection": True}, "automated_detection",
     ["The selected automated detection is invalid."]),
    ("the label instead of the key", {"automated_decision": "Fully automated"}, "automated_decision",
     ["The selected automated decision is invalid."]),
    ("no source type", {"source_type": None}, "source_type", ["The source type field is required."]),
    ("a reference that is not a URL", {"decision_ground_reference_url": "example.org/rules"}, "decision_ground_reference_url",
     ["The decision ground reference url field must be a valid URL."]),
    ("additional categories sent as null", {"category_addition": None}, "category_addition",
     ["The category addition field must be an array.", "The selected category addition is invalid."]),
]


@pytest.mark.parametrize(("mistake", "changes", "field", "messages"), INVALID, ids=[case[0] for case in INVALID])
def test_a_statement_with_one_bad_field_is_refused_naming_the_field_and_nothing_is_stored(fake, mistake, changes, field, messages):
    statement = make.removal_by_provider() | changes

    answer = post(fake, [statement])

    assert answer.status_code == 422
    assert answer.json() == {"errors": {"statement_0": {field: messages}}}
    assert fake.statements() == []


def test_a_statement_without_any_restriction_is_refused_naming_all_four_kinds(fake):
    answer = post(fake, [make.removal_by_provider() | {"decision_visibility": []}])

    errors = answer.json()["errors"]["statement_0"]
    assert answer.status_code == 422 and list(errors) == ["decision_visibility", "decision_monetary", "decision_provision", "decision_account"]
    assert errors["decision_account"] == [
        "The decision account field is required when none of decision visibility / decision monetary / decision provision are present."]


def test_a_batch_with_one_bad_statement_is_refused_whole_and_names_only_that_one(fake):
    statements = [make.removal_by_provider() for _ in range(100)]
    statements[57]["content_language"] = "english"

    answer = post(fake, statements)

    assert answer.status_code == 422
    assert answer.json() == {"errors": {"statement_57": {"content_language": ["The selected content language is invalid."]}}}
    assert fake.statements() == []
    # The sender sets the named one aside and the other 99 go in.
    assert post(fake, statements[:57] + statements[58:]).status_code == 201
    assert len(fake.statements()) == 99


@pytest.mark.parametrize(("body", "message"), [
    ({"statements": []}, "The statements field is required."),
    ({"statement": [{}]}, "The statements field is required."),
    ({"statements": "all of them"}, "The statements field must be an array."),
])
def test_a_body_without_a_list_of_statements_is_refused_with_the_batch_error(fake, body, message):
    answer = httpx.post(f"{fake.url}/api/v1/statements", json=body, headers={"Authorization": f"Bearer {TOKEN}"})

    assert answer.status_code == 422
    assert answer.json() == {"message": message, "errors": {"statements": [message]}}


def test_more_than_100_statements_are_refused_whole(fake):
    answer = post(fake, [make.removal_by_provider() for _ in range(101)])

    assert answer.status_code == 422
    assert answer.json()["errors"] == {"statements": ["The statements field must have between 1 and 100 items."]}
    assert fake.statements() == []


def test_a_body_sent_without_a_json_content_type_reads_as_no_statements(fake):
    statements = {"statements": [make.removal_by_provider()]}
    answer = httpx.post(f"{fake.url}/api/v1/statements", content=json.dumps(statements).encode(),
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"})

    assert answer.status_code == 422 and answer.json()["errors"] == {"statements": ["The statements field is required."]}


# --- Duplicates and tokens ------------------------------------------------------------------------

def test_a_puid_already_stored_refuses_the_whole_batch_naming_it(fake):
    first = [make.removal_by_provider() for _ in range(3)]
    assert post(fake, first).status_code == 201
    new = make.account_termination()

    answer = post(fake, [first[1], new])

    assert answer.status_code == 422
    assert answer.json() == {"message": DUPLICATE_MESSAGE, "errors": {"puid": [DUPLICATE_MESSAGE], "existing_puids": [first[1]["puid"]]}}
    assert new["puid"] not in fake.stored_puids()  # the new one went down with the batch
    assert fake.named_existing[first[1]["puid"]] == 1 and fake.received[first[1]["puid"]] == 2


def test_a_puid_twice_in_one_batch_is_refused_as_a_duplicate(fake):
    statement = make.removal_by_provider()

    answer = post(fake, [statement, dict(statement)])

    assert answer.status_code == 422 and answer.json()["errors"]["existing_puids"] == [statement["puid"]]
    assert fake.statements() == []


def test_field_errors_are_answered_before_duplicates(fake):
    stored = make.removal_by_provider()
    post(fake, [stored])

    answer = post(fake, [stored, make.removal_by_provider() | {"puid": "bad puid"}])

    assert answer.json() == {"errors": {"statement_1": {"puid": ["The puid format is invalid."]}}}


def test_puids_belong_to_a_platform(fake):
    fake.tokens["other-token"] = "Other Platform"
    statement = make.removal_by_provider()

    assert post(fake, [statement]).status_code == 201
    assert post(fake, [statement], token="other-token").status_code == 201
    assert fake.stored_puids("Acme Forum") == fake.stored_puids("Other Platform") == {statement["puid"]}


@pytest.mark.parametrize("authorization", [None, "Bearer not-the-token", f"Basic {TOKEN}", TOKEN])
def test_a_missing_or_unknown_token_is_answered_401_and_counts_nothing(fake, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    answer = httpx.post(f"{fake.url}/api/v1/statements", json={"statements": [make.removal_by_provider()]}, headers=headers)

    assert answer.status_code == 401 and answer.json() == {"message": "Unauthenticated."}
    assert fake.statements() == [] and not fake.received


def test_the_existing_puid_endpoint_answers_302_for_a_stored_puid_and_404_otherwise(fake):
    statement = make.removal_by_provider()
    post(fake, [statement])
    headers = {"Authorization": f"Bearer {TOKEN}"}

    found = httpx.get(f"{fake.url}/api/v1/statement/existing-puid/{statement['puid']}", headers=headers)
    missing = httpx.get(f"{fake.url}/api/v1/statement/existing-puid/never-sent", headers=headers)

    assert (found.status_code, found.json()) == (302, {"message": "statement of reason found", "puid": statement["puid"]})
    assert (missing.status_code, missing.json()) == (404, {"message": "statement of reason not found", "puid": "never-sent"})


def test_two_senders_with_the_same_batch_at_once_store_it_once(fake):
    """The check for stored puids and the insert are one step (the database's per-puid locks and
    unique index); the pause between them lets a second request in if they were not."""
    batch = [make.removal_by_provider() for _ in range(5)]
    arrived = threading.Semaphore(0)

    def pause():
        arrived.release()
        time.sleep(0.3)  # long enough for the other request to reach the same point, if it can

    fake.before_store = pause
    barrier, answers = threading.Barrier(2), []

    def send():
        barrier.wait()
        answers.append(post(fake, batch).status_code)

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(answers) == [201, 422]
    assert fake.stats["stored"] == 5 and all(fake.received[s["puid"]] == 2 for s in batch)


# --- Faults ---------------------------------------------------------------------------------------

def test_during_an_outage_every_request_is_answered_503_and_nothing_is_stored(fake):
    statement = make.removal_by_provider()
    fake.outage(0.5)

    answer = post(fake, [statement])

    assert answer.status_code == 503 and answer.json() == {"message": "Service Unavailable"}
    assert fake.statements() == []
    time.sleep(0.6)
    assert post(fake, [statement]).status_code == 201
    assert fake.received[statement["puid"]] == 2


def test_a_refusing_outage_closes_the_port_and_opens_it_again_on_the_same_address(fake):
    url = fake.url
    assert post(fake, [make.removal_by_provider()]).status_code == 201  # a kept-alive connection
    fake.outage(0.5, mode="refuse")

    with pytest.raises(httpx.TransportError):
        post(fake, [make.removal_by_provider()])
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/api/v1/statements", json={"statements": []})

    time.sleep(0.8)
    assert fake.url == url and post(fake, [make.removal_by_provider()]).status_code == 201


def test_a_slow_answer_after_storing_times_the_client_out_and_a_resend_is_answered_as_a_duplicate(fake):
    statement = make.removal_by_provider()
    fake.slow(5, delay_s=2.0, store=True)

    with pytest.raises(httpx.ReadTimeout):
        post(fake, [statement], timeout=0.3)

    assert fake.stored_puids() == {statement["puid"]}  # stored, though the client never heard
    answer = post(fake, [statement], timeout=5)  # answered late, but answered
    assert answer.status_code == 422 and answer.json()["errors"]["existing_puids"] == [statement["puid"]]


def test_a_slow_answer_without_storing_times_out_and_stores_nothing(fake):
    fake.slow(5, delay_s=0.6, store=False)

    with pytest.raises(httpx.ReadTimeout):
        post(fake, [make.removal_by_provider()], timeout=0.2)
    late = post(fake, [make.removal_by_provider()], timeout=5)  # waited out: a gateway's 504

    assert late.status_code == 504 and late.json() == {"message": "Gateway Timeout"}
    assert fake.statements() == [] and fake.stats["stored"] == 0


@pytest.mark.parametrize(("status", "body"), [(500, '{"message": "Server Error"}'), (429, "Limit Reached. Please do not overload the API")])
def test_fail_next_answers_the_next_requests_with_the_status_and_then_recovers(fake, status, body):
    statement = make.removal_by_provider()
    fake.fail_next(2, status=status)

    answers = [post(fake, [statement]) for _ in range(3)]

    assert [a.status_code for a in answers] == [status, status, 201]
    assert answers[0].text == body
    assert fake.sent_more_than_once() == {statement["puid"]: 3}


def test_bad_fault_settings_are_refused(fake):
    with pytest.raises(ValueError):
        fake.outage(1, mode="flaky")
    with pytest.raises(ValueError):
        fake.fail_next(1, status=404)
    with pytest.raises(ValueError):
        FakeTransparencyDatabase(host="0.0.0.0")


# --- Never a 500 ----------------------------------------------------------------------------------

FREE_TEXT = ["decision_facts", "incompatible_content_ground", "incompatible_content_explanation",
             "decision_ground_reference_url", "source_identity", "puid", "category_specification_other"]


@pytest.fixture(scope="module")
def shared_fake():
    with FakeTransparencyDatabase(tokens={TOKEN: "Acme Forum"}) as fake:
        yield fake


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.fixed_dictionaries({name: st.text(max_size=600) for name in FREE_TEXT}))
def test_any_unicode_in_the_free_text_fields_is_answered_201_or_422_naming_only_those_fields(shared_fake, texts):
    texts["puid"] = make.puid() + texts["puid"]  # unique, so no example is a duplicate of another
    answer = post(shared_fake, [make.removal_by_provider() | texts])

    assert answer.status_code in (201, 422), answer.text
    if answer.status_code == 422:
        assert set(answer.json()["errors"]) == {"statement_0"}
        assert set(answer.json()["errors"]["statement_0"]) <= set(FREE_TEXT)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["category", "content_type", "decision_visibility", "territorial_scope", "content_date",
                              "puid", "content_id", "decision_ground", "automated_detection", "end_date_account_restriction"]),
       value=JSON)
def test_any_json_value_in_any_field_is_answered_201_or_422(shared_fake, field, value):
    answer = post(shared_fake, [make.removal_by_provider() | {field: value}])

    assert answer.status_code in (201, 422), answer.text
