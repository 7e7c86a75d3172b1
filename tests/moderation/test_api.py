"""The client API: /api/v1/reviews/ (submit, with an Idempotency-Key too; list; read; a review's
timeline), its authentication, limits and error bodies."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from rest_framework.test import APIClient

from moderation import services
from moderation.models import Content, ContentReview, IdempotencyRecord
from moderation.observability.timeline import review_timeline
from tests.helpers import assert_max_queries, collide, decided, queued_tasks, submit

URL = "/api/v1/reviews/"


def body(**overrides):
    return {"external_id": "post-1", "content_type": "text", "text": "hello world", **overrides}


@pytest.mark.django_db
class TestAuthentication:
    def test_a_request_without_a_token_is_401(self, api_client):
        response = APIClient().get(URL)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert response.json()["error"] == "not_authenticated"

    @pytest.mark.parametrize("header", ["Bearer mod_wrong", "Bearer ", "Bearer a b", "Token abc"])
    def test_a_bad_token_is_401(self, api_client, header):
        http = APIClient()
        http.credentials(HTTP_AUTHORIZATION=header)
        assert http.get(URL).status_code == 401

    def test_a_deactivated_client_is_401(self, api_client, http):
        type(api_client).objects.filter(pk=api_client.pk).update(is_active=False)
        assert http.get(URL).status_code == 401

    def test_only_a_hash_of_the_token_is_stored(self, api_client):
        stored = type(api_client).objects.get(pk=api_client.pk)
        assert api_client.token not in (stored.token_hash, stored.token_prefix)
        assert stored.token_hash == services.clients.hash_token(api_client.token)


@pytest.mark.django_db
class TestSubmit:
    def test_a_new_submission_is_201_with_the_pending_review(self, http, api_client):
        response = http.post(URL, body(metadata={"lang": "en"}), format="json")

        assert response.status_code == 201
        data = response.json()
        assert (data["status"], data["external_id"], data["content_type"], data["decision"]) == (
            "pending", "post-1", "text", None
        )
        review = ContentReview.objects.get(pk=data["id"])
        assert review.client == api_client and review.content.metadata == {"lang": "en"}
        # The moderation job, written with the review (moderation/jobs.py: the ORM broker here).
        assert [task["kwargs"]["review_id"] for task in queued_tasks("moderation.tasks.moderate_review")] == [review.pk]

    def test_the_same_external_id_again_returns_the_existing_review(self, http):
        first = http.post(URL, body(), format="json")
        again = http.post(URL, body(text="different text"), format="json")

        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["id"] == first.json()["id"]
        assert ContentReview.objects.count() == 1
        assert Content.objects.get().text == "hello world"

    def test_another_client_may_use_the_same_external_id(self, http, other_client):
        other = APIClient()
        other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_client.token}")
        assert http.post(URL, body(), format="json").status_code == 201
        assert other.post(URL, body(), format="json").status_code == 201

    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"content_type": "text", "text": "x"}, "external_id"),
            (body(content_type="video"), "content_type"),
            (body(text=""), "text"),
            (body(text="   "), "text"),
            (body(text=None), "text"),
            (body(text=12), "text"),
            (body(text="x" * 100_001), "text"),
            (body(text="nul\x00byte"), "text"),
            (body(external_id="x" * 256), "external_id"),
            (body(content_type="image", text=""), "media_url"),
            (body(content_type="image", media_url="not a url"), "media_url"),
            (body(content_type="image", media_url="ftp://host/x.png"), "media_url"),
            (body(content_type="metadata", metadata=[1, 2]), "metadata"),
            (body(content_type="metadata", metadata={"a": "nul\x00"}), "metadata"),
            (body(content_type="metadata"), "metadata"),
            (body(media_url="https://example.com/a.png"), "media_url"),
            (body(surprise=1), "surprise"),
        ],
    )
    def test_bad_input_is_400_with_field_errors_and_writes_nothing(self, http, payload, field):
        response = http.post(URL, payload, format="json")

        assert response.status_code == 400, response.content
        assert response.json()["error"] == "invalid"
        assert field in response.json()["fields"]
        assert Content.objects.count() == ContentReview.objects.count() == 0

    @pytest.mark.parametrize(
        "raw",
        [
            "[" * 200_000,
            '{"external_id": "x", "content_type": "metadata", "metadata": {"a": "\\ud800"}}',
            '{"external_id": "x", "content_type": "metadata", "metadata": {"\\udfff": 1}}',
        ],
    )
    def test_hostile_json_is_400_not_500(self, http, raw):
        response = http.post(URL, raw, content_type="application/json")
        assert response.status_code == 400, response.content[:200]
        assert Content.objects.count() == 0

    def test_a_body_that_is_not_json_is_400(self, http):
        response = http.post(URL, "{not json", content_type="application/json")
        assert response.status_code == 400
        assert response.json()["error"] == "parse_error"

    def test_an_oversized_body_is_413_without_being_read(self, http, settings):
        # A submission has its own limit (it may carry an image as base64: config/settings.py).
        settings.SUBMISSION_MAX_BODY_BYTES = 10_000
        response = http.post(URL, body(text="x" * 20_000), format="json")
        assert response.status_code == 413 and response.json()["error"] == "too_large"
        assert not Content.objects.exists()

    def test_a_callback_takes_its_own_bound_not_the_apis(self, client, settings):
        # One rule for the web server and Django (moderation/api/middleware.py api_body_limit).
        settings.API_MAX_BODY_BYTES, settings.CALLBACK_MAX_BYTES = 1_000, 100_000
        body_of = lambda size: {"type": "moderation.completed", "pad": "x" * size}  # noqa: E731
        under = client.post("/api/v1/callbacks/webhook/", body_of(50_000), content_type="application/json")
        over = client.post("/api/v1/callbacks/webhook/", body_of(150_000), content_type="application/json")
        assert under.status_code == 401  # past the bound check: refused for its missing signature
        assert over.status_code == 413 and over.json()["error"] == "too_large"

    def test_unicode_is_kept_as_sent(self, http):
        text = "Grüße 👋 — ﷺ  \u202e"
        response = http.post(URL, body(text=text), format="json")
        assert response.status_code == 201
        assert Content.objects.get().text == text

    def test_submit_runs_a_bounded_number_of_queries(self, http, api_client):
        http.get(URL)  # warm the client lookup path
        # auth, existing?, content, review, history row, the job's timeline entry
        # (the job itself is enqueued after commit)
        with assert_max_queries(6):
            assert http.post(URL, body(), format="json").status_code == 201


@pytest.mark.django_db
class TestRead:
    def test_a_review_shows_its_status_and_decision(self, http, api_client):
        review = decided(api_client, "rejected")

        data = http.get(f"{URL}{review.pk}/").json()

        assert data["status"] == "rejected"
        decision = data["decision"]
        assert (decision["label"], decision["source"], decision["policy_version"]) == ("rejected", "provider", 1)
        assert decision["category_scores"] == {"harassment": 0.95}
        assert decision["decided_by"] == "provider" and decision["automated"] is True

    def test_another_clients_review_is_404(self, http, other_client):
        theirs = submit(other_client)
        response = http.get(f"{URL}{theirs.pk}/")
        assert response.status_code == 404
        assert response.json()["error"] == "not_found"

    def test_a_malformed_id_is_404(self, http):
        assert http.get(f"{URL}not-a-uuid/").status_code == 404

    def test_the_list_filters_by_status_and_pages_newest_first(self, http, api_client, other_client):
        approved = [decided(api_client, "approved") for _ in range(3)]
        submit(api_client)
        submit(other_client)

        page = http.get(URL, {"status": "approved", "page_size": 2}).json()
        rest = http.get(page["next"]).json()

        ids = [r["id"] for r in page["results"] + rest["results"]]
        assert ids == [str(r.pk) for r in reversed(approved)]
        assert rest["next"] is None
        assert len(http.get(URL).json()["results"]) == 4

    def test_an_unknown_status_filter_is_400(self, http):
        response = http.get(URL, {"status": "maybe"})
        assert response.status_code == 400
        assert "status" in response.json()["fields"]

    def test_the_list_runs_a_bounded_number_of_queries(self, http, api_client):
        for label in ("approved", "rejected", "manual_review"):
            decided(api_client, label)
        # auth + the client's rate count + one page with its decisions, policies and report counts + its appeals
        with assert_max_queries(4):
            assert len(http.get(URL).json()["results"]) == 3


def post_with_key(client, data, key="key-1"):
    return client.post(URL, data, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.django_db
class TestIdempotencyKey:
    """POST /api/v1/reviews/ with an Idempotency-Key, the way Stripe does it."""

    def test_the_same_key_and_body_replays_the_first_response(self, http):
        first = post_with_key(http, body())
        again = post_with_key(http, {"text": "hello world", "content_type": "text", "external_id": "post-1"})  # reordered

        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()
        assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
        assert ContentReview.objects.count() == 1

    def test_the_same_key_with_another_body_is_422_and_changes_nothing(self, http):
        post_with_key(http, body())
        response = post_with_key(http, body(external_id="post-2"))

        assert response.status_code == 422
        assert response.json()["error"] == "idempotency_key_reused"
        assert ContentReview.objects.count() == 1

    def test_a_rejected_request_does_not_use_up_its_key(self, http):
        assert post_with_key(http, body(text="")).status_code == 400
        assert not IdempotencyRecord.objects.exists()
        assert post_with_key(http, body()).status_code == 201

    def test_keys_belong_to_one_client(self, http, other_client):
        theirs = APIClient()
        theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {other_client.token}")
        assert post_with_key(http, body()).status_code == 201
        assert post_with_key(theirs, body(external_id="other")).status_code == 201

    @pytest.mark.parametrize("key", ["", "k" * 256, "tab\there"])
    def test_a_malformed_key_is_400(self, http, key):
        response = post_with_key(http, body(), key=key)
        assert response.status_code == 400 and "Idempotency-Key" in response.json()["fields"]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_requests_with_one_key_make_one_review_and_the_same_answer(api_client):
    for round_no in range(5):
        def send(i, round_no=round_no):
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_client.token}")
            try:
                response = post_with_key(client, body(external_id=f"race-{round_no}"), key=f"race-key-{round_no}")
                return response.status_code, response.json()["id"], response.get("Idempotent-Replayed")
            finally:
                connection.close()

        answers = collide(3, send)

        assert {status for status, _, _ in answers} == {201}, answers
        assert len({review_id for _, review_id, _ in answers}) == 1
        assert sorted(str(r) for _, _, r in answers) == ["None", "true", "true"]
    assert ContentReview.objects.count() == 5


def timeline_url(review) -> str:
    return f"{URL}{review.pk}/timeline/"


@pytest.mark.django_db
class TestTimeline:
    def test_the_owning_client_gets_the_same_timeline_as_the_admin_page(self, http, api_client):
        review = decided(api_client, "rejected")

        entries = http.get(timeline_url(review)).json()

        assert [(e["kind"], e["source"]) for e in entries] == [(e.kind, e.source) for e in review_timeline(review)]
        # A client does not see who at the platform handled it.
        assert not any("worker_id" in e["ids"] or "actor" in e["detail"] or e["payload"] for e in entries)
        assert entries[0]["kind"] == "submitted" and entries[0]["ids"]["review_id"] == str(review.pk)
        assert any(e["kind"] == "transition" and e["ids"].get("idempotency_key") for e in entries)

    def test_another_client_and_anonymous_callers_get_nothing(self, http, other_client):
        theirs = decided(other_client, "approved")
        assert http.get(timeline_url(theirs)).status_code == 404
        assert APIClient().get(timeline_url(theirs)).status_code == 401

    def test_staff_with_view_permission_may_read_any_timeline(self, api_client, django_user_model):
        review = decided(api_client, "approved")
        moderator = django_user_model.objects.create_user("mia", is_staff=True)
        moderator.groups.add(Group.objects.get(name="moderator"))
        plain = django_user_model.objects.create_user("joe", is_staff=True)
        session = APIClient()

        session.force_login(moderator)
        assert session.get(timeline_url(review)).status_code == 200
        session.force_login(plain)
        assert session.get(timeline_url(review)).status_code == 404


@pytest.mark.django_db
class TestLimitsAndErrors:
    def test_a_client_over_its_rate_is_429_with_retry_after(self, http, other_client, settings, fresh_throttles):
        settings.THROTTLE_CLIENT_RATE = "3/min"
        answers = [http.get(URL).status_code for _ in range(4)]
        theirs = APIClient()
        theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {other_client.token}")
        assert answers == [200, 200, 200, 429]
        throttled = http.get(URL)
        assert throttled.json()["error"] == "throttled" and int(throttled["Retry-After"]) > 0
        assert theirs.get(URL).status_code == 200  # per client

    def test_unknown_api_urls_and_crashes_answer_json_not_html(self, http, monkeypatch):
        missing = http.get("/api/v1/nothing-here/")
        assert missing.status_code == 404 and missing.json() == {"error": "not_found", "detail": "Not Found"}
        from moderation.api import views

        monkeypatch.setattr(views.ReviewListCreateView, "get", lambda *a, **k: 1 / 0)
        crash = APIClient(raise_request_exception=False)
        crash.credentials(HTTP_AUTHORIZATION=http._credentials["HTTP_AUTHORIZATION"])
        response = crash.get(URL)
        assert response.status_code == 500 and response.json()["error"] == "server_error"
        assert "ZeroDivisionError" not in response.content.decode()
