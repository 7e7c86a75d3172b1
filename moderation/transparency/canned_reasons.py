"""Canned reasons (docs/workplace.md, "Canned reasons"): the policy's own sentences a moderator
picks when deciding, per violation category (and APPROVAL_KEY for approvals), each in English
and in other languages. Pure functions, no database access.

A client's statement of reasons is built from them, in the content's language when the reason has
it (else English); a moderator's free text reaches the client only when they ticked "send to the
user" (moderation.transparency.reasons).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from django.conf import settings

from moderation.models import APPROVAL_KEY, ReviewStatus

CANNED_TEXT_MAX = 500
CANNED_PER_KEY_MAX = 50
FALLBACK_LANGUAGE = "en"
_CODE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_KEY = re.compile(r"^[a-z0-9][a-z0-9_/-]{0,63}$")  # a category name (moderation.validation)


def reasons_key(label: str, category: str) -> str:
    """Where a decision's canned reasons are listed: a rejection's under its category, an
    approval's under APPROVAL_KEY."""
    return category if label == ReviewStatus.REJECTED else APPROVAL_KEY


def canned_choices(canned: object, key: str) -> list[dict]:
    """The reasons listed under `key` (none when the policy lists none, or is a draft not yet valid)."""
    listed = canned.get(key, []) if isinstance(canned, dict) else []
    return [entry for entry in listed if isinstance(entry, dict) and isinstance(entry.get("code"), str)
            and isinstance(entry.get("texts"), dict)] if isinstance(listed, list) else []


def canned_text(entry: dict, language: str) -> str:
    """The reason's text in `language`, else in English."""
    texts = entry["texts"]
    text = texts.get(language) if isinstance(language, str) else None
    return text if isinstance(text, str) and text.strip() else texts.get(FALLBACK_LANGUAGE, "")


def canned_texts(canned: object, key: str, codes: Iterable[str], language: str) -> list[str]:
    """The texts of `codes` under `key`, in the order given, in `language` (English fallback).
    A code the policy does not list says nothing (`unknown_codes` refuses it before a decision)."""
    by_code = {entry["code"]: entry for entry in canned_choices(canned, key)}
    return [canned_text(by_code[code], language) for code in codes if code in by_code]


def unknown_codes(canned: object, key: str, codes: Sequence[str]) -> list[str]:
    known = {entry["code"] for entry in canned_choices(canned, key)}
    return [code for code in codes if code not in known]


def validate_canned_reasons(value: object) -> list[str]:
    """Every error in a policy's `canned_reasons` (empty when valid): an object of {category or
    "_approval": [{"code", "texts": {language: text}}]}, codes distinct within a key, an English
    text each, and only languages the detector knows. As for the DSA mapping, a category the
    policy does not have offers nothing (the defaults name the default categories, which a policy
    may leave out), so a key is only checked to be a category's name."""
    if not isinstance(value, dict):
        return ['canned_reasons must be an object of {category: [{"code": ..., "texts": {"en": ...}}]}']
    languages = set(settings.MODERATION_LANGUAGES) | {FALLBACK_LANGUAGE}
    errors = []
    for key, listed in value.items():
        where = f"canned_reasons {key!r}"
        if key != APPROVAL_KEY and not (isinstance(key, str) and _KEY.match(key)):
            errors.append(f"{where}: not a category name (lowercase letters, digits, '_', '-' or '/'), "
                          f"nor {APPROVAL_KEY!r} (the approvals' reasons)")
            continue
        if not isinstance(listed, list) or len(listed) > CANNED_PER_KEY_MAX:
            errors.append(f"{where}: a list of at most {CANNED_PER_KEY_MAX} reasons")
            continue
        seen: set[str] = set()
        for n, entry in enumerate(listed, 1):
            errors += _entry_errors(f"{where} reason {n}", entry, seen, languages)
    return errors


def _entry_errors(where: str, entry: object, seen: set[str], languages: set[str]) -> list[str]:
    if not isinstance(entry, dict) or set(entry) != {"code", "texts"}:
        return [f'{where}: an object with exactly "code" and "texts"']
    code, texts = entry["code"], entry["texts"]
    errors = []
    if not isinstance(code, str) or not _CODE.match(code):
        errors.append(f"{where}: the code is lowercase letters, digits, '_' or '-', at most 64")
    elif code in seen:
        errors.append(f"{where}: code {code!r} is listed twice")
    else:
        seen.add(code)
    if not isinstance(texts, dict) or FALLBACK_LANGUAGE not in texts:
        return [*errors, f'{where}: texts is an object of {{language: text}} with an English ("en") text']
    for language, text in texts.items():
        if language not in languages:
            errors.append(f"{where}: {language!r} is not a language the detector knows: {', '.join(sorted(languages))}")
        elif not isinstance(text, str) or not text.strip() or len(text) > CANNED_TEXT_MAX or "\x00" in text:
            # (PostgreSQL's jsonb holds no NUL character)
            errors.append(f"{where}: the {language} text is required, at most {CANNED_TEXT_MAX} characters, "
                          "with no NUL character")
    return errors
