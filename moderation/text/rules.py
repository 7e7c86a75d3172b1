"""Watched-term rules of a policy version: parsing, merging, diffing and matching term lists.

A policy's `term_lists` is a list of rules, one per (category, action, language):
`{"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh", ...]}`. A term
is a word or phrase, matched whole and through evasions (moderation.text.matching); a term written
`re:<pattern>` is an RE2 pattern (linear time: no pattern can backtrack catastrophically),
matched case-insensitively against the text as written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass
from operator import attrgetter
from threading import Lock
from typing import NamedTuple

import re2

from moderation.text.language import Detection
from moderation.text.matching import TermMatcher, canonical
from moderation.models import RuleAction

PATTERN_PREFIX = "re:"
MAX_TERM_CHARS = 200
MAX_PATTERN_CHARS = 500
MAX_TERMS = 100_000
# Matches each matching pass examines in full per text (rule_matches): what bounds the work of one
# review whatever its text. 5,000 is far above what a real text holds and takes a few milliseconds.
MATCH_BUDGET = 5_000
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.case_sensitive = False
_RE2_OPTIONS.log_errors = False
_RE2_OPTIONS.max_mem = 8 << 20


def rule_name(rule: dict) -> str:
    """How a rule is named in explanations and reasons: "insult:reject:id" ("insult:reject" when
    it applies to every language)."""
    name = f"{rule['category']}:{rule['action']}"
    return f"{name}:{rule['language']}" if rule.get("language") else name


def parse_terms(text: str) -> list[str]:
    """One term or phrase per line; `#` at the start of a line or after a space starts a comment.
    Each term once, in the order of its first line."""
    terms = []
    for line in text.splitlines():
        cut = line.find("#") if line.lstrip().startswith("#") else line.find(" #")
        terms.append((line if cut < 0 else line[:cut]).strip())
    return merge_terms(terms)


def merge_terms(*lists) -> list[str]:
    """The terms of `lists`, each once, in order of first appearance; empty ones left out. A dict
    keeps the order and makes each look-up constant time (a list's `in` made 30,000 + 30,000 terms
    a 20 s preview)."""
    return [term for term in dict.fromkeys(term for terms in lists for term in terms) if term]


def _key(rule: dict) -> tuple[str, str, str]:
    return rule["category"], rule["action"], rule.get("language", "")


def term_lists_with(term_lists: list[dict], *, category: str, action: str, language: str = "",
                    add: list[str] = (), remove: list[str] = (), replace: bool = False) -> list[dict]:
    """A copy of `term_lists` with terms added to (or removed from, or replacing) one rule; the
    rule is created when new and dropped when left empty. Rules come out in a stable order."""
    wanted = (category, action, language)
    rules = {_key(r): list(r["terms"]) for r in term_lists}
    removed = set(remove)
    merged = merge_terms([] if replace else rules.get(wanted, []), add)
    rules[wanted] = [t for t in merged if t not in removed]
    return [
        {"category": c, "action": a, "language": lang, "terms": ts}
        for (c, a, lang), ts in sorted(rules.items())
        if ts
    ]


@dataclass(frozen=True)
class RuleDiff:
    rule: str
    added: tuple[str, ...]
    removed: tuple[str, ...]


def term_lists_diff(old: list[dict], new: list[dict]) -> list[RuleDiff]:
    """What `new` adds to and removes from `old`, per rule (rules without change left out)."""
    before = {_key(r): r for r in old}
    after = {_key(r): r for r in new}
    diffs = []
    for key in sorted(set(before) | set(after)):
        was = before.get(key, {}).get("terms", [])
        now = after.get(key, {}).get("terms", [])
        was_set, now_set = set(was), set(now)
        added = tuple(t for t in now if t not in was_set)
        removed = tuple(t for t in was if t not in now_set)
        if added or removed:
            diffs.append(RuleDiff(rule_name(after.get(key) or before[key]), added, removed))
    return diffs


def term_lists_digest(term_lists: list[dict]) -> str:
    """The sha256 of a canonical JSON of `term_lists` (sorted keys, no spaces, ASCII with \\u
    escapes, so any string hashes, a lone surrogate too): what the term editor's preview is bound
    to, so only the draft whose diff was shown is published (docs/workplace.md, "The term
    editor"). Rule order counts: it is the order published."""
    canonical_json = json.dumps(term_lists, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical_json.encode("ascii")).hexdigest()


def validate_term_lists(value: object, *, languages: tuple[str, ...]) -> list[str]:
    """Errors in a policy's term lists (empty when valid)."""
    if not isinstance(value, list):
        return ["term lists must be a list of {category, action, language, terms}"]
    errors, seen, total = [], set(), 0
    actions = {a.value for a in RuleAction}
    for n, rule in enumerate(value, 1):
        where = f"rule {n}"
        if not isinstance(rule, dict) or set(rule) != {"category", "action", "language", "terms"}:
            errors.append(f"{where}: expected exactly category, action, language and terms")
            continue
        category, action, language, terms = rule["category"], rule["action"], rule["language"], rule["terms"]
        if not isinstance(category, str) or not category or len(category) > 64 or category != category.strip():
            errors.append(f"{where}: category must be a name of 1 to 64 characters")
            continue
        where = rule_name(rule) if isinstance(action, str) and isinstance(language, str) else where
        if action not in actions:
            errors.append(f"{where}: action must be one of {', '.join(sorted(actions))}")
        if not isinstance(language, str) or (language and language not in languages):
            errors.append(f"{where}: language must be empty (every language) or one the detector knows: "
                          f"{', '.join(languages)}")
        if (category, action, language) in seen:
            errors.append(f"{where}: appears twice; merge the two lists")
        seen.add((category, action, language))
        if not isinstance(terms, list) or not terms:
            errors.append(f"{where}: terms must be a non-empty list")
            continue
        total += len(terms)
        errors += [f"{where}: {e}" for t in terms for e in _term_errors(t)]
    if total > MAX_TERMS:
        errors.append(f"{total} terms in all; at most {MAX_TERMS}")
    return errors[:50]


def _term_errors(term: object) -> list[str]:
    if not isinstance(term, str) or not term.strip():
        return ["every term must be a non-empty string"]
    if term.startswith(PATTERN_PREFIX):
        pattern = term[len(PATTERN_PREFIX):]
        if len(pattern) > MAX_PATTERN_CHARS:
            return [f"pattern longer than {MAX_PATTERN_CHARS} characters: {term[:40]}…"]
        try:
            re2.compile(pattern, _RE2_OPTIONS)
        except re2.error as exc:
            detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            return [f"pattern {pattern!r} is not valid RE2 ({detail})"]
        return []
    if len(term) > MAX_TERM_CHARS:
        return [f"term longer than {MAX_TERM_CHARS} characters: {term[:40]}…"]
    if not canonical(term):
        # Emoji and punctuation are matched as written, by a pattern: say which one to paste.
        return [f"term {term!r} has no letter or digit to match; write it as a pattern: "
                f"{PATTERN_PREFIX}{re.escape(term.strip())}"]
    return []


class RuleMatch(NamedTuple):  # a tuple: a hostile text can match hundreds of times
    rule: str
    category: str
    action: str
    language: str
    term: str
    matched: str  # the text as written
    start: int
    end: int
    past_budget: bool = False  # found past the text's match budget: counts, and no allow cancels it

    def as_json(self) -> dict:
        data = self._asdict()
        if not self.past_budget:
            del data["past_budget"]  # the stored shape of every ordinary match stays as it was
        return data


_IN_TEXT_ORDER = attrgetter("start", "end", "rule")


class Found(NamedTuple):
    rule: int  # index of the rule in the policy's term lists
    term: str
    start: int
    end: int
    past_budget: bool = False


class CompiledRules:
    """A policy's term lists ready to match: one automaton for the terms, one RE2 set for the
    patterns. Built once per policy version and process."""

    def __init__(self, term_lists: list[dict]):
        self.rules = term_lists
        self._terms: list[tuple[int, str]] = []
        self._patterns: list[tuple[int, str, re2._Regexp]] = []
        for index, rule in enumerate(term_lists):
            for term in rule["terms"]:
                if term.startswith(PATTERN_PREFIX):
                    self._patterns.append((index, term, re2.compile(term[len(PATTERN_PREFIX):], _RE2_OPTIONS)))
                else:
                    self._terms.append((index, term))
        self._matcher = TermMatcher([term for _, term in self._terms])
        self._set = None
        if self._patterns:
            self._set = re2.Set.SearchSet(_RE2_OPTIONS)
            for _, _, regexp in self._patterns:
                self._set.Add(regexp.pattern)
            self._set.Compile()

    def find(self, text: str, *, budget: int | None = None) -> list[Found]:
        """Every match in `text`, in text order. With a `budget`, each matching pass (words,
        words spelt apart, patterns) reports its first `budget` matches in full, then only the
        first further match of each term, marked `past_budget` (TermMatcher.find)."""
        found = [Found(self._terms[h.term][0], self._terms[h.term][1], h.start, h.end, h.past_budget)
                 for h in self._matcher.find(text, budget=budget)]
        if self._set is not None:
            left = len(text) if budget is None else budget
            # google-re2's Set.Match answers None, not an empty list, when no pattern matches.
            for i in sorted(self._set.Match(text) or ()):
                index, term, regexp = self._patterns[i]
                for match in regexp.finditer(text):
                    if match.end() > match.start():
                        found.append(Found(index, term, *match.span(), left <= 0))
                        if left <= 0:
                            break  # this pattern's first match past the budget: it counts, that is enough
                        left -= 1
        return sorted(found, key=_IN_TEXT_ORDER)  # runs already in order: sorting them is a merge


_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = Lock()


def compiled(policy) -> CompiledRules:
    """The compiled rules of a policy; published versions never change, so they are cached by
    row and version (a draft, unsaved, is compiled each time)."""
    if policy.pk is None:
        return CompiledRules(policy.term_lists)
    key = (policy.pk, policy.version, policy.created_at)
    with _CACHE_LOCK:
        rules = _CACHE.get(key)
        if rules is not None:
            _CACHE.move_to_end(key)
            return rules
    rules = CompiledRules(policy.term_lists)
    with _CACHE_LOCK:
        _CACHE[key] = rules
        while len(_CACHE) > 4:
            _CACHE.popitem(last=False)
    return rules


def rule_matches(policy, text: str, detection: Detection) -> list[RuleMatch]:
    """The matches that count: rules in scope for the text's language, minus every match that
    lies inside an `allow` match (the allow match is kept, to say why). Pure: no database.

    Work per text is bounded by MATCH_BUDGET, whatever the text: each matching pass examines its
    first MATCH_BUDGET matches in full, then reports only each term's first further match
    (CompiledRules.find). Past the budget the outcome stays the strictest one: a further match
    of a reject or manual_review term still counts, and no allow match cancels it, since the
    other matches of its term there were not examined. So a text is never approved by an
    exception the matcher did not examine; at worst, one with more matches than the budget is
    judged more strictly than in full (docs/policy-rules.md, "Work per text").
    """
    rules = compiled(policy)
    allows, examined, late = [], [], []
    for found in rules.find(text, budget=MATCH_BUDGET):
        rule = rules.rules[found.rule]
        if rule["language"] and detection.sure and not detection.leads(rule["language"]):
            continue  # scoped to another language
        match = RuleMatch(rule_name(rule), rule["category"], rule["action"], rule["language"], found.term,
                          text[found.start:found.end], found.start, found.end, found.past_budget)
        (allows if match.action == RuleAction.ALLOW else late if found.past_budget else examined).append(match)
    inside, used = _containment(allows, examined)
    kept = [m for m, cancelled in zip(examined, inside, strict=True) if not cancelled]
    kept += late
    kept += [a for a, cancelled_some in zip(allows, used, strict=True) if cancelled_some]
    return sorted(kept, key=_IN_TEXT_ORDER)


def _containment(allows: list[RuleMatch], others: list[RuleMatch]) -> tuple[list[bool], list[bool]]:
    """Which of `others` lie inside some allow match, and which allow matches hold one of
    `others`. Both lists in text order (by start). One sweep each way: linear in the matches, where
    testing every pair was quadratic (a 100 KB text of "kill the process" took seconds).
    """
    # A match lies inside an allow match iff, among the allow matches starting at or before it,
    # the furthest-reaching one ends at or after it.
    inside, reach, i = [], -1, 0
    for match in others:
        while i < len(allows) and allows[i].start <= match.start:
            reach = max(reach, allows[i].end)
            i += 1
        inside.append(match.end <= reach)
    # An allow match holds one iff, among the matches starting at or after it, the one ending
    # first ends within it.
    used, nearest, j = [False] * len(allows), float("inf"), len(others)
    for k in range(len(allows) - 1, -1, -1):
        while j and others[j - 1].start >= allows[k].start:
            j -= 1
            nearest = min(nearest, others[j].end)
        used[k] = nearest <= allows[k].end
    return inside, used
