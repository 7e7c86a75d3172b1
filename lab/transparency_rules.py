"""The DSA Transparency Database's validation of statements of reasons, run from its rules as data
(tests/fixtures/dsa_tdb_rules.json, transcribed from the database's own source at a named commit;
docs/transparency.md says how to refresh it).

The database is a Laravel application: its rules are Laravel rule strings checked in order, with
Laravel's semantics, which this module reproduces for the rules the fixture uses. Those semantics
decide what a sender sees, so they are kept where they differ from the obvious reading:

- the request is trimmed first and empty strings become null (Laravel's TrimStrings and
  ConvertEmptyStringsToNull middleware), so a text of only spaces is a missing text;
- a rule other than required/required_if/required_without_all is skipped for an absent field,
  and for a null one when the field is `nullable`; a field that is not nullable and is sent as
  null is checked, and refused (`category_addition: null` is "must be an array");
- an implicit rule (required...) that fails stops the field's other rules; otherwise every
  failing rule adds its message, in the rules' order;
- exclude rules drop a field from what is stored, and stop its later rules, but not its earlier
  ones (`decision_visibility_other` is checked for length before it is excluded);
- `in` compares PHP string forms ("null" is an allowed string for the nullable lists).

Where this module approximates (the URL pattern, PHP's free-form date parser behind the date
comparisons), a statement it accepts or refuses gets the same answer from the database; only the
number of messages for one malformed value can differ. docs/transparency.md lists the gaps.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cache
from pathlib import Path

RULES_PATH = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "dsa_tdb_rules.json"

IMPLICIT = {"required", "required_if", "required_without_all"}
KNOWN = IMPLICIT | {
    "nullable", "array", "string", "in", "max", "between", "regex", "url", "date_format",
    "after_or_equal", "before_or_equal", "exclude_unless",
    # Rule::requiredIf / Rule::excludeIf on "array F contains V" (the fixture's _readme).
    "required_if_contains", "exclude_unless_contains",
}


class RulesError(ValueError):
    """The rules file names a rule this module does not implement: refreshing it brought a rule
    that needs reading before the fake can claim to validate like the database."""


@dataclass(frozen=True)
class Rules:
    fields: dict[str, list[tuple[str, list[str]]]]
    batch: dict[str, list[tuple[str, list[str]]]]
    enumerations: dict
    messages: dict[str, str]
    custom_messages: dict[str, str]
    max_statements: int
    source: dict
    raw: dict

    def allowed(self, name: str) -> list[str]:
        """The values an `in:@NAME` accepts: an enumeration's keys, or its values if a list."""
        values = self.enumerations[name]
        return list(values) if isinstance(values, dict) else list(values)


def _parse_rule(rule: str, enumerations: dict) -> tuple[str, list[str]]:
    name, _, params = rule.partition(":")
    if name not in KNOWN:
        raise RulesError(f"rule {rule!r} is not implemented by lab/transparency_rules.py")
    if name == "regex":
        return name, [params]  # a pattern may contain commas
    values = params.split(",") if params else []
    if name == "in":
        expanded = []
        for value in values:
            if value.startswith("@"):
                enumeration = enumerations.get(value[1:])
                if enumeration is None:
                    raise RulesError(f"rule {rule!r} names an enumeration the file does not have")
                expanded.extend(enumeration)
            else:
                expanded.append(value)
        values = expanded
    return name, values


def load_rules(path: Path | str = RULES_PATH) -> Rules:
    raw = json.loads(Path(path).read_text())
    enumerations = raw["enumerations"]

    def parse(field_rules: dict) -> dict:
        return {name: [_parse_rule(r, enumerations) for r in spec["rules"] if r] for name, spec in field_rules.items()}

    batch = {name: [_parse_rule(r, enumerations) for r in rules] for name, rules in raw["endpoint"]["batch_rules"].items()}
    between = dict(batch["statements"])["between"]
    return Rules(fields=parse(raw["fields"]), batch=batch, enumerations=enumerations, messages=raw["messages"],
                 custom_messages=raw["custom_messages"], max_statements=int(between[1]), source=raw["source"], raw=raw)


@cache
def default_rules() -> Rules:
    return load_rules(RULES_PATH)


# --- The request as Laravel reads it --------------------------------------------------------------

_TRIMMED = frozenset("\t\n\x0b\x0c\r\ufeff\u200b\u200e")


def _trim_char(char: str) -> bool:
    # PCRE's \s under /u (Unicode separators and the ASCII controls above), plus the three
    # invisible characters Laravel's TrimStrings names.
    return char in _TRIMMED or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def _trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _trim_char(text[start]):
        start += 1
    while end > start and _trim_char(text[end - 1]):
        end -= 1
    return text[start:end]


