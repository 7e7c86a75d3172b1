"""`transparency_db_rules` against a git repository laid out as the database's: it finds no
difference where there is none, names the one there is, and `--write` brings the fixture to the
new commit (docs/transparency.md, "Refreshing the rules"). The PHP here is written from the
fixture itself, so the round trip also checks that the command reads back what the fixture says."""

from __future__ import annotations

import json
import shutil
import subprocess
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lab.transparency_rules import RULES_PATH, load_rules
from tests.helpers import git_repository

FIXTURE = json.loads(RULES_PATH.read_text())
CLASSES = {"EUROPEAN_COUNTRY_CODES": "EuropeanCountriesService", "ALL_LANGUAGES": "EuropeanLanguagesService"}


def php(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def php_constants(enumerations: dict, names) -> str:
    lines = []
    for name in names:
        values = enumerations[name]
        if isinstance(values, dict):
            for key, label in values.items():
                lines.append(f"    public const {key} = {php(label)};")
            items = "".join(f"        {php(key)} => self::{key},\n" for key in values)
        else:
            items = "".join(f"        {php(value)},\n" for value in values)
        lines.append(f"    public const {name} = [\n{items}    ];")
    return "<?php\nclass C\n{\n" + "\n".join(lines) + "\n}\n"


def php_rule(rule: str, flags: dict) -> str:
    name, _, params = rule.partition(":")
    if name == "in" and "@" in params:
        enumeration = params.split("@")[1]
        target = f"{CLASSES.get(enumeration, 'Statement')}::{enumeration}"
        keyed = isinstance(FIXTURE["enumerations"][enumeration], dict)
        return f"$this->rule_in({'array_keys(' + target + ')' if keyed else target}{', true' if params.startswith('null,') else ''})"
    if name in ("required_if_contains", "exclude_unless_contains"):
        field, needle = params.split(",")
        flag = flags.setdefault((field, needle), f"{field}_flag_required")
        return f"Rule::requiredIf(${flag})" if name == "required_if_contains" else f"Rule::excludeIf(! ${flag})"
    return php(rule)


def php_grouped(fields: dict, messages: dict) -> str:
    flags: dict = {}
    rules = "".join(f"            {php(name)} => [{', '.join(php_rule(r, flags) for r in spec['rules'])}],\n"
                    for name, spec in fields.items())
    setup = "".join(f"        ${field}_list = $statement[{php(field)}] ?? [];\n"
                    f"        ${flag} = in_array({php(needle)}, ${field}_list, true);\n" for (field, needle), flag in flags.items())
    message_items = "".join(f"            {php(k)} => {php(v)},\n" for k, v in messages.items())
    return ("<?php\nclass GroupedSubmissionsService\n{\n    public function sanitizePayload(array $payload): array\n    {\n"
            f"{setup}    }}\n\n    private function multi_rules(): array\n    {{\n        return [\n{rules}        ];\n    }}\n\n"
            "    private function rule_in($array, $nullable = false): string\n    {\n"
            "        return ($nullable ? 'in:null,' : 'in:').implode(',', $array);\n    }\n\n"
            f"    private function multi_messages(): array\n    {{\n        return [\n{message_items}        ];\n    }}\n}}\n")


@pytest.fixture
def repository(tmp_path):
    """A git repository with the files the command reads, written from the fixture, and a copy
    of the fixture that names them."""
    work = tmp_path / "repository"
    enumerations = FIXTURE["enumerations"]
    files = {
        "app/Models/Statement.php": php_constants(enumerations, [n for n in enumerations if n not in (
            "EUROPEAN_COUNTRY_CODES", "EUROPEAN_UNION_COUNTRY_CODES", "EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES",
            "ALL_LANGUAGES", "EUROPEAN_LANGUAGE_CODES")]),
        "app/Services/EuropeanCountriesService.php": php_constants(enumerations, [
            "EUROPEAN_COUNTRY_CODES", "EUROPEAN_UNION_COUNTRY_CODES", "EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES"]),
        "app/Services/EuropeanLanguagesService.php": php_constants(enumerations, ["ALL_LANGUAGES", "EUROPEAN_LANGUAGE_CODES"]),
        "app/Services/GroupedSubmissionsService.php": php_grouped(FIXTURE["fields"], FIXTURE["custom_messages"]),
    }
    git = git_repository(work, files, "schema")
    rules = tmp_path / "rules.json"
    fixture = json.loads(json.dumps(FIXTURE))
    fixture["source"]["files"] = {path: "0" * 64 for path in files}
    rules.write_text(json.dumps(fixture))
    return work, git, rules


def run(work, rules, *extra):
    out = StringIO()
    call_command("transparency_db_rules", "--git-dir", str(work / ".git"), "--rules", str(rules), *extra, stdout=out)
    return out.getvalue()


def test_the_command_reads_back_exactly_what_the_fixture_says(repository):
    work, _, rules = repository

    assert "0 difference(s)" in run(work, rules)


def test_a_new_category_is_reported_and_written_with_the_new_commit(repository):
    work, git, rules = repository
    model = work / "app/Models/Statement.php"
    model.write_text(model.read_text().replace(
        "        'STATEMENT_CATEGORY_VIOLENCE' => self::STATEMENT_CATEGORY_VIOLENCE,\n",
        "        'STATEMENT_CATEGORY_VIOLENCE' => self::STATEMENT_CATEGORY_VIOLENCE,\n"
        "        'STATEMENT_CATEGORY_NEW' => self::STATEMENT_CATEGORY_VIOLENCE,\n"))
    subprocess.run([*git, "commit", "-q", "-am", "a new category"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    report = run(work, rules)
    assert "enumeration STATEMENT_CATEGORIES: added ['STATEMENT_CATEGORY_NEW']" in report
    assert "1 difference(s)" in report and "app/Models/Statement.php" in report

    run(work, rules, "--write")
    refreshed = load_rules(rules)
    assert "STATEMENT_CATEGORY_NEW" in refreshed.enumerations["STATEMENT_CATEGORIES"]
    assert refreshed.source["commit"] == head
    assert "0 difference(s)" in run(work, rules) and "files changed since: none" in run(work, rules)


def test_a_rule_the_command_cannot_read_stops_it(repository):
    work, git, rules = repository
    grouped = work / "app/Services/GroupedSubmissionsService.php"
    grouped.write_text(grouped.read_text().replace("'decision_facts' => ['required',", "'decision_facts' => [new Facts(), 'required',"))
    subprocess.run([*git, "commit", "-q", "-am", "a rule object"], check=True)

    with pytest.raises(CommandError, match="cannot read the rule"):
        run(work, rules)


def test_a_repository_without_the_files_is_refused_plainly(tmp_path):
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    rules = tmp_path / "rules.json"
    shutil.copy(RULES_PATH, rules)

    with pytest.raises(CommandError):
        run(empty, rules)
