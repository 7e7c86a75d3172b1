"""The model's categories and what one labelled row is.

The categories are the policy's own names (moderation.models.DEFAULT_CATEGORIES, the DSA mapping
and the canned reasons name them) and the public contract's (insult, threat, hate, sexual,
profanity): a score the local model reports is a category a policy already acts on and a
statement of reasons already names. Models trained before insult and threat were named so called
them harassment and violence (moderation.verdicts.LEGACY_CATEGORY_NAMES).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

# an identity attack is `hate`.
CATEGORIES = ("insult", "threat", "hate", "sexual", "profanity")

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Row:
    """One labelled text.

    `positive`: the categories it belongs to (none: a benign text). `unknown`: the categories its
    source does not tell about (a tweet marked "offensive" may or may not insult someone): the
    model of such a category does not train on the row. Every other category is a negative.
    `group`: rows of one group are split together (a template's rows, a text's duplicates), so a
    held-out figure never rests on a sibling of a training row."""

    text: str
    language: str
    source: str
    positive: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    group: str = ""
    functionality: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> int:
        return int(bool(self.positive))

    def target(self, category: str) -> int | None:
        """1, 0, or None when the source does not tell."""
        if category in self.positive:
            return 1
        if category in self.unknown:
            return None
        return 0


def write_rows(path: Path, rows: list[Row]) -> None:
    """Rows as gzipped JSON lines, byte for byte the same for the same rows (mtime 0)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as out:
        for row in rows:
            record = {k: v for k, v in asdict(row).items() if v not in ((), "", {})}
            out.write((json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode())


def read_rows(path: Path) -> list[Row]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            record["positive"] = tuple(record.get("positive", ()))
            record["unknown"] = tuple(record.get("unknown", ()))
            rows.append(Row(**record))
    return rows
