"""Facts the docs state that the code decides: each is read from the code and looked up in the
doc, or read from the doc and looked up in the code (settings, defaults, commands and their
options, event kinds, metrics, error codes, invariants), so the doc cannot drift from the code
again (issue 23, "Docs that drifted")."""

from __future__ import annotations

import ast
import os
import re
import shlex
from pathlib import Path

from django.conf import settings
from django.test import override_settings
from rest_framework import exceptions as drf_exceptions

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"
DESIGN = ROOT / "docs" / "design.md"
SETTINGS = ROOT / "config" / "settings.py"

# Variables the docs name that code other than config/settings.py reads, and where (each file is
# checked to read it). None now: the web server's worker count moved into the settings (sizing).
READ_ELSEWHERE: dict[str, Path] = {}


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


# --- Defaults -----------------------------------------------------------------------------------

# Defaults not compared: stated in words, or derived in config/settings.py from another value (the
# row says how).
DEFAULTS_IN_WORDS = {
    "DATABASE_URL",  # an embedded PostgreSQL (config/embedded_db.py)
    "DB_PREPARE_THRESHOLD",  # depends on DB_POOL_MODE
    "SECRET_KEY", "ALLOWED_HOSTS",  # a development key; localhost
    "PUBLIC_BASE_URL",  # follows PORT
    "MODERATION_STUCK_AFTER_S",  # derived from PROVIDER_EXPECTED_LATENCY_S and the timeouts
    "OTEL_TRACING",  # on with an endpoint
    "PROVIDER_MODEL",  # none with MODERATION_PROVIDER=llm
    "WEB_CONCURRENCY", "Q_WORKERS", "NOTIFY_WORKERS",  # from the machine: tests/config/test_sizing.py
}


def _documented_defaults() -> dict[str, str]:
    """Each variable of docs/configuration.md's tables and its default cell: a row naming several
    variables gives as many defaults, separated by `;` if any, else by `,`."""
    defaults = {}
    for line in CONFIGURATION.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        names_cell, default_cell = line.split("|")[1:3]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", names_cell)
        if len(names) == 1:
            parts = [default_cell]
        else:
            parts = default_cell.split(";") if ";" in default_cell else default_cell.split(",")
            parts = parts * len(names) if len(parts) == 1 else parts  # one default for them all
        assert len(parts) == len(names), f"cannot tell which default is whose: {line[:120]}"
        defaults.update({name: part.strip() for name, part in zip(names, parts, strict=True)})
    return defaults


def _default_expressions(source: str) -> dict[str, ast.expr | None]:
    """Each variable `source` reads and the expression of its default (None: none)."""
    defaults = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if re.fullmatch(r"env(\.\w+)?|_env_\w+|os\.environ\.get", func) and isinstance(node.args[0].value, str):
                keyword = next((k.value for k in node.keywords if k.arg == "default"), None)
                default = keyword if keyword is not None else (node.args[1] if len(node.args) > 1 else None)
                if defaults.get(node.args[0].value) is None:  # (a read in an error message has none)
                    defaults[node.args[0].value] = default
    return defaults


