"""The moderation app's management commands, one class per command: what each prints, what it
changes (dry run by default where it is destructive), and its clear errors."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from moderation import services
from moderation.models import ApiClient, ContentReview
from moderation.providers import Accepted
from tests.helpers import claimed, decided, queued_tasks, silent_for


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
class TestCreateApiClient:
    def test_the_token_is_the_last_line_and_authenticates(self):
        output = run("create_api_client", "shop", "--webhook-url", "https://shop.example.com/hooks")

        token = output.strip().splitlines()[-1]
        client = services.api_client_authenticate(token)
        assert client.name == "shop" and client.webhook_url == "https://shop.example.com/hooks"
        assert token not in ApiClient.objects.values_list("token_hash", flat=True)

    def test_a_taken_name_is_refused(self):
        run("create_api_client", "shop")
        with pytest.raises(CommandError, match="already exists"):
            run("create_api_client", "shop")
        assert ApiClient.objects.count() == 1

    def test_a_bad_webhook_url_is_refused(self):
        with pytest.raises(CommandError, match="valid URL"):
            run("create_api_client", "shop", "--webhook-url", "javascript:alert(1)")
        assert not ApiClient.objects.exists()


@pytest.mark.django_db
class TestRevokeApiClient:
    def test_a_revoked_token_is_401_at_once(self, http, api_client):
        assert http.get("/api/v1/reviews/").status_code == 200

        output = run("revoke_api_client", api_client.name)

        response = http.get("/api/v1/reviews/")
        assert "revoked" in output
        assert response.status_code == 401 and response.json()["error"] == "authentication_failed"

    def test_an_unknown_client_is_a_clear_error(self):
        with pytest.raises(CommandError, match="no API client"):
            run("revoke_api_client", "nobody")


@pytest.mark.django_db
class TestBootstrapDemo:
    def test_creates_credentials_once_and_saves_them(self, tmp_path, monkeypatch, django_user_model, settings):
        from moderation.management.commands import bootstrap_demo

        settings.DEBUG = True  # a local run (pytest-django turns DEBUG off)
        saved = tmp_path / "creds.txt"
        monkeypatch.setattr(bootstrap_demo, "CREDENTIALS_FILE", saved)

        first = run("bootstrap_demo")
        second = run("bootstrap_demo")

        token = first.split("API token: ")[1].split()[0]
        assert services.api_client_authenticate(token).name == "demo"
        assert django_user_model.objects.get(username="admin").is_superuser
        assert token in saved.read_text() and oct(saved.stat().st_mode)[-3:] == "600"
        assert "already exist" in second
        assert ApiClient.objects.count() == 1

    def test_refused_outside_debug(self, settings):
        settings.DEBUG = False
        with pytest.raises(CommandError, match="local runs only"):
            run("bootstrap_demo")


@pytest.mark.django_db
class TestReviewTimeline:
    def test_text_lists_every_step_with_its_ids(self, api_client):
        review = decided(api_client, "rejected")
        key = review.decision.request.idempotency_key
        output = run("review_timeline", str(review.pk))
        assert f"review {review.pk}  status rejected" in output
        for text in ("submitted", "job_enqueued", "operation started", "pending -> processing", "processing -> rejected"):
            assert text in output
        assert f"idempotency_key={key}" in output

    def test_json_by_content_id_and_by_external_id(self, api_client):
        review = decided(api_client, "approved")
        by_content = json.loads(run("review_timeline", "--content-id", str(review.content_id), "--json"))
        by_external = json.loads(run("review_timeline", "--content-id", review.content.external_id, "--json"))
        assert by_content == by_external
        assert by_content["review_id"] == str(review.pk)
        assert [e["kind"] for e in by_content["entries"]][0] == "submitted"

    @pytest.mark.parametrize("args", [[], ["not-a-uuid"], ["5b0c7d5e-8f1e-4c1e-9a6e-2f1f0f0f0f0f"], ["x", "--content-id", "y"]])
    def test_bad_selection_is_a_clear_error(self, api_client, args):
        with pytest.raises(CommandError):
            run("review_timeline", *args)


@pytest.mark.django_db
class TestReprocessReviews:
    def test_a_dry_run_is_the_default(self, api_client):
        review = decided(api_client, "rejected")
        before = queued_tasks()  # (the submission's own job, written with it)
        output = run("reprocess_reviews", "--status", "rejected")
        assert f"would reprocess {review.pk}" in output and "dry run: 1 reviews" in output
        review.refresh_from_db()
        assert review.status == "rejected" and queued_tasks() == before

    def test_for_real_by_status_and_date_range(self, api_client):
        old, new, other = decided(api_client, "rejected"), decided(api_client, "rejected"), decided(api_client, "approved")
        ContentReview.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
        since = (timezone.now() - timedelta(days=1)).date().isoformat()

        output = run("reprocess_reviews", "--status", "rejected", "--since", since, "--for-real")

        assert output.strip() == "1 reprocessed"
        statuses = dict(ContentReview.objects.values_list("pk", "status"))
        assert (statuses[old.pk], statuses[new.pk], statuses[other.pk]) == ("rejected", "pending", "approved")

    def test_undecided_and_unknown_reviews_are_not_selected_and_said_so(self, api_client):
        done = decided(api_client, "approved")
        busy, _ = claimed(api_client)
        out, err = StringIO(), StringIO()
        call_command("reprocess_reviews", str(done.pk), str(busy.pk), "5b0c7d5e-8f1e-4c1e-9a6e-2f1f0f0f0f0f",
                     "--for-real", stdout=out, stderr=err)
        assert out.getvalue().strip() == "1 reprocessed"
        assert f"not reprocessing {busy.pk}: it is processing" in err.getvalue()
        assert "no review 5b0c7d5e-8f1e-4c1e-9a6e-2f1f0f0f0f0f" in err.getvalue()
        with pytest.raises(CommandError, match="UUIDs"):
            run("reprocess_reviews", "not-an-id")

    def test_nothing_selected_is_an_error(self, api_client):
        with pytest.raises(CommandError, match="choose reviews"):
            run("reprocess_reviews")
        with pytest.raises(CommandError, match="ISO date"):
            run("reprocess_reviews", "--since", "yesterday")


@pytest.mark.usefixtures("on_commit_callbacks_run")
class TestReconcileStuck:
    def test_dry_run_then_for_real(self, api_client, scripted):
        scripted.script = [Accepted("prov-1")]
        review, request = claimed(api_client)
        services.request_dispatch(request_id=request.pk, worker_id="w1")
        silent_for(request, 20 * 60)

        dry = run("reconcile_stuck", "--older-than", "600")
        real = run("reconcile_stuck", "--older-than", "600", "--for-real")

        assert f"would reconcile {review.pk}" in dry and "dry run: 1 reviews" in dry
        assert real.strip() == "reconciled 1 reviews: 1 superseded"
        request.refresh_from_db()
        assert request.status == "superseded"
        assert abs(request.updated_at - timezone.now()) < timedelta(seconds=30)  # real time, not a shifted one
        assert run("reconcile_stuck", "--older-than", "600").strip().startswith("dry run: 0 reviews")


@pytest.mark.django_db
class TestRetryPolicy:
    def test_webhook_budget_lists_every_layer_and_the_worst_case(self, settings):
        settings.MODERATION_PROVIDER, settings.MODERATION_MAX_ATTEMPTS = "webhook", 3
        settings.MODERATION_MAX_SUPERSEDES, settings.PROVIDER_HTTP_RETRIES = 2, 1

        output = run("retry_policy")

        for layer in ("HTTP client", "provider attempts", "django-q2 task", "reconcile", "webhook re-delivery"):
            assert layer in output
        assert "     3  operations (idempotency keys)" in output
        assert "     9  provider requests sent" in output
        assert "    18  connection tries" in output
        assert "     3  logical executions at the provider" in output  # the key de-duplicates retries
        assert "WARNING" not in output

    def test_a_provider_that_ignores_the_key_is_warned_about_and_counted(self, settings):
        settings.MODERATION_PROVIDER, settings.MODERATION_MAX_ATTEMPTS, settings.MODERATION_MAX_SUPERSEDES = "openai", 3, 2

        output = run("retry_policy")

        assert "     9  logical executions at the provider" in output
        assert "WARNING provider attempts (our records): the openai provider ignores Idempotency-Key" in output

    def test_broker_redelivery_of_failed_tasks_is_warned_about(self, settings):
        settings.Q_CLUSTER = {**settings.Q_CLUSTER, "max_attempts": 3}
        assert "WARNING django-q2 task: max_attempts != 1" in run("retry_policy")


@pytest.mark.django_db
class TestSetupRoles:
    def test_it_is_idempotent_and_gives_each_role_its_permissions(self):
        for _ in range(2):
            output = run("setup_roles")
        perms = {g.name: {p.codename for p in g.permissions.all()} for g in Group.objects.all()}
        assert "override_review" in perms["moderator"] and "reprocess_review" not in perms["moderator"]
        assert {"reprocess_review", "add_moderationpolicy"} <= perms["supervisor"]
        assert all(p.startswith("view_") for p in perms["auditor"])
        assert "moderator:" in output
        from moderation.roles import ROLES  # each group holds exactly its role's permissions
        assert {name: {f"{p.content_type.app_label}.{p.codename}" for p in g.permissions.all()}
                for g in Group.objects.all() for name in [g.name]} == {name: set(codes) for name, codes in ROLES.items()}

    def test_a_role_naming_a_permission_that_does_not_exist_is_refused_by_name(self, monkeypatch):
        from django.contrib.auth.models import Permission

        from moderation import roles

        monkeypatch.setitem(roles.ROLES, "moderator", [*roles.ROLES["moderator"], "moderation.fly_review"])
        with pytest.raises(Permission.DoesNotExist, match="moderation.fly_review"):
            roles.ensure_roles()
