from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


def run() -> str:
    out = StringIO()
    call_command("retry_policy", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_webhook_budget_lists_every_layer_and_the_worst_case(settings):
    settings.MODERATION_PROVIDER, settings.MODERATION_MAX_ATTEMPTS = "webhook", 3
    settings.MODERATION_MAX_SUPERSEDES, settings.PROVIDER_HTTP_RETRIES = 2, 1

    output = run()

    for layer in ("HTTP client", "provider attempts", "django-q2 task", "reconcile", "webhook re-delivery"):
        assert layer in output
    assert "     3  operations (idempotency keys)" in output
    assert "     9  provider requests sent" in output
    assert "    18  connection tries" in output
    assert "     3  logical executions at the provider" in output  # the key de-duplicates retries
    assert "WARNING" not in output


@pytest.mark.django_db
def test_a_provider_that_ignores_the_key_is_warned_about_and_counted(settings):
    settings.MODERATION_PROVIDER, settings.MODERATION_MAX_ATTEMPTS, settings.MODERATION_MAX_SUPERSEDES = "openai", 3, 2

    output = run()

    assert "     9  logical executions at the provider" in output
    assert "WARNING provider attempts (our records): the openai provider ignores Idempotency-Key" in output


@pytest.mark.django_db
def test_broker_redelivery_of_failed_tasks_is_warned_about(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "max_attempts": 3}
    assert "WARNING django-q2 task: max_attempts != 1" in run()
