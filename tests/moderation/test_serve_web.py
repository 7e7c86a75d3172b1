"""`manage.py serve_web` (deploy/systemd's moderation-web.service) becomes the web server that
`run_platform` runs, with the deadlines of the settings (docs/operations.md, "Slow clients")."""

from __future__ import annotations

import os

import pytest
from django.core.management import CommandError, call_command

from moderation.management.web import web_command


@pytest.fixture
def execs(monkeypatch):
    calls = []
    monkeypatch.setattr(os, "execv", lambda path, argv: calls.append((path, argv)))
    return calls


def test_serve_web_execs_the_web_command_on_the_address_given(execs, settings):
    settings.REQUEST_HEADER_TIMEOUT_S = 2.5
    call_command("serve_web", "--bind", "[::1]:8123", "--workers", "3")

    [(path, argv)] = execs
    assert argv == web_command("::1", "8123", workers=3) and path == argv[0]
    assert argv[argv.index("--http1-header-read-timeout") + 1] == "2500"
    assert "config.asgi:application" in argv and argv[argv.index("--interface") + 1] == "asgi"


@pytest.mark.parametrize("bind, workers", [("8000", 2), ("127.0.0.1:", 2), ("127.0.0.1:http", 2), ("127.0.0.1:8000", 0)])
def test_serve_web_refuses_a_malformed_address_or_no_workers(execs, bind, workers):
    with pytest.raises(CommandError, match="--bind must be HOST:PORT and --workers at least 1"):
        call_command("serve_web", "--bind", bind, "--workers", str(workers))
    assert execs == []


@pytest.mark.parametrize("on", [False, True])
def test_the_access_log_is_on_only_when_web_access_log_says_so(settings, on):
    settings.WEB_ACCESS_LOG = on
    assert ("--access-log" in web_command("127.0.0.1", 8000, workers=2)) is on


def test_web_command_serves_the_application_it_is_given_under_the_same_flags():
    ours = web_command("127.0.0.1", 8000, workers=2)
    other = web_command("127.0.0.1", 8000, workers=2, app="bench.ceiling_asgi:application")
    assert [a for a in ours if a != "config.asgi:application"] == [a for a in other if a != "bench.ceiling_asgi:application"]
    assert "bench.ceiling_asgi:application" in other and "config.asgi:application" not in other