def preprocess(value):
    """TrimStrings then ConvertEmptyStringsToNull, at every depth (values only, not keys)."""
    if isinstance(value, str):
        value = _trim(value)
        return None if value == "" else value
    if isinstance(value, dict):
        return {key: preprocess(item) for key, item in value.items()}
    if isinstance(value, list):
        return [preprocess(item) for item in value]
    return value


def php_string(value) -> str:
    """PHP's (string) cast of a JSON scalar, as `in` and the size rules compare it."""
    if value is None or value is False:
        return ""
    if value is True:
        return "1"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def _is_numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        try:
            float(value.strip())
        except ValueError:
            return False
        return True
    return False


def _php_trim_empty(text: str) -> bool:
    return text.strip(" \t\n\r\0\x0b") == ""


def _filled(value) -> bool:
    """Laravel's `required` test."""
    if value is None:
        return False
    if isinstance(value, str):
        return not _php_trim_empty(value)
    if isinstance(value, (list, dict)):
        return len(value) > 0
    return True


def lookup(data: dict, attribute: str) -> tuple[bool, object]:
    """(present, value) of a possibly dotted attribute, as Arr::has / Arr::get read it."""
    current = data
    for part in attribute.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return False, None
    return True, current


def displayable(attribute: str) -> str:
    """Laravel's attribute name in messages: str_replace('_', ' ', Str::snake($attribute))."""
    if not attribute.islower():
        attribute = re.sub(r"\s+", "", attribute)
        attribute = re.sub(r"(.)(?=[A-Z])", r"\1_", attribute).lower()
    return attribute.replace("_", " ")


# --- Dates ---------------------------------------------------------------------------------------

def _days_in_month(year: int, month: int) -> int:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def _strict_ymd(value) -> bool:
    """date_format:Y-m-d: parsed, then formatted back to exactly the same text."""
    if not isinstance(value, str):
        return False
    match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", value)
    if not match:
        return False
    year, month, day = (int(part) for part in match.groups())
    return 1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)


def _lenient_date(value) -> date | None:
    """What the date comparisons read: DateTime::createFromFormat('!Y-m-d') (one-digit parts and
    overflow allowed: 2023-02-30 is 2 March), else an ISO date-time. PHP's free-form parser
    behind it reads more ("18 May 2023"); such a value already fails date_format."""
    if not isinstance(value, str) and not _is_numeric(value):
        return None
    text = php_string(value)
    match = re.fullmatch(r"(\d{1,4})-(\d{1,2})-(\d{1,2})", text)
    if match:
        year, month, day = (int(part) for part in match.groups())
        years, month_index = divmod(year * 12 + month - 1, 12)
        if not 1 <= years <= 9999:
            return None
        try:
            return date(years, month_index + 1, 1) + timedelta(days=day - 1)
        except OverflowError:
            return None
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        return None


# --- URLs ----------------------------------------------------------------------------------------

