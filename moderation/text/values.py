"""The text in a content's metadata: every string of a JSON value, which the rules, the models and
erasure's search for quotes read beside the content's text (docs/design.md, "Data model")."""

from __future__ import annotations

from typing import Any


def text_values(value: Any) -> list[str]:
    """Every string in a JSON value (the text of metadata), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in text_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in text_values(v)]
    return []
