"""`manage.py check` refuses job settings that could run a task twice at once."""

from __future__ import annotations

import pytest

from moderation.checks import check_job_settings, check_provider_key_in_clear

GOOD = {
    "name": "t", "workers": 2, "timeout": 60, "retry": 150, "max_attempts": 1,
    "ack_failures": True, "bulk": 1, "queue_limit": 2, "orm": "default", "save_limit": -1,
}


@pytest.fixture(autouse=True)
def production_like(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # (pytest-django runs with DEBUG off)


def test_production_without_redis_is_not_warned_about_rate_limits_they_are_shared_in_postgresql(settings):
    settings.REDIS_URL = ""
    assert [m.id for m in check_job_settings()] == []


def ids(settings, **q):
    settings.Q_CLUSTER = {**GOOD, **q}
    return sorted(message.id for message in check_job_settings())


def test_the_shipped_settings_pass():
    assert check_job_settings() == []


def test_the_reference_settings_pass(settings):
    assert ids(settings) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"timeout": None}, "moderation.E001"),
        ({"retry": 90}, "moderation.E002"),  # a lease shorter than 2x the timeout
        ({"timeout": 12, "retry": 100}, "moderation.E003"),  # provider timeout 10s + margin
        ({"max_attempts": 0}, "moderation.E005"),
        ({"ack_failures": False}, "moderation.E006"),
        ({"bulk": 5}, "moderation.E007"),
        ({"queue_limit": 20}, "moderation.W001"),
    ],
)
def test_a_setting_that_could_rerun_a_running_task_fails_the_check(settings, change, error):
    assert error in ids(settings, **change)


@pytest.mark.parametrize("save_limit", [{"save_limit": 1000}, {}])  # {}: django-q2's default, 250
def test_storing_successful_task_results_warns(settings, save_limit):
    settings.Q_CLUSTER = {key: value for key, value in GOOD.items() if key != "save_limit"} | save_limit
    assert [m.id for m in check_job_settings()] == ["moderation.W003"]


def test_a_provider_timeout_that_does_not_fit_in_the_task_fails(settings):
    settings.PROVIDER_TIMEOUT_S = 58
    assert "moderation.E003" in ids(settings)


def test_reconcile_must_wait_longer_than_one_provider_attempt(settings):
    settings.MODERATION_STUCK_AFTER_S = 20  # an attempt may take 3 * 2 + 2 * 10 = 26 s
    assert ids(settings) == ["moderation.E004"]


def test_an_unknown_provider_fails(settings):
    settings.MODERATION_PROVIDER = "nope"
    assert ids(settings) == ["moderation.E008"]


def test_check_command_exits_non_zero(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.Q_CLUSTER = {**GOOD, "retry": 30}
    with pytest.raises(SystemCheckError, match="moderation.E002"):
        call_command("check")


@pytest.mark.parametrize(("provider", "url", "key", "warned"), [
    ("llm", "http://93.184.215.14:8000", "sk-1", True),  # a public address, in clear (never connected to)
    ("llm", "http://models.example.com/v1", "sk-1", True),  # a name: not looked up, so not known to be local
    ("openai", "http://93.184.215.14", "sk-1", True),
    ("llm", "https://models.example.com/v1", "sk-1", False),
    ("llm", "http://127.0.0.1:11434", "sk-1", False),
    ("llm", "http://localhost:8080/v1", "sk-1", False),
    ("llm", "http://192.168.1.20:8000", "sk-1", False),
    ("llm", "http://[::1]:8000", "sk-1", False),
    ("llm", "http://93.184.215.14:8000", "", False),  # no key to leak
    ("local", "http://93.184.215.14", "sk-1", False),
])
def test_a_provider_key_sent_in_clear_over_the_internet_warns(settings, monkeypatch, provider, url, key, warned):
    # The check reads the URL only: any lookup or connection (to the addresses above) fails the test.
    import socket

    def refused(*args, **kwargs):
        raise AssertionError(f"the check tried the network: {args!r}")

    for name in ("getaddrinfo", "gethostbyname", "create_connection"):
        monkeypatch.setattr(socket, name, refused)
    monkeypatch.setattr(socket.socket, "connect", refused)
    settings.MODERATION_PROVIDER, settings.PROVIDER_URL, settings.PROVIDER_API_KEY = provider, url, key
    warnings = check_provider_key_in_clear()
    assert [w.id for w in warnings] == (["moderation.W004"] if warned else [])
    assert all("sk-1" not in w.msg for w in warnings)