def _as_documented(value) -> str:
    """A value as the table writes it: 1/0 for booleans, lists comma-separated, 10.0 as 10."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _code_default(expression: ast.expr | None, *, debug: bool):
    """The value of a default expression (a literal, arithmetic, or a choice on DEBUG)."""
    if expression is None:
        return "(no default)"
    code = compile(ast.Expression(expression), "config/settings.py", "eval")
    return eval(code, {"__builtins__": {}}, {"DEBUG": debug})  # noqa: S307 - our own settings' literals


def test_every_default_in_the_configuration_reference_is_the_codes():
    expressions = _default_expressions(SETTINGS.read_text())
    for name, path in READ_ELSEWHERE.items():
        expressions[name] = _default_expressions(path.read_text())[name]
    checked, mismatched, in_words = 0, [], set()
    for name, cell in _documented_defaults().items():
        literals = re.findall(r"`([^`]*)`", cell)
        if re.fullmatch(r"(empty|unset)\b.*", cell):  # a variable read as "" when unset
            stated = {False: "", True: ""}
        elif m := re.fullmatch(r"`([^`]*)` with `DEBUG=0`, else `([^`]*)`", cell):
            stated = {False: m.group(1), True: m.group(2)}
        elif len(literals) == 1 and re.fullmatch(r"`[^`]*`", cell):
            stated = {False: literals[0], True: literals[0]}
        else:
            in_words.add(name)
            continue
        if name not in expressions:
            mismatched.append((name, cell, "not read by the code"))
            continue
        try:
            code_defaults = {debug: _as_documented(_code_default(expressions[name], debug=debug)) for debug in stated}
        except NameError:  # derived from another setting
            in_words.add(name)
            continue
        for debug, value in stated.items():
            code = code_defaults[debug]
            if code != value and (name, value, code) not in mismatched:
                mismatched.append((name, value, code))
        checked += 1
    assert checked > 50  # the parser reads the tables
    assert mismatched == [], f"(variable, documented, the code's): {mismatched}"
    assert in_words == DEFAULTS_IN_WORDS, "a default not compared: compare it, or list it above"


# --- Commands -----------------------------------------------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _documented_command_lines() -> list[tuple[str, str]]:
    """(doc, text after `manage.py`) for every command line in the docs: inline code up to its
    closing backtick (on this line or a later one), a code block's line with its `\\`
    continuations; shell comments and what follows `&&`, `;` or a lone `&` (run in the background)
    left out."""
    found = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines):
            for match in re.finditer(r"manage\.py (?=[a-z])", line):
                before, text, following = line[: match.start()], line[match.end():], lines[number + 1:]
                if "`" in text or before.count("`") % 2:  # inline code: up to its closing backtick
                    while "`" not in text and following:
                        text, following = f"{text} {following[0].strip()}", following[1:]
                    text = text.split("`", 1)[0]
                else:
                    while text.rstrip().endswith("\\") and following:
                        text, following = f"{text.rstrip()[:-1]} {following[0].strip()}", following[1:]
                text = re.split(r"\s#\s|&&|;|\s&(?:\s|$)", text, maxsplit=1)[0]
                found.append((doc.name, text.strip()))
    return found


def _placeholder(token: str) -> bool:
    return bool(re.fullmatch(r"<[^>]+>(\.\.\.)?|[A-Z][A-Z0-9_]*(\.\.\.)?|\.\.\.", token) or "$" in token)


def _arguments(parser, tokens: list[str]) -> list[str]:
    """The documented arguments, a placeholder replaced by a value its option accepts."""
    arguments = []
    for token in tokens:
        if _placeholder(token):
            action = parser._option_string_actions.get(arguments[-1]) if arguments else None
            token = str(action.choices[0]) if action is not None and action.choices else "1"
        arguments.append(token.split("|", 1)[0])  # `a|b|c`: one of the values
    return arguments


def test_every_command_the_docs_run_exists_with_the_options_they_use():
    from django.core.management import get_commands, load_command_class
    from django.core.management.base import CommandError

    commands = get_commands()
    lines = _documented_command_lines()
    assert len(lines) > 30  # the collector finds the commands
    refused = []
    for doc, text in lines:
        name, *rest = shlex.split(text)
        if name not in commands:
            refused.append((doc, name, "no such command"))
            continue
        command = load_command_class(commands[name], name)
        for alternative in " ".join(shlex.quote(token) for token in rest).split(" '|' "):
            tokens = [token.strip("[]") for token in shlex.split(alternative)]
            tokens = [token for token in tokens if token]
            if tokens == ["--help"]:
                continue
            parser = command.create_parser("manage.py", name)
            try:
                parser.parse_args(_arguments(parser, tokens))
            except CommandError as error:
                refused.append((doc, f"manage.py {text}", str(error)))
    assert refused == [], "command lines in the docs that manage.py refuses"


def test_every_option_a_docs_mention_of_a_command_names_exists():
    """A command named in code spans without `manage.py` (`erase_content ID... --reason TEXT`,
    `replay_callbacks --id`): its options, which may be shown without their values, exist."""
    from django.core.management import get_commands, load_command_class

    commands = get_commands()
    mentions, unknown = 0, []
    for doc in DOCS:
        for name, rest in re.findall(r"(?<!manage\.py )`([a-z_]+) ([^`]+)`", doc.read_text()):
            if name not in commands:
                continue
            mentions += 1
            parser = load_command_class(commands[name], name).create_parser("manage.py", name)
            unknown += [(doc.name, name, option) for option in re.findall(r"--[a-z][a-z0-9-]*", rest)
                        if option not in parser._option_string_actions]
    assert mentions > 10  # the scan finds them
    assert unknown == [], "options the docs give a command that its parser does not know"


# --- Event kinds, metrics, error codes ----------------------------------------------------------

OPERATIONS = ROOT / "docs" / "operations.md"


def _documented_event_kinds() -> set[str]:
    """The kinds the docs name: docs/design.md's `PipelineEvent` row, the /metrics rows labelled
    by `{kind}` in docs/operations.md, and any "`x` event" in the docs."""
    row = next(line for line in DESIGN.read_text().splitlines() if line.startswith("| `PipelineEvent` |"))
    kinds = set(re.findall(r"`([a-z][a-z_]+)`", row.split("|")[2]))
    for line in OPERATIONS.read_text().splitlines():
        if line.startswith("| `") and "{kind}" in line.split("|")[1]:
            kinds |= set(re.findall(r"`([a-z][a-z_]+)`", line.split("|")[2]))
    for doc in DOCS:
        kinds |= set(re.findall(r"`([a-z][a-z_]+)` events?\b", doc.read_text()))
    return kinds


def test_every_event_kind_the_docs_name_exists():
    from audit.models import EventKind

    documented = _documented_event_kinds()
    assert {"claim_lost", "job_enqueued", "stale_result"} <= documented  # the collector reads the rows
    assert sorted(documented - set(EventKind.values)) == [], "named as an event kind in the docs, not an EventKind"


def _metric_names() -> set[str]:
    """The series /metrics exposes: each family (moderation/observability/metrics.py), counters
    with their `_total`, histograms with their series."""
    source = (ROOT / "moderation" / "observability" / "metrics.py").read_text()
    names = set()
    for kind, family in re.findall(r"(\w*)MetricFamily\(\s*\"(\w+)\"", source):
        suffixes = ("_total",) if kind == "Counter" else ("", "_bucket", "_sum", "_count", "_gsum", "_gcount")
        names.update(family + suffix for suffix in suffixes)
    return names


def test_every_metric_the_docs_name_is_exposed():
    from django.apps import apps

    tables = {model._meta.db_table for model in apps.get_models()}
    documented = set()
    for doc in DOCS:
        documented |= set(re.findall(r"`(moderation_[a-z0-9_]+)(?:\{[^`]*)?`", doc.read_text()))
    # Not metrics: database tables, and the benchmarks' databases (docs/benchmarks.md).
    documented = {name for name in documented if name not in tables and not name.startswith("moderation_bench")}
    assert {"moderation_lost_updates_total", "moderation_queue_depth"} <= documented  # the collector works
    assert sorted(documented - _metric_names()) == [], "named as a metric in the docs, not exposed by /metrics"


def test_every_error_code_the_docs_name_is_emitted():
    """docs/design.md's error list, and any code the docs give with its status ("409
    `appeal_exists`", "`throttled` (429") or in a body (`"error": "not_appealable"`)."""
    section = DESIGN.read_text().split("### Errors", 1)[1].split("\n### ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)`", section)) - {"fields"}  # (`fields`: the body's key)
    assert len(named) > 20
    for doc in DOCS:
        text = doc.read_text()
        for pattern in (r"\b[45]\d\d,? `([a-z_]+)`", r"`([a-z_]+)` \([45]\d\d", r'"error": "([a-z_]+)"'):
            named |= set(re.findall(pattern, text))
    assert sorted(named - _emitted_error_codes()) == [], "named as an error code in the docs, emitted by nothing"


