"""Notices to the affected user (docs/design.md, "Statements of reasons"): the text a client
shows the person whose content was rejected or whose account was actioned, and until when they
may appeal. Pure functions, no database access.

A notice is rendered from the policy's template for the language (`notice_templates`), else the
built-in one. A template is the policy's own text with `{name}` placeholders for PLACEHOLDERS
only; the values put in are categories, a date and a route, never the content. Rendering is one
regular-expression pass: a value is never read again as a template, an unknown `{...}` stays as
written, and no attribute or index is ever looked up (as `str.format` would), so rendering any
text never raises. Publishing refuses a template with an unknown placeholder or a brace without
its pair (`validate_notice_templates`), which catches a typo before a user reads it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.conf import settings

APPEAL_WINDOW_DAYS_DEFAULT = 183  # DSA Art. 20 asks for at least six months
APPEAL_WINDOW_DAYS_MAX = 3650
NOTICE_LANGUAGE_DEFAULT = "en"
TEMPLATE_MAX_CHARS = 2000

PLACEHOLDERS = ("category", "reasons", "policy_url", "appealable_until", "appeal_route")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

# The built-in templates, and the sentence each adds when POLICY_URL is set (a policy's own
# template places {policy_url} itself).
BUILT_IN_TEMPLATES = {
    "en": "We restricted your content or account under our rules. Reasons: {reasons}. "
          "You can appeal until {appealable_until}.",
    "id": "Kami membatasi konten atau akun Anda berdasarkan aturan kami. Alasan: {reasons}. "
          "Anda dapat mengajukan banding hingga {appealable_until}.",
}
BUILT_IN_POLICY_SENTENCE = {
    "en": " Our rules: {policy_url}",
    "id": " Aturan kami: {policy_url}",
}
NO_REASONS = "-"


def appealable_until(decided_at: datetime, policy) -> datetime:
    """The end of the appeal window of a decision or action taken at `decided_at` under `policy`
    (None: a decision without a policy version, which gets the default window)."""
    days = policy.appeal_window_days if policy is not None else APPEAL_WINDOW_DAYS_DEFAULT
    return decided_at + timedelta(days=days)


def render(template: str, values: dict[str, str]) -> str:
    """`template` with each `{name}` of PLACEHOLDERS replaced by its value; everything else as written."""
    def replace(match: re.Match) -> str:
        name = match.group(1)
        return values.get(name, match.group(0)) if name in PLACEHOLDERS else match.group(0)

    return _PLACEHOLDER.sub(replace, template)


def notice(policy, language: str, *, categories: list[str], until: datetime, appeal_route: str,
           candidates: list | tuple = ()) -> dict[str, str]:
    """The notice {"language", "text"}: the policy's template for `language`, else the built-in
    one; for a text whose language was unsure (`language` empty), the likeliest of the detector's
    `candidates` ([code, confidence] pairs, most likely first) that has a template; else English
    (the policy's English template first). "language" says which one the text is in."""
    templates = {**BUILT_IN_TEMPLATES, **_valid_templates(policy)}
    if language not in templates:
        likely = [c[0] for c in candidates if isinstance(c, list | tuple) and c and c[0] in templates]
        language = likely[0] if not language and likely else NOTICE_LANGUAGE_DEFAULT
    template = templates[language]
    policy_url = settings.POLICY_URL
    if policy_url and language in BUILT_IN_TEMPLATES and template == BUILT_IN_TEMPLATES[language]:
        template += BUILT_IN_POLICY_SENTENCE[language]
    values = {
        "category": categories[0] if categories else NO_REASONS,
        "reasons": ", ".join(categories) or NO_REASONS,
        "policy_url": policy_url,
        "appealable_until": until.date().isoformat(),
        "appeal_route": appeal_route,
    }
    return {"language": language, "text": render(template, values)}


def _valid_templates(policy) -> dict[str, str]:
    # A published version was validated; a draft (a dry run) may not be: skip what is not text.
    templates = getattr(policy, "notice_templates", None) or {}
    if not isinstance(templates, dict):
        return {}
    return {code: text for code, text in templates.items() if isinstance(code, str) and isinstance(text, str)}


def validate_notice_templates(value: object) -> list[str]:
    """Errors in a policy's `notice_templates` ({language code: template}; empty when valid)."""
    if not isinstance(value, dict):
        return ["notice_templates must be an object of {language: template}"]
    errors = []
    languages = sorted({*settings.MODERATION_LANGUAGES, *BUILT_IN_TEMPLATES})
    for code, text in value.items():
        if code not in languages:
            errors.append(f"notice_templates: {code!r} is not a language the detector knows: {', '.join(languages)}")
            continue
        if not isinstance(text, str) or not text.strip() or len(text) > TEMPLATE_MAX_CHARS:
            errors.append(f"notice_templates.{code}: a non-empty text of at most {TEMPLATE_MAX_CHARS} characters")
            continue
        unknown = sorted({name for name in _PLACEHOLDER.findall(text) if name not in PLACEHOLDERS})
        if unknown:
            errors.append(f"notice_templates.{code}: unknown placeholders {', '.join('{' + n + '}' for n in unknown)}; "
                          f"use {', '.join('{' + n + '}' for n in PLACEHOLDERS)}")
        stray = stray_brace(text)
        if stray is not None:
            errors.append(f"notice_templates.{code}: the brace at character {stray + 1} has no pair; a placeholder "
                          "is written {name}, and a notice holds no other brace ({{ is no escape here)")
    return errors


def stray_brace(template: str) -> int | None:
    """The index of the first brace that is not part of a `{name}` (a typo such as
    `{appealable_until` or `reasons}`: rendering would show it as written), else None."""
    covered = 0
    for match in _PLACEHOLDER.finditer(template):
        for i in range(covered, match.start()):
            if template[i] in "{}":
                return i
        covered = match.end()
    return next((i for i in range(covered, len(template)) if template[i] in "{}"), None)


def validate_appeal_window(value: object) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= APPEAL_WINDOW_DAYS_MAX:
        return [f"appeal_window_days must be a whole number from 1 to {APPEAL_WINDOW_DAYS_MAX}"]
    return []
