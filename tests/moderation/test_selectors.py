"""One definition of "stuck" (moderation.selectors), and every place that counts it agrees."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from moderation.models import ModerationRequest
from moderation.observability.dashboard import dashboard_figures
from prometheus_client import generate_latest

from moderation.observability.metrics import registry
from moderation.selectors import stuck_review_ids, stuck_reviews
from tests.helpers import claimed, silent_for

pytestmark = pytest.mark.django_db


def test_the_dashboard_the_gauge_the_filter_and_reconcile_stuck_agree(api_client, capsys):
    silent, operation = claimed(api_client)
    silent_for(operation, 3600)
    in_backoff, retrying = claimed(api_client)
    silent_for(retrying, 3600)
    ModerationRequest.objects.filter(pk=retrying.pk).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    claimed(api_client)  # moving: not stuck

    assert set(stuck_reviews().values_list("pk", flat=True)) == {silent.pk}
    assert stuck_review_ids(limit=10) == [silent.pk]
    assert dashboard_figures()["stuck"] == 1
    assert "moderation_reviews_stuck 1.0" in generate_latest(registry).decode()
    call_command("reconcile_stuck")
    assert f"would reconcile {silent.pk}" in capsys.readouterr().out


def test_a_superseded_operation_does_not_make_its_review_stuck(api_client):
    review, operation = claimed(api_client)
    silent_for(operation, 3600)
    ModerationRequest.objects.filter(pk=operation.pk).update(status="superseded")
    assert not stuck_reviews().exists()
