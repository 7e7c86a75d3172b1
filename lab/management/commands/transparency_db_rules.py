"""Compare the Transparency Database rules fixture with the database's source, and refresh it
(docs/transparency.md, "Refreshing the rules").

It reads the PHP at a commit of a git directory of the digital-services-act/transparency-database
repository: the enumerations (Statement, EuropeanCountriesService, EuropeanLanguagesService
constants) and the multiple endpoint's rules and messages (GroupedSubmissionsService::multi_rules
and multi_messages), and reports every difference. `--write` puts what it read into the fixture
with the commit and the files' hashes; the rest of the fixture (the endpoint's answers, the
storage notes) is kept, and the files it was read from that changed are listed for reading by hand.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

from django.core.management.base import BaseCommand, CommandError

from lab.transparency_rules import RULES_PATH, RulesError, load_rules

MODEL = "app/Models/Statement.php"
COUNTRIES = "app/Services/EuropeanCountriesService.php"
LANGUAGES = "app/Services/EuropeanLanguagesService.php"
GROUPED = "app/Services/GroupedSubmissionsService.php"
STATEMENT_ENUMERATIONS = ("STATEMENT_CATEGORIES", "KEYWORDS", "DECISION_VISIBILITIES", "DECISION_MONETARIES",
                          "DECISION_PROVISIONS", "DECISION_ACCOUNTS", "ACCOUNT_TYPES", "DECISION_GROUNDS",
                          "INCOMPATIBLE_CONTENT_ILLEGALS", "CONTENT_TYPES", "SOURCE_TYPES", "AUTOMATED_DETECTIONS",
                          "AUTOMATED_DECISIONS")
PHP_STRING = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\$]|\\.)*"'


def php_string(literal: str) -> str:
    """A single- or double-quoted PHP string without interpolation."""
    quote = literal[0]
    return literal[1:-1].replace(f"\\{quote}", quote).replace("\\\\", "\\")


def constants(source: str) -> dict:
    """`public const NAME = 'x';` and `public const NAMES = [...]` (a map or a list; items a string
    or `self::NAME`)."""
    scalars = {m[1]: php_string(m[2]) for m in re.finditer(rf"const\s+(\w+)\s*=\s*({PHP_STRING})\s*;", source)}
    arrays = {}
    for m in re.finditer(r"const\s+(\w+)\s*=\s*\[(.*?)\];", source, re.S):
        items = re.findall(rf"(?:({PHP_STRING})\s*=>\s*)?(self::\w+|{PHP_STRING})\s*,", m[2] + ",")

        def value(token):
            if token.startswith("self::") and token[6:] not in scalars:
                raise CommandError(f"cannot read {token}: read the constants by hand")
            return scalars[token[6:]] if token.startswith("self::") else php_string(token)

        arrays[m[1]] = {php_string(k): value(v) for k, v in items} if items and items[0][0] else [value(v) for _, v in items]
    return arrays


def _split_items(text: str) -> list[str]:
    """Comma-separated items at bracket depth 0 (PHP strings kept whole)."""
    items, depth, current, i = [], 0, "", 0
    while i < len(text):
        char = text[i]
        if char in "'\"":
            literal = re.match(PHP_STRING, text[i:])[0]
            current += literal
            i += len(literal)
            continue
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
        i += 1
    if current.strip():
        items.append(current.strip())
    return items


def _function_body(source: str, name: str) -> str:
    start = source.index(f"function {name}(")
    body = source[source.index("return [", start) + len("return ["):]
    depth, end = 1, 0
    while depth:
        depth += {"[": 1, "]": -1}.get(body[end], 0)
        end += 1
    return body[:end - 1]


def multi_rules(source: str) -> dict[str, list[str]]:
    """GroupedSubmissionsService::multi_rules as the fixture writes rules."""
    if not re.search(r"\(\$nullable \? 'in:null,' : 'in:'\)\s*\.\s*implode\(',',\s*\$array\)", source):
        raise CommandError("rule_in() changed: read GroupedSubmissionsService.php by hand")
    flags = {}
    locals_ = dict(re.findall(r"\$(\w+) = \$statement\['(\w+)'\] \?\? \[\];", source))
    for var, needle, local in re.findall(r"\$(\w+) = in_array\('(\w+)', \$(\w+), true\);", source):
        flags[var] = (locals_[local], needle)
    rules = {}
    for entry in _split_items(_function_body(source, "multi_rules")):
        key, _, value = entry.partition("=>")
        items = _split_items(value.strip()[1:-1]) if value.strip().startswith("[") else [value.strip()]
        rules[php_string(key.strip())] = [_rule(item, flags) for item in items]
    return rules


def _rule(item: str, flags: dict) -> str:
    if item.startswith("'"):
        return php_string(item)
    m = re.fullmatch(r"\$this->rule_in\((?:array_keys\()?(?:Statement|EuropeanCountriesService|EuropeanLanguagesService)::(\w+)\)?(, true)?\)", item)
    if m:
        return f"in:{'null,' if m[2] else ''}@{m[1]}"
    m = re.fullmatch(r"Rule::(requiredIf|excludeIf)\((!\s*)?\$(\w+)\)", item)
    if m and m[3] in flags and (m[1] == "requiredIf") == (not m[2]):
        field, needle = flags[m[3]]
        return f"{'required_if_contains' if m[1] == 'requiredIf' else 'exclude_unless_contains'}:{field},{needle}"
    raise CommandError(f"cannot read the rule {item!r}: read GroupedSubmissionsService.php by hand")


def _digest(show, path: str) -> str | None:
    """The sha256 of a file at the commit, None if the commit has no such file."""
    try:
        return hashlib.sha256(show(path)).hexdigest()
    except subprocess.CalledProcessError:
        return None


def multi_messages(source: str) -> dict[str, str]:
    return {php_string(k): php_string(v) for k, v in re.findall(rf"({PHP_STRING})\s*=>\s*({PHP_STRING})", _function_body(source, "multi_messages"))}


class Command(BaseCommand):
    help = "Compare the Transparency Database rules fixture with the database's source at a commit; --write refreshes it."

    def add_arguments(self, parser):
        parser.add_argument("--git-dir", required=True, help="a git directory of digital-services-act/transparency-database")
        parser.add_argument("--commit", default="HEAD")
        parser.add_argument("--rules", default=str(RULES_PATH))
        parser.add_argument("--write", action="store_true", help="rewrite the fixture from the source")

    def handle(self, *args, **o):
        git = ["git", "--git-dir", o["git_dir"]]
        try:
            commit = subprocess.run([*git, "rev-parse", o["commit"]], capture_output=True, text=True, check=True).stdout.strip()
            show = lambda path: subprocess.run([*git, "show", f"{commit}:{path}"], capture_output=True, check=True).stdout  # noqa: E731
            fixture = json.loads(open(o["rules"]).read())
            read = self._read(show)
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            raise CommandError(f"cannot read the source or the fixture: {exc}") from exc
        differences = self._compare(fixture, read)
        changed = sorted(path for path, digest in fixture["source"]["files"].items() if _digest(show, path) != digest)
        for line in differences:
            self.stdout.write(line)
        self.stdout.write(f"fixture at {fixture['source']['commit'][:12]}, source at {commit[:12]}: "
                          f"{len(differences)} difference(s); files changed since: {', '.join(changed) or 'none'}")
        if o["write"]:
            fixture["enumerations"], fixture["custom_messages"] = read["enumerations"], read["custom_messages"]
            for name, rules in read["fields"].items():
                fixture["fields"].setdefault(name, {})["rules"] = rules
            for name in set(fixture["fields"]) - set(read["fields"]):
                del fixture["fields"][name]
            date = subprocess.run([*git, "log", "-1", "--format=%cI", commit], capture_output=True, text=True).stdout.strip()
            files = {path: _digest(show, path) for path in fixture["source"]["files"]}
            fixture["source"].update(commit=commit, commit_date=date, files={p: d for p, d in files.items() if d})
            with open(o["rules"], "w") as out:
                json.dump(fixture, out, indent=1, ensure_ascii=False)
                out.write("\n")
            try:
                load_rules(o["rules"])
            except RulesError as exc:
                raise CommandError(f"written, but the fake cannot run it: {exc}") from exc
            self.stdout.write(f"written {o['rules']}; read by hand: {', '.join(changed) or 'nothing'}")

    @staticmethod
    def _read(show) -> dict:
        model, countries, languages = (constants(show(p).decode()) for p in (MODEL, COUNTRIES, LANGUAGES))
        grouped = show(GROUPED).decode()
        wanted = [(model, name, MODEL) for name in STATEMENT_ENUMERATIONS]
        wanted += [(countries, name, COUNTRIES) for name in ("EUROPEAN_COUNTRY_CODES", "EUROPEAN_UNION_COUNTRY_CODES",
                                                              "EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES")]
        wanted += [(languages, name, LANGUAGES) for name in ("ALL_LANGUAGES", "EUROPEAN_LANGUAGE_CODES")]
        enumerations = {}
        for found, name, path in wanted:
            if name not in found:
                raise CommandError(f"{path} has no constant {name}: read it by hand")
            enumerations[name] = found[name]
        return {"enumerations": enumerations, "fields": multi_rules(grouped), "custom_messages": multi_messages(grouped)}

    @staticmethod
    def _compare(fixture: dict, read: dict) -> list[str]:
        lines = []
        for name, values in read["enumerations"].items():
            have = fixture["enumerations"].get(name)
            if have != values:
                added = [v for v in values if v not in (have or [])]
                removed = [v for v in (have or []) if v not in values]
                relabelled = [k for k in values if isinstance(values, dict) and isinstance(have, dict) and k in have and have[k] != values[k]]
                lines.append(f"enumeration {name}: added {added}, removed {removed}, relabelled {relabelled}")
        for name, rules in read["fields"].items():
            have = fixture["fields"].get(name, {}).get("rules")
            if have != rules:
                lines.append(f"field {name}: fixture {have}, source {rules}")
        for name in set(fixture["fields"]) - set(read["fields"]):
            lines.append(f"field {name}: in the fixture, not in the source")
        if fixture["custom_messages"] != read["custom_messages"]:
            lines.append(f"custom messages differ: source {read['custom_messages']}")
        return lines
