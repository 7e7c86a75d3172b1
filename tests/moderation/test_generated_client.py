"""A client generated from /api/schema/ with openapi-python-client (offline, no post-hooks) works
against the live server as generated: submit, get, list, timeline, report, appeal and the error
bodies all parse into its typed models."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from tests.helpers import decided

GENERATOR = Path(sys.executable).parent / "openapi-python-client"


@pytest.fixture
def generated(live_server, tmp_path):
    """Generate the client package `moderation_client` from the live schema and import it."""
    schema = tmp_path / "schema.json"
    schema.write_bytes(httpx.get(f"{live_server.url}/api/schema/?format=json", timeout=30).content)
    config = tmp_path / "config.yaml"
    config.write_text("post_hooks: []\npackage_name_override: moderation_client\n")
    run = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(schema), "--output-path", str(tmp_path / "moderation_client"),
         "--config", str(config), "--meta", "none", "--fail-on-warning"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield lambda name: importlib.import_module(f"moderation_client.{name}")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == "moderation_client" or n.startswith("moderation_client.")]:
            del sys.modules[name]


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_works_against_the_live_server_without_workarounds(
    generated, live_server, api_client, settings
):
    settings.THROTTLE_CLIENT_RATE = "100000/min"
    api, models = (lambda op: generated(f"api.v1.{op}")), generated("models")
    client = generated("client").AuthenticatedClient(base_url=live_server.url, token=api_client.token)
    stranger = generated("client").AuthenticatedClient(base_url=live_server.url, token="not-a-token")
    rejected, approved = decided(api_client, "rejected"), decided(api_client, "approved")
    # What used to need workarounds: a required submission body, required and typed decision and
    # page fields, the status filter as the status enum.
    def annotation(op, name):
        return str(inspect.signature(api(op).sync_detailed).parameters[name].annotation)
    assert "Unset" not in annotation("v1_reviews_create", "body")
    assert "ReviewStatusEnum" in annotation("v1_reviews_list", "status")
    for model in (models.Decision, models.PaginatedReviewList, models.Review):
        assert "Unset" not in str(inspect.get_annotations(model)), model

    submitted = api("v1_reviews_create").sync_detailed(client=client, body=models.TextSubmissionRequest(
        external_id=uuid.uuid4().hex, content_type=models.TextSubmissionContentTypeEnum.TEXT, text="hello there"))
    assert submitted.status_code == 201 and isinstance(submitted.parsed, models.Review)
    assert submitted.parsed.content_type == models.ReviewContentTypeEnum.TEXT and submitted.parsed.decision is None

    review = api("v1_reviews_retrieve").sync(client=client, id=rejected.pk)
    decision = review.decision
    assert isinstance(decision, models.Decision) and decision.decided_by == models.DecisionSourceEnum.PROVIDER
    assert decision.categories.additional_properties == {"harassment": True}
    assert decision.category_scores.additional_properties == {"harassment": 0.95}
    assert [(r.category, r.score) for r in decision.reasons] == [("harassment", 0.95)]
    assert review.report_count == 0 and review.appeal is None

    page = api("v1_reviews_list").sync(client=client, status=models.ReviewStatusEnum.REJECTED)
    assert [r.id for r in page.results] == [rejected.pk] and page.next_ is None and page.previous is None

    timeline = api("v1_reviews_timeline_list").sync(client=client, id=rejected.pk)
    assert {entry.kind for entry in timeline} >= {models.KindEnum.SUBMITTED, models.KindEnum.DECISION}

    report = api("v1_reviews_reports_create").sync_detailed(client=client, id=approved.pk, body=models.ReportCreateRequest(
        reporter_id="user-1", reason="harassment"))
    assert report.status_code == 201 and report.parsed.report_count == 1

    appeal = api("v1_reviews_appeals_create").sync_detailed(client=client, id=rejected.pk, body=models.AppealCreateRequest(
        appellant_id="owner", statement="it was a quote"))
    assert appeal.status_code == 201 and appeal.parsed.status == models.AppealStatusEnum.OPEN
    after = api("v1_reviews_retrieve").sync(client=client, id=rejected.pk)
    assert after.status == models.ReviewStatusEnum.MANUAL_REVIEW and after.appeal.id == appeal.parsed.id

    errors = [
        api("v1_reviews_appeals_create").sync_detailed(client=client, id=rejected.pk, body=models.AppealCreateRequest(
            appellant_id="owner", statement="again")),
        api("v1_reviews_reports_create").sync_detailed(client=client, id=approved.pk, body=models.ReportCreateRequest(
            reporter_id="user-2", reason="not-a-category")),
        api("v1_reviews_retrieve").sync_detailed(client=client, id=uuid.uuid4()),
        api("v1_reviews_retrieve").sync_detailed(client=stranger, id=rejected.pk),
    ]
    assert [(e.status_code, e.parsed.error) for e in errors] == [
        (409, "appeal_exists"), (400, "invalid"), (404, "not_found"), (401, "authentication_failed")]
    assert all(isinstance(e.parsed, models.Error) for e in errors)
    assert "reason" in errors[1].parsed.fields.additional_properties


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_reads_and_appeals_an_author_whose_id_holds_a_slash(generated, live_server, api_client,
                                                                              settings, django_user_model):
    from moderation import services
    from moderation.models import Author

    settings.THROTTLE_CLIENT_RATE = "100000/min"
    api, models = (lambda op: generated(f"api.v1.{op}")), generated("models")
    client = generated("client").AuthenticatedClient(base_url=live_server.url, token=api_client.token)
    submitted = api("v1_reviews_create").sync_detailed(client=client, body=models.TextSubmissionRequest(
        external_id="e1", content_type=models.TextSubmissionContentTypeEnum.TEXT, text="hi", author_id="team/Zoë"))
    assert submitted.status_code == 201 and submitted.parsed.author_id == "team/Zoë"
    moderator = django_user_model.objects.create_user("mod-a", is_staff=True)
    ban = services.author_act(author_pk=Author.objects.get().pk, moderator=moderator, action="ban", reason="spam")

    appeal = api("v1_authors_appeals_create").sync_detailed(client=client, author_id="team/Zoë",
                                                              body=models.AccountAppealCreateRequest(statement="no"))
    assert appeal.status_code == 201 and appeal.parsed.status == models.AccountAppealStatusEnum.OPEN
    page = api("v1_authors_retrieve").sync(client=client, author_id="team/Zoë")
    assert isinstance(page, models.Author) and page.standing == models.StandingEnum.BANNED
    assert page.restriction.action == models.RestrictionActionEnum.BAN and page.restriction.action_id == ban.pk
    assert page.actions[0].appeal.id == appeal.parsed.id and page.actions[0].statement.automated is False
    erased = api("authors_content_erase").sync(client=client, author_id="team/Zoë")
    assert (erased.erased, erased.remaining) == (1, 0)
    missing = api("v1_authors_retrieve").sync_detailed(client=client, author_id="nobody")
    assert missing.status_code == 404 and missing.parsed.error == "not_found"
