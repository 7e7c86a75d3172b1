"""A backtest of a draft over 10,000 reviews that moderators decided, with the local model
(issue acceptance: within 2 minutes; docs/quality.md, "Backtests").

    python -m bench.backtest [--reviews 10000]

One database (moderation_backtest), seeded in SQL as the pipeline leaves decided reviews
(bench/common.py `seed_decided`), each given a text of the held-out split (training/heldout: the
model never trained on them) and a moderator's decision in force that follows its label. A draft
with lower review thresholds is made from the active version, then backtested as the command
does it (start, then slices until done), twice: the first run asks the model for every text,
the second reads every answer kept by the first. Printed: the time of each, examples per second,
the answers kept and asked, and the figures' last line.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from bench import common

DB = "moderation_backtest"
HELD_OUT = Path(__file__).resolve().parent.parent / "training" / "heldout"


def held_out_texts() -> list[tuple[str, bool, str]]:
    rows = []
    for name in ("en.csv", "id.csv", "other-languages.csv"):
        with open(HELD_OUT / name, encoding="utf-8", newline="") as handle:
            rows += [(r["text"], r["label"] == "1", r["language"]) for r in csv.DictReader(handle)]
    return rows


def seed(reviews: int) -> None:
    from django.contrib.auth import get_user_model

    client_id, _ = common.bench_client()
    common.seed_decided(client_id, reviews, "bt")
    moderator = get_user_model().objects.create_user("bench-moderator", password="x", is_staff=True)
    texts = held_out_texts()
    values = [(f"bt0-{i + 1}", *texts[i % len(texts)]) for i in range(reviews)]
    # Each review's text, language and a moderator's decision in force that follows the label.
    for start in range(0, len(values), 5000):
        chunk = values[start:start + 5000]
        common.sql(
            "UPDATE moderation_content c SET text = v.text, language = v.language FROM (VALUES "
            + ", ".join(["(%s, %s, %s)"] * len(chunk)) + ") AS v (external_id, text, language) "
            "WHERE c.external_id = v.external_id",
            [x for external_id, text, _, language in chunk for x in (external_id, text, language)],
        )
        common.sql(
            "WITH v (external_id, label) AS (VALUES " + ", ".join(["(%s, %s)"] * len(chunk)) + "), "
            "d AS (INSERT INTO moderation_decision (review_id, label, source, categories, category_scores, model, "
            "explanation, reason, category, moderator_id, rule_matches, reason_codes, parts, created_at) "
            "SELECT r.id, v.label, 'moderator', '{}', '{}', '', '', 'bench', "
            "CASE WHEN v.label = 'rejected' THEN 'insult' ELSE '' END, %s, '[]', '[]', '{}', now() "
            "FROM v JOIN moderation_content c ON c.external_id = v.external_id "
            "JOIN moderation_contentreview r ON r.content_id = c.id RETURNING id, review_id, label) "
            "UPDATE moderation_contentreview r SET decision_id = d.id, status = d.label FROM d WHERE r.id = d.review_id",
            [x for external_id, _, label, _ in chunk for x in (external_id, "rejected" if label else "approved")]
            + [moderator.pk],
        )
    common.analyze()


def run(candidate) -> tuple[float, object]:
    from moderation.quality import backtests

    started = time.monotonic()
    backtest = backtests.backtest_start(candidate=candidate, provider_name="local", enqueue=False)
    while True:
        backtests.backtest_run(backtest_id=backtest.pk, deadline=time.monotonic() + 20, enqueue_rest=False)
        backtest.refresh_from_db()
        if backtest.status not in ("queued", "running"):
            return time.monotonic() - started, backtest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=10_000)
    args = parser.parse_args()
    common.setup(name=DB, env={"MODERATION_PROVIDER": "local"})
    seed(args.reviews)
    from moderation import services
    from moderation.management.commands.backtest_policy import summary

    active = services.policy_active()
    thresholds = {name: {"review": max(0.0, t["review"] - 0.05), "reject": t["reject"]}
                  for name, t in active.category_thresholds.items()}
    draft = services.policy_publish(**{**services.policy_fields(active), "category_thresholds": thresholds},
                                    notes="bench: review thresholds 0.05 lower", draft=True)
    rows = []
    for name in ("first run (asks the model)", "second run (kept answers)"):
        seconds, backtest = run(draft)
        rows.append([name, backtest.total, f"{seconds:.1f}", f"{backtest.total / seconds:.0f}", backtest.cached,
                     f"{backtest.provider_seconds:.1f}", backtest.changed, backtest.status])
        print(summary(backtest, seconds=seconds))
    print(common.table(["run", "examples", "seconds", "examples/s", "answers kept", "provider s", "changed", "status"],
                       rows))
    print("target: 10,000 human-decided reviews within 120 s with the local model")


if __name__ == "__main__":
    main()
