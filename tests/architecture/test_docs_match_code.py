"""Facts the docs state that the code decides: each is read from the code and looked up in the
doc, so the doc cannot drift from the code again (issue 23, "Docs that drifted")."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from django.conf import settings
from django.test import override_settings
from rest_framework import exceptions as drf_exceptions

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
DESIGN = ROOT / "docs" / "design.md"
SETTINGS = ROOT / "config" / "settings.py"

# Variables the docs name that code other than config/settings.py reads, and where (each file is
# checked to read it): the web server's worker count, an option of the command that starts it.
READ_ELSEWHERE = {
    "WEB_CONCURRENCY": ROOT / "moderation" / "management" / "commands" / "serve_web.py",
}


def _documented_variables() -> set[str]:
    """The variables in the first column of docs/configuration.md's tables."""
    names = set()
    for line in CONFIGURATION.read_text().splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", first_cell))
    return names


def _variables_read_by_settings(source: str) -> set[str]:
    """The environment variables config/settings.py reads: the first argument of every call to
    `env`, `env.<cast>`, `_env_number`, `os.environ.get` or `os.getenv`, and `env.ENVIRON[...]`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if re.fullmatch(r"env(\.\w+)?|_env_\w+|os\.environ\.get|os\.getenv|env\.ENVIRON\.get", func):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if ast.unparse(node.value) in ("os.environ", "env.ENVIRON"):
                names.add(node.slice.value)
    return {name for name in names if isinstance(name, str) and re.fullmatch(r"[A-Z][A-Z0-9_]+", name)}


def test_every_documented_setting_is_read_and_every_setting_read_is_documented():
    documented = _documented_variables()
    read = _variables_read_by_settings(SETTINGS.read_text())
    assert len(documented) > 40 and len(read) > 40  # the parsers found the tables and the reads
    elsewhere = {name for name, path in READ_ELSEWHERE.items() if f'os.environ.get("{name}"' in path.read_text()}
    assert sorted(documented - read - elsewhere) == [], "documented in docs/configuration.md, read nowhere"
    assert sorted(read - documented) == [], "read by config/settings.py, missing from docs/configuration.md"


def test_notification_retry_span_in_the_docs_is_what_the_defaults_give():
    row = next(line for line in CONFIGURATION.read_text().splitlines() if line.startswith("| `NOTIFY_MAX_ATTEMPTS`"))
    max_row = next(line for line in CONFIGURATION.read_text().splitlines() if line.startswith("| `NOTIFY_BACKOFF_MAX_S`"))
    attempts, backoff, _timeout = (float(v) for v in re.findall(r"`(\d+)`", row.split("|")[2]))
    (backoff_max,) = (float(v) for v in re.findall(r"`(\d+)`", max_row.split("|")[2]))
    stated = re.search(r"about ([\d.]+) hours", row)
    assert stated, row
    from moderation.services.notifications import notification_backoff

    # The waits between attempts: after attempt n (1 .. max-1) the next is due after this.
    with override_settings(NOTIFY_MAX_ATTEMPTS=int(attempts), NOTIFY_BACKOFF_S=backoff, NOTIFY_BACKOFF_MAX_S=backoff_max):
        total_s = sum(notification_backoff(n).total_seconds() for n in range(1, int(attempts)))
    assert float(stated.group(1)) == round(total_s / 3600, 1), f"the defaults retry for {total_s / 3600:.2f} hours"
    # The other docs that state the span say the same.
    for doc in (ROOT / "docs").glob("*.md"):
        for figure in re.findall(r"NOTIFY_MAX_ATTEMPTS`[^.|]*?about ([\d.]+)\s+hours", doc.read_text()):
            assert figure == stated.group(1), f"{doc.name} says about {figure} hours"
    # The documented defaults are the code's (unless this run's environment sets them).
    names = ("NOTIFY_MAX_ATTEMPTS", "NOTIFY_BACKOFF_S", "NOTIFY_BACKOFF_MAX_S")
    if not any(name in os.environ for name in names):
        assert tuple(getattr(settings, name) for name in names) == (attempts, backoff, backoff_max)


def _emitted_error_codes() -> set[str]:
    """Every `error` code a client of /api/ can be answered with."""
    from moderation.api import errors, middleware

    codes = {code for _status, code in errors._DOMAIN.values()}
    codes |= set(middleware.CODES.values())
    codes.add("invalid")  # every ValidationError (moderation/api/errors.py)
    # The web server's refusals, before any worker sees the request (config/asgi.py).
    codes |= set(re.findall(r'_refuse\(\s*send,\s*\d+,\s*"(\w+)"', (ROOT / "config" / "asgi.py").read_text()))
    # DRF's own exceptions keep their code (`get_codes()`), except ValidationError ("invalid"
    # above) and NotAcceptable, which never reaches a client (moderation/api/negotiation.py).
    for cls in vars(drf_exceptions).values():
        if isinstance(cls, type) and issubclass(cls, drf_exceptions.APIException) and cls not in (
            drf_exceptions.APIException, drf_exceptions.ValidationError, drf_exceptions.NotAcceptable
        ):
            codes.add(cls.default_code)
    return codes


def test_every_error_code_the_api_emits_is_in_the_design_error_list():
    section = DESIGN.read_text().split("### Errors", 1)[1].split("\n### ", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", section))
    codes = _emitted_error_codes()
    assert {"invalid", "not_found", "request_timeout", "parse_error"} <= codes  # the collector works
    assert sorted(codes - listed) == [], "emitted by the API, missing from docs/design.md's error list"


def test_every_event_kind_the_docs_list_is_written_by_the_code_or_said_to_be_never_written():
    """docs/design.md's data model lists the `PipelineEvent` kinds; a kind no code writes must say
    so there (its counter only ever reads 0)."""
    from audit.models import EventKind

    readers = {ROOT / "audit" / "models.py", ROOT / "moderation" / "observability" / "metrics.py",
               ROOT / "moderation" / "invariants.py"}
    written = set()
    for folder in ("moderation", "callbacks", "audit"):
        for path in (ROOT / folder).rglob("*.py"):
            if path not in readers and "migrations" not in path.parts:
                written.update(re.findall(r"EventKind\.([A-Z_]+)", path.read_text()))
    row = next(line for line in DESIGN.read_text().splitlines() if line.startswith("| `PipelineEvent` |"))
    never_written = set(re.findall(r"`(\w+)` \(never written", row))
    assert EventKind.CLAIM_LOST.name in written  # the scan finds the writers
    unwritten = {kind.value for kind in EventKind if kind.name not in written}
    assert sorted(unwritten - never_written) == [], "listed as an event kind, but no code writes it"
    assert sorted(never_written - unwritten) == [], "said never to be written, but code writes it"