# Laravel's Str::isUrl (a pattern derived from Symfony's UrlValidator) with its default list of
# schemes, approximated for Python's `re` (\w for \pL\pN). http(s) URLs with ordinary hosts get
# the database's answer.
_SCHEMES = (
    "aaa|aaas|about|acap|acct|acd|acr|adiumxtra|adt|afp|afs|aim|amss|android|appdata|apt|ark|attachment|aw|"
    "barion|beshare|bitcoin|bitcoincash|blob|bolo|browserext|calculator|callto|cap|cast|casts|chrome|"
    "chrome-extension|cid|coap|coap\\+tcp|coap\\+ws|coaps|coaps\\+tcp|coaps\\+ws|com-eventbrite-attendee|content|"
    "conti|crid|cvs|dab|data|dav|diaspora|dict|did|dis|dlna-playcontainer|dlna-playsingle|dns|dntp|dpp|drm|drop|"
    "dtn|dvb|ed2k|elsi|example|facetime|fax|feed|feedready|file|filesystem|finger|first-run-pen-experience|fish|"
    "fm|ftp|fuchsia-pkg|geo|gg|git|gizmoproject|go|gopher|graph|gtalk|h323|ham|hcap|hcp|http|https|hxxp|hxxps|"
    "hydrazone|iax|icap|icon|im|imap|info|iotdisco|ipn|ipp|ipps|irc|irc6|ircs|iris|iris\\.beep|iris\\.lwz|"
    "iris\\.xpc|iris\\.xpcs|isostore|itms|jabber|jar|jms|keyparc|lastfm|ldap|ldaps|leaptofrogans|lorawan|lvlt|"
    "magnet|mailserver|mailto|maps|market|message|mid|mms|modem|mongodb|moz|msnim|msrp|msrps|mss|mtqp|mumble|"
    "mupdate|mvn|news|nfs|ni|nih|nntp|notes|ocf|oid|onenote|onenote-cmd|opaquelocktoken|openpgp4fpr|pack|palm|"
    "paparazzi|payto|pkcs11|platform|pop|pres|prospero|proxy|pwid|psyc|pttp|qb|query|redis|rediss|reload|res|"
    "resource|rmi|rsync|rtmfp|rtmp|rtsp|rtsps|rtspu|s3|secondlife|service|session|sftp|sgn|shttp|sieve|"
    "simpleledger|sip|sips|skype|smb|sms|smtp|snews|snmp|soap\\.beep|soap\\.beeps|soldat|spiffe|spotify|ssh|steam|"
    "stun|stuns|submit|svn|tag|teamspeak|tel|teliaeid|telnet|tftp|tg|things|thismessage|tip|tn3270|tool|"
    "ts3server|turn|turns|tv|udp|unreal|urn|ut2004|v-event|vemmi|ventrilo|videotex|vnc|view-source|wais|webcal|"
    "wpid|ws|wss|wtai|wyciwyg|xcon|xcon-userid|xfire|xmlrpc\\.beep|xmlrpc\\.beeps|xmpp|xri|ymsgr|z39\\.50|"
    "z39\\.50r|z39\\.50s|ms-[a-z-]+"
)
_URL = re.compile(
    rf"(?:{_SCHEMES})://"
    r"(?:(?:(?:[\w.\-]|%[0-9A-Fa-f]{2})+:)?(?:[\w.\-]|%[0-9A-Fa-f]{2})+@)?"
    r"(?:[\w.\-]*[^\W_][\w\-]*\.?|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]+)?"
    r"(?:/(?:[\w\-.~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)*"
    r"(?:\?(?:[\w\-.~!$&'\[\]()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?"
    r"(?:\#(?:[\w\-.~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*)?",
    re.IGNORECASE,
)


def _php_regex(pattern: str) -> re.Pattern:
    """A /.../ PCRE pattern of the fixture as Python: /D makes $ the very end."""
    body, _, flags = pattern[1:].rpartition(pattern[0])
    if "D" in flags and body.endswith("$"):
        body = body[:-1] + r"\Z"
    return re.compile(body, re.IGNORECASE if "i" in flags else 0)


# --- Validation ----------------------------------------------------------------------------------

def _size(value) -> int:
    return len(value) if isinstance(value, (list, dict)) else len(php_string(value))


