from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from moderation.models import ContentReview, ModerationRequest
from moderation.providers import Accepted
from tests.helpers import claimed, decided, queued_tasks


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


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
        output = run("reprocess_reviews", "--status", "rejected")
        assert f"would reprocess {review.pk}" in output and "dry run: 1 reviews" in output
        review.refresh_from_db()
        assert review.status == "rejected" and not queued_tasks()

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


@pytest.mark.django_db(transaction=True)
class TestReconcileStuck:
    def test_dry_run_then_for_real(self, api_client, scripted):
        from moderation import services

        scripted.script = [Accepted("prov-1")]
        review, request = claimed(api_client)
        services.request_dispatch(request_id=request.pk, worker_id="w1")
        ModerationRequest.objects.filter(pk=request.pk).update(updated_at=timezone.now() - timedelta(minutes=20))

        dry = run("reconcile_stuck", "--older-than", "600")
        real = run("reconcile_stuck", "--older-than", "600", "--for-real")

        assert f"would reconcile {review.pk}" in dry and "dry run: 1 reviews" in dry
        assert real.strip() == "reconciled 1 reviews: 1 superseded"
        request.refresh_from_db()
        assert request.status == "superseded"
        assert abs(request.updated_at - timezone.now()) < timedelta(seconds=30)  # real time, not a shifted one
        assert run("reconcile_stuck", "--older-than", "600").strip().startswith("dry run: 0 reviews")
