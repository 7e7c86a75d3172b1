"""Long texts judged whole and by parts: errors on the labelled set, and the cost in throughput.

    .venv/bin/python -m bench.parts_eval [--repeat 3] [--long 200]

No database. The labelled set (bench/data/parts_labelled.jsonl: 221 texts written and labelled by
hand, 111 English and 110 Indonesian, short ones and long ones, many long ones with one abusive
sentence in kind words, and long benign ones, some with mild swearing or words that look bad
out of context) is scored once by the local model as the pipeline calls it (the whole text and
its parts, `LocalProvider.moderate_many` in batches of 16); each policy part rule then judges
the same scores with the default policy's thresholds (review 0.5, reject 0.9). A text counts as
**flagged** when the verdict is not "approved" (a human looks at it, or it is rejected).

A text is labelled toxic when a human should see it: it holds an insult, a slur, a threat or a
profane attack, quoted or not. Indonesian abuse is mostly words the English model does not know;
the default policy does not use the model's score for a text surely in Indonesian
(`model_languages`, docs/policy-rules.md): rules and a human judge it. Its rows say what the
model alone would do.

Throughput: texts per second (CPU time of this thread) of the model over the whole texts only
(what the provider did before) and of the provider judging them by parts (splitting, the whole
and every part in one model call), over the labelled set and over 5 kB texts.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "parts_labelled.jsonl"
LONG_AT = 250  # characters: a "long" text in the table
BATCH = 16
GROUPS = (
    ("all", lambda r: True),
    ("en", lambda r: r["language"] == "en"),
    ("en, long", lambda r: r["language"] == "en" and len(r["text"]) >= LONG_AT),
    ("en, short", lambda r: r["language"] == "en" and len(r["text"]) < LONG_AT),
    ("id", lambda r: r["language"] == "id"),
    ("id, long", lambda r: r["language"] == "id" and len(r["text"]) >= LONG_AT),
)


def load() -> list[dict]:
    with DATA.open(encoding="utf-8") as rows:
        return [json.loads(line) for line in rows if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="passes over the labelled set for the throughput")
    parser.add_argument("--long", type=int, default=200, help="5 kB texts for the throughput")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from moderation.models import ModerationPolicy, PartRule
    from moderation.providers.local import LocalProvider
    from moderation.services.policy import DEFAULT_POLICY
    from moderation.verdicts import evaluate

    rows = load()
    provider = LocalProvider()
    provider.warm_up()
    results = judged(provider, [row["text"] for row in rows])
    print(f"{len(rows)} labelled texts ({sum(r['language'] == 'en' for r in rows)} en, "
          f"{sum(r['language'] == 'id' for r in rows)} id; {sum(r['toxic'] for r in rows)} toxic); "
          f"thresholds review {DEFAULT_POLICY['review_threshold']}, reject {DEFAULT_POLICY['reject_threshold']}\n")
    print("| texts | rule | n | toxic | FP | FN | precision | recall | rejected |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    labels = {}
    for rule in (PartRule.WHOLE, PartRule.MAX, PartRule.TOP2_MEAN, PartRule.TOP3_MEAN):
        policy = ModerationPolicy(version=1, part_rule=rule, **{k: v for k, v in DEFAULT_POLICY.items() if k != "notes"})
        labels[rule] = [evaluate(policy, result).label for result in results]
        for name, member in GROUPS:
            print(table_row(name, rule, [(row, label) for row, label in zip(rows, labels[rule], strict=True) if member(row)]))
    print("\nby parts (max), the English texts judged wrongly:")
    for row, label in zip(rows, labels[PartRule.MAX], strict=True):
        if row["language"] == "en" and (label != "approved") != row["toxic"]:
            print(f"  {row['id']} {'FN' if row['toxic'] else 'FP'} {label}: {row['text'][:90]}")
    print()
    throughput(provider, [row["text"] for row in rows] * args.repeat, "labelled set")
    throughput(provider, [long_text(i) for i in range(args.long)], "5 kB texts")


def judged(provider, texts: list[str]):
    from moderation.providers import ModerationInput

    results = []
    for at in range(0, len(texts), BATCH):
        inputs = [ModerationInput(idempotency_key=str(at + i), content_type="text", text=t)
                  for i, t in enumerate(texts[at:at + BATCH])]
        results.extend(provider.moderate_many(inputs))
    return results


def table_row(name: str, rule: str, chosen: list[tuple[dict, str]]) -> str:
    flagged = [(row["toxic"], label != "approved", label) for row, label in chosen]
    tp = sum(t and f for t, f, _ in flagged)
    fp = sum(f and not t for t, f, _ in flagged)
    fn = sum(t and not f for t, f, _ in flagged)
    toxic = sum(t for t, _, _ in flagged)
    precision = f"{tp / (tp + fp):.2f}" if tp + fp else "—"
    recall = f"{tp / toxic:.2f}" if toxic else "—"
    rejected = sum(label == "rejected" for _, _, label in flagged)
    return f"| {name} | {rule} | {len(chosen)} | {toxic} | {fp} | {fn} | {precision} | {recall} | {rejected} |"


def long_text(i: int) -> str:
    """A 5 kB text (the issue's example): kind sentences with one insult in the middle."""
    kind = (f"Our garden group number {i} meets every Saturday near the old library. We share seeds, tools and "
            "advice about compost, and the children water the tomatoes while the adults fix the fence. ")
    return kind * 14 + "Honestly the new treasurer is a fucking idiot and a worthless piece of shit. " + kind * 14


def throughput(provider, texts: list[str], what: str) -> None:
    from moderation.providers.local import predictor

    predict = predictor()
    began = time.thread_time()
    for at in range(0, len(texts), BATCH):
        predict(texts[at:at + BATCH])
    whole = len(texts) / (time.thread_time() - began)
    began = time.thread_time()
    judged(provider, texts)
    parts = len(texts) / (time.thread_time() - began)
    print(f"throughput, {what} ({len(texts)} texts, {sum(map(len, texts)) // len(texts)} characters on average): "
          f"whole {whole:.0f} texts/s, by parts {parts:.0f} texts/s ({parts / whole:.2f}x)")


if __name__ == "__main__":
    main()
