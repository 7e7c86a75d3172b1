from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from moderation import services
from moderation.models import Content, ContentReview
from tests.helpers import assert_max_queries, decided, submit

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
    def test_a_new_submission_is_201_with_the_pending_review(self, http, api_client, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks() as callbacks:
            response = http.post(URL, body(metadata={"lang": "en"}), format="json")

        assert response.status_code == 201
        data = response.json()
        assert (data["status"], data["external_id"], data["content_type"], data["decision"]) == (
            "pending", "post-1", "text", None
        )
        review = ContentReview.objects.get(pk=data["id"])
        assert review.client == api_client and review.content.metadata == {"lang": "en"}
        assert len(callbacks) == 1  # the moderation job, enqueued after commit

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
        with assert_max_queries(3):  # auth + one page with its decisions, policies and report counts + its appeals
            assert len(http.get(URL).json()["results"]) == 3
