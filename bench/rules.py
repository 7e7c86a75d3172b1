"""Rule matching on a hostile text: 100 KB dense with matches and allow matches, per text.

    python -m bench.rules [--chars 100000] [--runs 20] [--no-old]

No database: `moderation.text.rules.rule_matches` is pure. The policy has a reject rule "kill", an
allow rule "kill the process" and a pattern (`re:https?://\\S+`, manual review). Prints, per text,
the median and max milliseconds of:

- rules: `rule_matches` (both matching passes, the patterns, language scope, allow matches,
  the match budget), the path every review takes;
- scan: the same text under a policy whose only term never matches: what reading the text
  costs at all, the floor under `rules`;
- old: the allow step as it was before issue 22 (every match against every allow match), on
  the same matches, timed once (seconds; `--no-old` skips it).

Texts: allow-dense (a "kill" inside an allowed "kill the process", a bare "kill" and a link every
64 characters: within the match budget), and denser than the budget ("kill the process kill"
repeated: some 13,600 matches in the words pass, past `MATCH_BUDGET`). Figures are CPU time of
the calling thread (the machine is shared; the wall median is printed beside). The goal is under
50 ms per 100 KB text for `rules`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

GOAL_MS = 50.0
TEXTS = {
    "allow-dense": "please kill the process and kill him, see http://spam.example/x ",
    "denser than the budget": "kill the process kill ",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-old", action="store_true", help="skip the old allow step (seconds per text)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from moderation.text.language import Detection
    from moderation.models import ModerationPolicy
    from moderation.text.rules import MATCH_BUDGET, rule_matches

    def policy(pk, term_lists):
        return ModerationPolicy(pk=pk, version=1, reject_threshold=0.9, review_threshold=0.5, term_lists=term_lists)

    rules = policy(-1, [
        {"category": "violence", "action": "reject", "language": "", "terms": ["kill"]},
        {"category": "violence", "action": "allow", "language": "", "terms": ["kill the process"]},
        {"category": "spam", "action": "manual_review", "language": "", "terms": ["re:https?://\\S+"]},
    ])
    floor = policy(-2, [{"category": "violence", "action": "reject", "language": "", "terms": ["zzqxv"]}])
    detection = Detection("en", (("en", 0.9),))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; MATCH_BUDGET {MATCH_BUDGET} per pass; "
          f"figures are CPU ms per {args.chars:,}-character text")
    print(f"{'text':<26}{'path':<7}{'median ms':>10}{'max ms':>9}{'wall median':>12}{'matches':>9}{'kept':>7}")
    for kind, unit in TEXTS.items():
        text = (unit * (args.chars // len(unit) + 1))[: args.chars]
        kept = rule_matches(rules, text, detection)
        found = len(_all_matches(rules, text, detection))
        for path, subject in (("rules", rules), ("scan", floor)):
            samples, wall = _time(lambda p=subject, t=text: rule_matches(p, t, detection), args.runs)
            print(f"{kind:<26}{path:<7}{statistics.median(samples):>10.2f}{max(samples):>9.2f}{wall:>12.2f}"
                  f"{found if path == 'rules' else 0:>9}{len(kept) if path == 'rules' else 0:>7}")
        if not args.no_old:
            matches = _all_matches(rules, text, detection)
            samples, wall = _time(lambda m=matches: _old_allow_step(m), 1)
            print(f"{kind:<26}{'old':<7}{samples[0]:>10.2f}{samples[0]:>9.2f}{wall:>12.2f}{found:>9}")
        samples = _time(lambda t=text: rule_matches(rules, t, detection), args.runs)[0]
        median, p95 = statistics.median(samples), statistics.quantiles(samples, n=20)[-1]
        print(f"  -> rules median {median:.1f} ms: {'within' if median < GOAL_MS else 'OVER'} the {GOAL_MS:g} ms goal "
              f"(p95 {p95:.1f} ms, a full garbage collection of the process when above it)")


def _all_matches(policy, text, detection):
    """Every match of the text, no budget: what the old allow step was given."""
    from moderation.text.rules import RuleMatch, compiled, rule_name

    rules = compiled(policy)
    out = []
    for found in rules.find(text):
        rule = rules.rules[found.rule]
        if rule["language"] and detection.sure and not detection.leads(rule["language"]):
            continue
        out.append(RuleMatch(rule_name(rule), rule["category"], rule["action"], rule["language"], found.term,
                             text[found.start:found.end], found.start, found.end))
    return out


def _old_allow_step(matches):
    """moderation.text.rules.rule_matches's allow step before issue 22, verbatim: quadratic."""
    from moderation.models import RuleAction

    allowed = [m for m in matches if m.action == RuleAction.ALLOW]
    kept = [m for m in matches if m.action != RuleAction.ALLOW
            and not any(a.start <= m.start and m.end <= a.end for a in allowed)]
    used = [a for a in allowed
            if any(a.start <= m.start and m.end <= a.end for m in matches if m.action != RuleAction.ALLOW)]
    return sorted(kept + used, key=lambda m: (m.start, m.end, m.rule))


def _time(call, runs: int) -> tuple[list[float], float]:
    """CPU milliseconds of the calling thread per run, and the wall median (see bench/terms.py)."""
    call()  # warm caches (the compiled policy, fold's cache)
    samples, walls = [], []
    for _ in range(runs):
        started, wall = time.thread_time(), time.perf_counter()
        call()
        samples.append((time.thread_time() - started) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return samples, statistics.median(walls)


if __name__ == "__main__":
    main()