# --- Settings named in the docs -----------------------------------------------------------------

# Upper-case names the docs use that are not settings, and the file that defines each.
NOT_SETTINGS = {
    "BENCH_DATABASE": ROOT / "Makefile",  # make bench's variables
    "BENCH_SIZES": ROOT / "Makefile",
    "BENCH_REPORT_ARGS": ROOT / "Makefile",
    "BENCH_REDIS_URL": ROOT / "Makefile",
    "EVALUATE_DATA": ROOT / "Makefile",  # make evaluate's files
    "RUN_ENV": ROOT / "Makefile",  # make run's environment for the platform
    "TEST_WORKERS": ROOT / "Makefile",  # make test's
    "PYTEST_ARGS": ROOT / "Makefile",  # make test's
    "WEB_WORKERS": ROOT / "deploy" / "systemd" / "moderation-web.service",  # the unit's variable
    "UPDATE_SCREENSHOTS": ROOT / "tests" / "browser" / "test_moderator_flow.py",  # a test's switch
    "MATCH_BUDGET": ROOT / "moderation" / "text" / "rules.py",  # constants of the code
    "MAX_PARTS": ROOT / "moderation" / "text" / "parts.py",
    "BACKTEST_SLICE_S": ROOT / "moderation" / "quality" / "backtests.py",
    "REVIEW_FILTERS": ROOT / "moderation" / "admin" / "filters.py",
    "TEXT_SEARCH_CONFIGS": ROOT / "moderation" / "models" / "core.py",
    "MATCHED_IDS_UP_TO": ROOT / "moderation" / "observability" / "search.py",
    "QUOTE_MIN": ROOT / "moderation" / "privacy" / "erasure.py",
    "AUTHOR_ERASE_PER_CALL": ROOT / "moderation" / "privacy" / "erasure.py",
    "AUTHOR_ERASE_SECONDS": ROOT / "moderation" / "privacy" / "erasure.py",
    "LIST_MAX": ROOT / "moderation" / "api" / "authors.py",
    "HOSTILE_TEXTS": ROOT / "lab" / "race_lab.py",
    "HASH_PDQ": ROOT / "moderation" / "media" / "images.py",  # ThreatExchange's name of PDQ, in a bank file
    # The Transparency Database's values, as the transparency report counts them.
    "AUTOMATED_DECISION_FULLY": ROOT / "moderation" / "transparency" / "statements.py",
    "SOURCE_VOLUNTARY": ROOT / "moderation" / "transparency" / "statements.py",
    "SOURCE_ARTICLE_16": ROOT / "moderation" / "transparency" / "statements.py",
    "SOURCE_TRUSTED_FLAGGER": ROOT / "moderation" / "transparency" / "statements.py",
}


