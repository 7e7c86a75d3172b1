"""The hot paths' shortcuts change no byte of the contract (docs/design.md, "Hot paths").

- FastJSONRenderer (orjson) writes what DRF's JSONRenderer writes, for any data, or defers to it.
- fast.text_submission accepts only what ReviewSubmitSerializer accepts, with the same data,
  on arbitrary and hostile bodies.
- A submission's answer, created, replayed or refused, is byte for byte the answer of the
  serializers alone.
- psycopg's cache of converted statements takes the one-statement writes (statement_cache).
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections import OrderedDict

from unittest.mock import patch

import pytest
from django.db import connection
from django.db.models.sql.compiler import SQLInsertCompiler
from django.test import RequestFactory
from hypothesis import HealthCheck, example, given, settings as hypothesis_settings, strategies as st
from rest_framework.exceptions import APIException
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from moderation.api import fast
from moderation.api.parsers import SafeJSONParser
from moderation.api.renderers import FastJSONRenderer, fast_json
from moderation.api.serializers import ReviewSerializer, ReviewSubmitSerializer
from tests.helpers import examples

FIELDS = ("external_id", "content_type", "text", "author_id", "media_url", "image_base64", "metadata")
HOSTILE = [
    "", " ", "\x00", "\u2028", "\u2029", "\ufeff", "\u200d", "\ud800", "\udfff", "\U0001f600", "e\u0301",
    "\x1b[31m", "<script>alert(1)</script>", "'; DROP TABLE x; --", "\u202e", "\x85", "\xa0", "\t\n\r",
    "a" * 256, "b" * 100_001, "\u3000", "\x7f", "\x9f",
]
hostile_text = st.one_of(st.text(), st.sampled_from(HOSTILE), st.lists(st.sampled_from(HOSTILE)).map("".join))

# --- rendering ------------------------------------------------------------------------------------

leaves = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), hostile_text,
    st.datetimes(timezones=st.sampled_from([datetime.UTC, None, datetime.timezone(datetime.timedelta(hours=5))])),
    st.dates(), st.uuids(), st.decimals(allow_nan=False, places=3),
)
json_like = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.one_of(hostile_text, st.integers()), inner, max_size=5),
    ),
    max_leaves=30,
)


def _render(renderer, data, media_type="application/json"):
    try:
        return renderer.render(data, media_type, {})
    except Exception as exc:  # noqa: BLE001 (the two must fail alike)
        return type(exc)


@given(json_like)
@hypothesis_settings(max_examples=examples(600), deadline=None)
@example({"score": 1e-05, "small": 9.999999e-05, "nan": 1.0})
@example({"when": datetime.datetime(2026, 12, 3, 13, 0, 0, 123456, tzinfo=datetime.UTC), "line": "a\u2028b"})
@example([float("nan")])
@example({1: "int key"})
def test_the_fast_renderer_writes_drfs_bytes_for_any_data(data):
    assert _render(FastJSONRenderer(), data) == _render(JSONRenderer(), data)


def test_the_fast_renderer_takes_the_hot_bodies_and_leaves_the_rest():
    body = {"id": 7, "duplicate": False, "outcome": "applied", "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            "review": uuid.uuid4(), "score": 0.25, "text": "l\u2028ine"}
    assert fast_json(body) == JSONRenderer().render(body)
    assert fast_json({"score": 1e-05}) is None  # orjson writes 0.00001
    assert fast_json({"n": 2**64}) is None
    assert fast_json({"x": float("inf")}) is None  # DRF refuses it (strict JSON)
    moved = OrderedDict(a=1, b=2)
    moved.move_to_end("a")  # iterated b, a; stored a, b: orjson would write the storage's order
    assert fast_json(moved) is None and FastJSONRenderer().render(moved) == b'{"b":2,"a":1}'
    indented = FastJSONRenderer().render(body, "application/json; indent=2", {})
    assert indented == JSONRenderer().render(body, "application/json; indent=2", {})


# --- validation -----------------------------------------------------------------------------------

values = st.one_of(hostile_text, st.none(), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2),
                   st.sampled_from(["text", "image", "audio", "metadata", "TEXT", " text"]))
plausible = st.fixed_dictionaries(
    {"external_id": hostile_text, "content_type": st.sampled_from(["text", "text", "image", "Text"]), "text": hostile_text},
    optional={"author_id": st.one_of(hostile_text, st.none()), "metadata": st.just({"a": 1}),
              "extra": st.just(1)},
)
bodies = st.one_of(plausible, st.dictionaries(st.sampled_from(FIELDS), values), st.lists(st.integers()), hostile_text)


def _request(raw: bytes, content_type: str):
    return RequestFactory().generic("POST", "/api/v1/reviews/", data=raw, content_type=content_type)


def _serializer_data(raw: bytes, content_type: str):
    """What the view's serializer path validates for this body: DRF's negotiation and parser, then
    ReviewSubmitSerializer; None when either refuses."""
    request = Request(_request(raw, content_type), parsers=[SafeJSONParser()])
    try:
        parsed = request.data
    except APIException:  # 415, 400: refused before the serializer
        return None
    submission = ReviewSubmitSerializer(data=parsed)
    return dict(submission.validated_data) if submission.is_valid() else None


CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "application/json; charset=UTF8",
                 "application/json; charset=latin-1", "text/plain", "APPLICATION/JSON", "application/ json",
                 "application /json", "application/json ; charset=utf-8", "application/*", "*/*",
                 "application/json; charset=bogus", "application/json; v=1", "application/jsonp"]


@given(body=bodies, ascii_only=st.booleans(), duplicate=st.booleans(), content_type=st.sampled_from(CONTENT_TYPES))
@hypothesis_settings(max_examples=examples(1500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(body={"external_id": "  padded  ", "content_type": "text", "text": "hi"}, ascii_only=True, duplicate=False,
         content_type="application/json")
@example(body={"external_id": "x", "content_type": "text", "text": "\ud800"}, ascii_only=True, duplicate=False,
         content_type="application/json")
@example(body={"external_id": "x", "content_type": "text", "text": "ok", "author_id": "a\x85"}, ascii_only=False,
         duplicate=False, content_type="application/json")
@example(body={"external_id": "e1", "content_type": "text", "text": "hi"}, ascii_only=True, duplicate=False,
         content_type="application/ json")
def test_a_fast_submission_is_one_the_serializer_accepts_with_the_same_data(body, ascii_only, duplicate, content_type):
    raw = json.dumps(body, ensure_ascii=ascii_only)
    if duplicate and isinstance(body, dict) and body:  # a repeated key: the last one counts, for both
        raw = raw[:-1] + ', "external_id": "dup"}'
    try:
        encoded = raw.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, unescaped: not UTF-8
        encoded = raw.encode("utf-8", "surrogatepass")
    accepted = fast.text_submission(_request(encoded, content_type))
    if accepted is not None:
        assert accepted == _serializer_data(encoded, content_type)


def test_bytes_that_are_not_utf8_are_the_serializers_to_refuse():
    raw = b'{"external_id":"\xff","content_type":"text","text":"x"}'
    assert fast.text_submission(_request(raw, "application/json")) is None
    assert _serializer_data(raw, "application/json") is None


def test_the_fast_path_takes_a_plain_text_submission():
    raw = json.dumps({"external_id": " e-1 ", "content_type": "text", "text": " héllo ", "author_id": None}).encode()
    assert fast.text_submission(_request(raw, "application/json")) == {
        "external_id": "e-1", "content_type": "text", "text": " héllo ", "author_id": None}
    assert fast.text_submission(_request(raw, "application/json; charset=latin-1")) is None


# --- whole answers ------------------------------------------------------------------------------------

CORPUS = [
    {"external_id": "c-1", "content_type": "text", "text": "thanks, this was helpful"},
    {"external_id": "c-2", "content_type": "text", "text": "\u202e\u2028<b>x</b>\U0001f600", "author_id": "ann \u200d"},
    {"external_id": " c-3 ", "content_type": "text", "text": "  spaced  ", "author_id": None},
    {"external_id": "c-4", "content_type": "metadata", "metadata": {"k": "v"}},
    {"external_id": "c-1", "content_type": "text", "text": "a repeat: the first review, 200"},
    {"external_id": "c-5", "content_type": "text", "text": " \t\n"},
    {"external_id": "c-6", "content_type": "text", "text": "x\x00y"},
    {"external_id": "", "content_type": "text", "text": "x"},
    {"external_id": "c-7", "content_type": "text", "text": "x", "author_id": "a\x07"},
    {"external_id": "c-8", "content_type": "text", "text": "x", "author_id": ""},
    {"external_id": "c-9", "content_type": "text", "text": "x", "colour": "red"},
    {"external_id": 9, "content_type": "text", "text": "x"},
    {"external_id": "c-10", "content_type": "text", "text": "y" * 100_001},
    {"external_id": "c-11", "content_type": "video", "text": "x"},
]


@pytest.mark.django_db
def test_every_answer_is_the_serializers_bytes(http, monkeypatch):
    old_bodies: list[bytes] = []
    build, validate = fast.created_review_body, fast.text_submission
    taken = []

    def also_the_serializer(review, *, author_id):
        # What the view rendered before the fast path: the serializer over the new review.
        review.report_count, review.latest_appeals = 0, []
        old_bodies.append(JSONRenderer().render(ReviewSerializer(review).data))
        return build(review, author_id=author_id)

    def counted(request):
        data = validate(request)
        taken.append(data is not None)
        return data

    monkeypatch.setattr(fast, "created_review_body", also_the_serializer)
    monkeypatch.setattr(fast, "text_submission", counted)
    refused = {}
    for body in CORPUS:
        answer = http.post("/api/v1/reviews/", body, format="json")
        if answer.status_code == 201:
            assert answer.content == old_bodies[-1], body
        else:
            refused[json.dumps(body)] = (answer.status_code, answer.content)
    assert len(old_bodies) == 4  # c-1 to c-4: the metadata one through the serializer, answered the same way
    assert taken.count(True) == 4  # c-1, c-2, c-3 and the repeat of c-1 took the fast path

    # The same refusals, and the same replay, with the fast path off: the serializers alone.
    monkeypatch.setattr(fast, "text_submission", lambda request: None)
    for body, (status_code, content) in refused.items():
        answer = http.post("/api/v1/reviews/", json.loads(body), format="json")
        assert (answer.status_code, answer.content) == (status_code, content), body
    assert {status for status, _ in refused.values()} == {200, 400}


@pytest.mark.django_db
def test_psycopg_reuses_its_conversion_of_a_submissions_one_statement(http):
    from psycopg import _queries

    def submit(n: int) -> None:
        answer = http.post("/api/v1/reviews/", {"external_id": f"cached-{n}", "content_type": "text",
                                                "text": "hello", "author_id": "ann"}, format="json")
        assert answer.status_code == 201

    # Server-side binding (DB_PREPARE_THRESHOLD set) converts to $n; client-side binding has its own cache.
    server_side = connection.settings_dict["OPTIONS"].get("server_side_binding")
    cache = _queries._query2pg if server_side else _queries._query2pg_client
    submit(1)
    before = cache.cache_info()
    submit(2)
    after = cache.cache_info()
    assert (after.misses, after.hits > before.hits) == (before.misses, True)


@pytest.mark.django_db
def test_an_api_request_skips_the_sites_messages_and_history_and_the_admin_keeps_them(http, client):
    api = http.get("/api/v1/reviews/")
    assert api.status_code == 200 and not hasattr(api.wsgi_request, "_messages")
    admin = client.get("/admin/login/")
    assert admin.status_code == 200 and hasattr(admin.wsgi_request, "_messages")


@pytest.mark.django_db
def test_the_enqueueing_broker_writes_the_row_django_q2s_own_broker_writes(settings):
    from django_q.brokers.orm import ORM
    from django_q.models import OrmQ

    from moderation.jobs import job_broker

    broker = job_broker(settings.Q_NAME)
    broker.enqueue("warm")  # (the shape's first INSERT is compiled)
    compiled = []
    as_sql = SQLInsertCompiler.as_sql
    with patch.object(SQLInsertCompiler, "as_sql", lambda self, *a, **k: compiled.append(self) or as_sql(self, *a, **k)):
        ours = OrmQ.objects.get(pk=broker.enqueue("payload"))
    assert compiled == [], "the broker compiled its INSERT again"
    theirs = OrmQ.objects.get(pk=ORM(list_key=settings.Q_NAME).enqueue("payload"))
    assert (ours.key, ours.payload) == (theirs.key, theirs.payload) == (settings.Q_NAME, "payload")
    assert ours.pk < theirs.pk and ours.lock <= theirs.lock


@pytest.mark.django_db
def test_a_submission_body_up_to_its_limit_is_read_not_refused_by_djangos_own(http, settings):
    """Django refuses to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MiB by default); a
    submission may be SUBMISSION_MAX_BODY_BYTES (an image as base64): judged, not a 500."""
    from django.conf import global_settings

    image = "A" * (global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024)  # valid base64, not an image
    assert len(image) < settings.SUBMISSION_MAX_BODY_BYTES
    answer = http.post("/api/v1/reviews/", {"external_id": "big", "content_type": "image", "image_base64": image},
                       format="json")
    assert answer.status_code == 400, answer.content
    assert "image_base64" in answer.json()["fields"]
