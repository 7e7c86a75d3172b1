"""The canned reasons a new installation starts with (moderation/data/canned_reasons.json): per
violation category, and under APPROVAL_KEY for approvals, a list of {code, texts: {language:
text}} in English and Indonesian (docs/workplace.md, "Canned reasons")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CANNED_REASONS_PATH = Path(__file__).parent.parent / "data" / "canned_reasons.json"
# The key of the approvals' reasons: no category can be named so (a category starts with a
# letter or a digit: moderation.validation).
APPROVAL_KEY = "_approval"


def default_canned_reasons() -> dict[str, list[dict[str, Any]]]:
    return json.loads(CANNED_REASONS_PATH.read_text(encoding="utf-8"))
