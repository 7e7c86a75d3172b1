"""The default term lists a new installation's policy starts with (docs/policy-rules.md,
"Default term lists").

moderation/data/terms/ holds one file per language (`en.json`, `id.json`) and `emoji.json` (every
language), each a list of policy rules, `{"category", "action", "language", "terms"}`, built by
lab/term_lists.py from public lists (moderation/data/terms/SOURCES.md). A language's lists join
the policy only when the detector knows the language (`MODERATION_LANGUAGES`): a rule may only name
such a language (moderation.text.rules.validate_term_lists). Malay text is read by the Indonesian
lists: close languages share rules (moderation/text/language.py).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TERMS_DIR = Path(__file__).resolve().parent.parent / "data" / "terms"
EVERY_LANGUAGE = "emoji"  # the file whose rules apply to every language


@cache
def _read(name: str) -> tuple[dict, ...]:
    path = TERMS_DIR / f"{name}.json"
    return tuple(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else ()


def shipped_languages() -> list[str]:
    """The languages a default list ships for."""
    return sorted(p.stem for p in TERMS_DIR.glob("*.json") if p.stem != EVERY_LANGUAGE)


def default_term_lists(languages) -> list[dict]:
    """The default rules for `languages` (the detector's): each language's lists, then those for
    every language; copies, so that a caller may change them."""
    names = [code for code in shipped_languages() if code in languages] + [EVERY_LANGUAGE]
    return [{**rule, "terms": list(rule["terms"])} for name in names for rule in _read(name)]
