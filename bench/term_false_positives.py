"""False positives of the default term lists on benign text in many scripts.

    .venv/bin/python -m bench.term_false_positives [--data bench/data/benign_texts.tsv] [--languages en,id,ms]

No database: the rules path is pure. The default policy's rules (moderation.text.default_terms,
for the configured languages or `--languages`) are matched against each benign text (written for
this project: bench/data/benign_texts.tsv) twice: as production reads it, with the language the
detector finds (a rule scoped to another language is skipped when detection is sure), and as if
every detection were unsure (every language's rules apply: the worst case). A text counts as a
false positive when any reject or manual_review rule matches it. Prints each false positive, the
counts per language, and the rates; the target is at most 2% (docs/policy-rules.md, "Default term
lists").
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "benign_texts.tsv"


def read_texts(path: Path) -> list[tuple[str, str]]:
    """(language, text) of each line of a `language<TAB>text` file; `#` lines are comments."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        language, sep, text = line.partition("\t")
        if not sep or not text.strip():
            raise SystemExit(f"{path}:{number}: expected language<TAB>text")
        rows.append((language, text))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--languages", help="comma-separated codes (default: MODERATION_LANGUAGES)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from moderation.models import ModerationPolicy, RuleAction
    from moderation.services.policy import DEFAULT_POLICY
    from moderation.text.default_terms import default_term_lists
    from moderation.text.language import Detection, configured_languages, detect
    from moderation.text.rules import rule_matches

    languages = tuple(args.languages.split(",")) if args.languages else configured_languages()
    policy = ModerationPolicy(version=1, **{**DEFAULT_POLICY, "term_lists": default_term_lists(languages)})
    rows = read_texts(args.data)
    unsure = Detection("", ())
    found = {"detected": Counter(), "unsure": Counter()}
    per_language = Counter(language for language, _ in rows)
    for language, text in rows:
        for mode, detection in (("detected", detect(text)), ("unsure", unsure)):
            matches = [m for m in rule_matches(policy, text, detection) if m.action != RuleAction.ALLOW]
            if matches:
                found[mode][language] += 1
                terms = ", ".join(sorted({f"{m.rule} {m.term!r}" for m in matches}))
                print(f"false positive ({mode}) [{language}] {text!r}: {terms}")
    total = len(rows)
    print(f"\n{total} benign texts, {len(per_language)} languages; default lists for: {', '.join(languages)}")
    print("language  texts  fp(detected)  fp(unsure)")
    for language, count in sorted(per_language.items()):
        print(f"{language:<8} {count:>6} {found['detected'][language]:>13} {found['unsure'][language]:>11}")
    detected, worst = sum(found["detected"].values()), sum(found["unsure"].values())
    print(f"term_false_positives: {total} texts, false positives {detected} ({100 * detected / total:.1f}%) "
          f"as detected, {worst} ({100 * worst / total:.1f}%) with every language's rules")


if __name__ == "__main__":
    main()