class _Attribute:
    """One attribute's rules run against one statement, as Laravel's Validator runs them."""

    def __init__(self, rules: Rules, data: dict, name: str, parsed: list[tuple[str, list[str]]]):
        self.rules, self.data, self.name, self.parsed = rules, data, name, parsed
        self.present, self.value = lookup(data, name)
        self.names = {rule for rule, _ in parsed}

    def run(self) -> tuple[list[str], bool]:
        """(messages, excluded)."""
        messages: list[str] = []
        for rule, params in self.parsed:
            rule, params = self._resolve(rule, params)
            if rule is None or rule == "nullable":
                continue
            if not self._validatable(rule):
                continue
            if rule == "exclude":
                return messages, True
            if rule == "exclude_unless":
                if not self._dependent_matches(params):
                    return messages, True
                continue
            if not self._passes(rule, params):
                messages.append(self._message(rule, params))
                if rule in IMPLICIT:
                    break  # Laravel stops a field's rules once a required... rule failed
        return messages, False

    def _resolve(self, rule: str, params: list[str]):
        """Rule::requiredIf / Rule::excludeIf become `required` / `exclude` or nothing, decided
        on the raw statement (GroupedSubmissionsService::sanitizePayload)."""
        if rule not in ("required_if_contains", "exclude_unless_contains"):
            return rule, params
        values = self.data.get(params[0])
        values = list(values.values()) if isinstance(values, dict) else values if isinstance(values, list) else []
        contains = any(isinstance(v, str) and v == params[1] for v in values)
        if rule == "required_if_contains":
            return ("required", []) if contains else (None, [])
        return (None, []) if contains else ("exclude", [])

    def _validatable(self, rule: str) -> bool:
        implicit = rule in IMPLICIT
        if isinstance(self.value, str) and _php_trim_empty(self.value):
            return implicit
        if not (self.present or implicit):
            return False
        return implicit or "nullable" not in self.names or self.value is not None

    def _dependent_matches(self, params: list[str]) -> bool:
        _, other = lookup(self.data, params[0])
        if isinstance(other, bool) or other is None or isinstance(other, (list, dict)):
            return False
        return php_string(other) in params[1:]

    def _passes(self, rule: str, params: list[str]) -> bool:
        value = self.value
        if rule == "required":
            return _filled(value)
        if rule == "required_if":
            return _filled(value) if self._dependent_matches(params) else True
        if rule == "required_without_all":
            others_empty = all(not _filled(lookup(self.data, other)[1]) for other in params)
            return _filled(value) if others_empty else True
        if rule == "array":
            return isinstance(value, (list, dict))
        if rule == "string":
            return isinstance(value, str)
        if rule == "in":
            return self._in(value, params)
        if rule == "max":
            return _size(value) <= int(params[0])
        if rule == "between":
            return int(params[0]) <= _size(value) <= int(params[1])
        if rule == "regex":
            return (isinstance(value, str) or _is_numeric(value)) and bool(_php_regex(params[0]).search(php_string(value)))
        if rule == "url":
            return isinstance(value, str) and _URL.fullmatch(value) is not None
        if rule == "date_format":
            return _strict_ymd(value)
        if rule in ("after_or_equal", "before_or_equal"):
            first, second = _lenient_date(value), _lenient_date(params[0])
            if first is None or second is None:
                return False
            return first >= second if rule == "after_or_equal" else first <= second
        raise RulesError(f"rule {rule!r} has no check")  # load_rules refuses unknown rules first

    def _in(self, value, allowed: list[str]) -> bool:
        if isinstance(value, (list, dict)):
            if "array" not in self.names:
                return False
            items = list(value.values()) if isinstance(value, dict) else value
            return all(not isinstance(item, (list, dict)) and php_string(item) in allowed for item in items)
        return php_string(value) in allowed

    def _message(self, rule: str, params: list[str]) -> str:
        custom = self.rules.custom_messages.get(f"{self.name}.{rule}")
        if custom:
            return custom
        key = rule
        if rule in ("max", "between"):
            key = f"{rule}.{'array' if 'array' in self.names else 'string'}"
        text = self.rules.messages[key].replace(":attribute", displayable(self.name))
        if rule in ("max",):
            text = text.replace(":max", params[0])
        elif rule == "between":
            text = text.replace(":min", params[0]).replace(":max", params[1])
        elif rule == "required_without_all":
            text = text.replace(":values", " / ".join(displayable(p) for p in params))
        elif rule == "required_if":
            text = text.replace(":other", displayable(params[0])).replace(":value", params[1])
        elif rule in ("after_or_equal", "before_or_equal"):
            text = text.replace(":date", params[0])
        elif rule == "date_format":
            text = text.replace(":format", params[0])
        return text


def _run(rules: Rules, data: dict, field_rules: dict) -> tuple[dict[str, list[str]], set[str]]:
    errors: dict[str, list[str]] = {}
    excluded: set[str] = set()
    for name, parsed in field_rules.items():
        messages, was_excluded = _Attribute(rules, data, name, parsed).run()
        if messages:
            errors[name] = messages
        if was_excluded:
            excluded.add(name)
    return errors, excluded


def validate_statement(statement, rules: Rules | None = None, *, preprocessed: bool = False) -> dict[str, list[str]]:
    """The database's errors for one statement, keyed by field, in its order; {} if it passes.
    `statement` is what a sender puts in the JSON body (it is trimmed here as the database
    trims it, unless `preprocessed`)."""
    return check_statement(statement, rules, preprocessed=preprocessed)[0]


def check_statement(statement, rules: Rules | None = None, *, preprocessed: bool = False) -> tuple[dict, dict]:
    """(errors, validated): validated is what Validator::validated() keeps (fields with a rule,
    not excluded), meaningful when errors is empty."""
    rules = rules or default_rules()
    if not isinstance(statement, dict):
        # The database itself fails with a 500 on a statement that is not an object (a TypeError
        # in Validator::make); the fake names it instead, so a sender's bug reads as one.
        return {"statement": ["The statement must be a JSON object."]}, {}
    data = statement if preprocessed else preprocess(statement)
    errors, excluded = _run(rules, data, rules.fields)
    validated: dict = {}
    for name in rules.fields:
        top = name.split(".")[0]
        if top in excluded or name in excluded:
            continue
        present, value = lookup(data, name)
        if not present:
            continue
        if "." in name:
            validated.setdefault(top, {})
            if isinstance(validated[top], dict):
                validated[top][name.split(".", 1)[1]] = value
        elif name not in validated:
            validated[name] = value
    return errors, validated


def validate_batch_shape(body: dict, rules: Rules | None = None) -> dict[str, list[str]]:
    """The endpoint's first check, on the whole body: `statements` required, an array of 1 to
    `max_statements` items."""
    rules = rules or default_rules()
    return _run(rules, body, rules.batch)[0]