def _settings_names(source: str) -> set[str]:
    """Every setting config/settings.py defines (a name it assigns, at the top or under an `if`,
    and the keys of settings that are dicts: DATABASES' options...) or reads from the environment."""
    names = _variables_read_by_settings(source)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(name.id for name in ast.walk(target) if isinstance(name, ast.Name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return {name for name in names if re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]+", name)}


def _dsa_vocabulary() -> set[str]:
    """The DSA Transparency Database's own names (STATEMENT_CATEGORY_..., SOURCE_ARTICLE_16, the
    enumerations' names): docs/transparency.md names them as the database does."""
    from moderation.models import vocabulary

    return {name for key, values in vocabulary().items() if isinstance(values, dict | list) and key != "_readme"
            for name in (key, *values)}


def test_every_setting_the_docs_name_exists():
    known = _settings_names(SETTINGS.read_text()) | set(READ_ELSEWHERE)
    named = set()
    for doc in DOCS:
        named |= set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b", doc.read_text()))
    assert {"NOTIFY_MAX_ATTEMPTS", "MODERATION_BATCH_SIZE"} <= named & known  # both collectors work
    unknown = named - known - set(NOT_SETTINGS) - _dsa_vocabulary()
    assert sorted(unknown) == [], "named in the docs, neither a setting nor listed in NOT_SETTINGS"
    for name, path in NOT_SETTINGS.items():
        assert name in named and name in path.read_text(), f"{name}: not in the docs, or not in {path.name}"


# --- Invariants ---------------------------------------------------------------------------------

def _invariant_numbers() -> set[int]:
    section = DESIGN.read_text().split("\n## Invariants", 1)[1].split("\n## ", 1)[0]
    return {int(n) for n in re.findall(r"^(\d+)\. \*\*", section, flags=re.MULTILINE)}


def _invariant_titles() -> list[str]:
    section = DESIGN.read_text().split("\n## Invariants", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. \*\*(.+?)\.?\*\*", section, flags=re.MULTILINE)


def test_the_invariants_are_listed_only_in_the_design():
    """Another doc refers to an invariant by number; it neither lists them (a line about "the
    invariants" that introduces a list, numbered or not) nor repeats one's title."""
    assert len(_invariant_titles()) == len(_invariant_numbers()) >= 16
    restated = []
    for doc in DOCS:
        if doc == DESIGN:
            continue
        lines = doc.read_text().splitlines()
        for number, line in enumerate(lines):
            following = next((text for text in lines[number + 1:] if text.strip()), "")
            if re.search(r"\binvariants\b", line, re.IGNORECASE) and line.rstrip().endswith(":") \
                    and re.match(r"\s*(?:[-*]|\d+\.)\s", following):
                restated.append((doc.name, number + 1, line.strip()))
            restated += [(doc.name, number + 1, title) for title in _invariant_titles() if title in line]
    assert restated == [], "invariants restated outside docs/design.md: refer to them by number"


def test_every_invariant_cited_by_number_is_in_the_design():
    numbers = _invariant_numbers()
    files = [path for folder in ("moderation", "audit", "callbacks", "config", "lab", "bench", "tests", "templates")
             for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".html", ".md")]
    cited = []
    for path in [*files, *DOCS]:
        for match in re.finditer(r"\binvariants?\s+(\d+(?:(?:\s*,\s*|\s+and\s+|\s+or\s+)\d+)*)",
                                 path.read_text(), flags=re.IGNORECASE):
            cited += [(path.relative_to(ROOT).as_posix(), int(n)) for n in re.findall(r"\d+", match.group(1))]
    assert len(cited) > 40  # the scan finds the citations
    assert sorted({(path, n) for path, n in cited if n not in numbers}) == [], "cites an invariant design.md does not list"


# --- the layers (docs/design.md, "Layers"): the list is the code's, in the linter's order ------

LAYERS_DOC_PRODUCT = ("moderation", "callbacks", "audit", "config")
# Packages the list may name whole (entry points and the records, each a family of modules that
# share one layer); every other module is named by its own path.
LAYERS_DOC_WHOLE = ("moderation/models/", "moderation/admin/", "moderation/api/", "moderation/management/",
                    "moderation/templatetags/", "moderation/providers/", "callbacks/management/")
_PATH = re.compile(r"`((?:moderation|callbacks|audit|config|lab|bench|templates)/[\w/.]*|[\w]+\.py)`")


def _layers_section() -> str:
    text = DESIGN.read_text()
    return text[text.index("## Layers\n"):text.index("### Names\n")]


def _named_paths(text: str) -> list[str]:
    """The paths a text names, a bare `name.py` read in the package named last before it."""
    named, package = [], ""
    for path in _PATH.findall(text):
        if "/" not in path:
            path = package + path
        elif path.endswith("/"):
            package = path
        named.append(path)
    return named


def _layer_items() -> list[list[str]]:
    """The numbered list's items, from the bottom up: the paths each names."""
    items: list[str] = []
    for line in _layers_section().splitlines():
        if re.match(r"\d+\. ", line):
            items.append(line)
        elif line.startswith("Outside the layers"):
            break
        elif items:
            items[-1] += "\n" + line
    return [_named_paths(item) for item in items]


def _linter_rank(module: str) -> int:
    """The index of a module's line in .importlinter's layers, 0 at the top."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    lines = [line for line in parser["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]
    ranks = [(len(name), rank) for rank, line in enumerate(lines) for name in re.split(r"[:|]", line)
             if module == name.strip() or module.startswith(name.strip() + ".")]
    assert ranks, f"{module} is in no layer of .importlinter"
    return max(ranks)[1]


def _dotted(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/").replace("/", ".")


def test_every_path_the_layers_name_exists():
    named = _named_paths(_layers_section())
    assert len(named) > 100
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_every_product_module_is_named_in_the_layers():
    named = set(_named_paths(_layers_section()))
    modules = [str(path.relative_to(ROOT)) for package in LAYERS_DOC_PRODUCT for path in (ROOT / package).rglob("*.py")
               if "migrations" not in path.parts and path.name != "__init__.py"]
    assert len(modules) > 150
    unnamed = [m for m in modules if m not in named and not any(m.startswith(whole) for whole in LAYERS_DOC_WHOLE)]
    assert sorted(unnamed) == [], "a module docs/design.md's \"Layers\" does not name"


def test_the_layers_come_in_the_linters_order():
    items = [[_dotted(path) for path in item if not path.startswith("templates/")] for item in _layer_items()]
    assert len(items) == 11
    for lower, item in enumerate(items):
        for higher in items[lower + 1:]:
            pairs = [(low, high) for low in item for high in higher if _linter_rank(high) > _linter_rank(low)]
            assert pairs == [], f"named in a higher layer of the docs, below in .importlinter: {pairs[:3]}"


def test_the_order_check_sees_a_module_named_in_the_wrong_layer():
    assert _linter_rank("moderation.services.pipeline") < _linter_rank("moderation.selectors")
    assert _linter_rank("moderation.text.rules") > _linter_rank("moderation.verdicts")
    assert _named_paths("`moderation/db/`: `compiled.py`, then `moderation/roles.py`") == [
        "moderation/db/", "moderation/db/compiled.py", "moderation/roles.py"]


def test_the_services_entry_points_call_take_keywords_beyond_their_entity():
    """docs/design.md, "Layers": what `moderation.services` exports takes at most one positional
    argument, the entity the service is named after; the rest are keyword-only."""
    import inspect

    from moderation import services

    exported = [getattr(services, name) for name in dir(services) if not name.startswith("_")]
    functions = [f for f in exported if inspect.isfunction(f)]
    assert len(functions) > 60

    def positional(function) -> list[str]:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return [p.name for p in inspect.signature(function).parameters.values() if p.kind in kinds]

    assert {f"{f.__module__}.{f.__name__}": positional(f) for f in functions if len(positional(f)) > 1} == {}
