"""The moderator's workplace as the tables grow: the review list, the queue page and "review
next", timed at 10k, 100k and 1M existing reviews, with the plan of every statement they run.

    python -m bench.workplace [--sizes 10000,100000,1000000] [--ops 100] [--rounds 3] [--reuse]

Each size has a database of its own (moderation_workplace_<size>), seeded in SQL with decided
reviews as the pipeline leaves them (bench/common.py `seed_decided`), of which one in ten then
waits for a human: its decision becomes `manual_review` with category scores, and the review
joins a named queue with the priority and order key `moderation.review_queues.queue_entry` gives it
under the default weights (reports and appeals with their report count and appeal points).
At 1M reviews, 100k wait in five queues.

Timed, in-process (Django's test client with a moderator's session, production settings):
- list: the review list, newest first (the admin's first page, estimated count);
- list filtered: the list of `manual_review` reviews;
- queue page: the queues' depths and oldest ages, and the first 50 of the low-confidence queue;
- review next: `review_take_next` on the low-confidence queue, each call by another moderator
  of a team, so each call passes over the reviews the earlier calls leased (a busy shift);
- queue page by due time: the same page ordered by due time (review_queue_due_idx);
- deadline page: per queue now (waiting, near, past due) and per week for eight weeks (median,
  p95, breaches) over the decided visits, one in ten of the reviews.

Rounds alternate between the sizes, each in a fresh process, and the figures are medians over
the rounds. Every SELECT/UPDATE each path ran is EXPLAINed: a sequential scan of a table over
10k rows is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from bench import common, growth

PATHS = ("list", "list filtered", "queue page", "review next", "routed queue page", "routed review next",
         "queue page by due time", "deadline page")
# A custom queue that a routing rule fills, open to one group only (docs/workplace.md, "Routing rules
# and queue access"): its page and "review next" on it, by members of that group.
ROUTED = "reports-id"
DB = f"{os.environ['BENCH_DATABASE']}_workplace" if os.environ.get("BENCH_DATABASE") else "moderation_workplace"

# One review in ten waits for a human, spread over the queues as a busy service would see it.
SEED_QUEUED = """
WITH picked AS (
    SELECT r.id, r.decision_id, r.created_at, abs(hashtext(r.id::text || 'q')) AS h,
           0.5 + (abs(hashtext(r.id::text || 's')) % 400) / 1000.0 AS score
    FROM moderation_contentreview r WHERE abs(hashtext(r.id::text)) % 10 = 0
), placed AS (
    SELECT p.*, CASE WHEN h % 20 < 12 THEN 'low_confidence' WHEN h % 20 < 15 THEN 'reports'
                     WHEN h % 20 < 16 THEN 'reports-id'
                     WHEN h % 20 < 18 THEN 'appeals' WHEN h % 20 < 19 THEN 'provider_failures'
                     ELSE 'escalations' END AS queue,
           3 + h % 7 AS reports
    FROM picked p
), weighted AS (
    SELECT pl.*, 100 * score + CASE WHEN queue IN ('reports', 'reports-id') THEN 15 * reports WHEN queue = 'appeals' THEN 40 ELSE 0 END AS points
    FROM placed pl
), d AS (
    UPDATE moderation_decision d SET label = 'manual_review', score = w.score,
        category_scores = jsonb_build_object('harassment', w.score, 'hate', w.score / 4)
    FROM weighted w WHERE d.id = w.decision_id
)
UPDATE moderation_contentreview r SET status = 'manual_review', queue = w.queue, last_queue = w.queue,
    priority = w.points, queued_at = w.created_at,
    queue_order_at = w.created_at - make_interval(secs => w.points / 10 * 3600),
    due_at = w.created_at + CASE w.queue WHEN 'appeals' THEN interval '168 hours' WHEN 'reports' THEN interval '72 hours'
                                         ELSE interval '48 hours' END
FROM weighted w WHERE r.id = w.id
"""
# Deadlines (docs/design.md, "Deadlines"): an open visit for each waiting review, and a decided one
# for one in ten of the others, left 1 to 99 hours after its anchor (a 24-hour target: some late),
# spread over the last eight weeks.
SEED_VISITS = """
INSERT INTO moderation_queuevisit (review_id, queue, cause, notice_kind, anchor_at, due_at, left_at, decided)
SELECT id, queue, '', '', queued_at, due_at, NULL, false FROM moderation_contentreview WHERE status = 'manual_review'
UNION ALL
SELECT id, 'notices', 'notice', '', a, a + interval '24 hours', a + make_interval(hours => 1 + h % 99), true
FROM (SELECT id, abs(hashtext(id::text || 'v')) AS h,
             now() - make_interval(hours => abs(hashtext(id::text || 'a')) % (8 * 7 * 24)) - interval '100 hours' AS a
      FROM moderation_contentreview WHERE status <> 'manual_review' AND abs(hashtext(id::text)) % 10 = 1) v
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="existing reviews, one database each")
    parser.add_argument("--ops", type=int, default=100, help="timed operations per path, size and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prepare", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reuse", action="store_true", help="measure the databases an earlier run seeded")
    args = parser.parse_args()
    if args.prepare:
        return _prepare(args.prepare)
    if args.measure:
        return _measure(args.measure, args.ops)
    sizes = [int(x) for x in args.sizes.split(",")]
    for size in [] if args.reuse else sizes:
        print(_child("--prepare", size).strip(), flush=True)
    results: dict[tuple[int, str], list[dict]] = {}
    for round_no in range(args.rounds):
        for size in sizes[round_no % len(sizes):] + sizes[:round_no % len(sizes)]:
            for path, figures in json.loads(_child("--measure", size, "--ops", args.ops)).items():
                results.setdefault((size, path), []).append(figures)
        print(f"round {round_no + 1} of {args.rounds} done", flush=True)
    growth.report(f"The moderator's workplace as the tables grow (in-process; ms; medians of {args.rounds} "
                  f"alternating rounds of {args.ops} operations)", sizes, PATHS, results)


def _child(*args) -> str:
    return growth.child(*args, module="bench.workplace", timeout=7200)


def _prepare(size: int) -> None:
    started = time.monotonic()
    common.setup(name=f"{DB}_{size}")
    client_id, _ = common.bench_client("workplace")
    common.seed_decided(client_id, size, tag="w-")
    common.sql(SEED_QUEUED)
    common.sql(SEED_VISITS)
    common.sql("VACUUM ANALYZE")
    waiting = common.sql("SELECT count(*) FROM moderation_contentreview WHERE status = 'manual_review'")[0][0]
    print(f"{DB}_{size}: {size:,} reviews seeded ({waiting:,} waiting for a human) in "
          f"{time.monotonic() - started:.0f} s")


def _measure(size: int, ops: int) -> None:
    common.setup(name=f"{DB}_{size}", recreate=False)
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from moderation.models import ContentReview, ReviewQueue
    from moderation.services import review_take_next

    warmup = 10
    group = Group.objects.get(name="moderator")
    moderator, _ = User.objects.get_or_create(username="bench-moderator", defaults={"is_staff": True})
    moderator.groups.add(group)
    moderator.groups.add(Group.objects.get(name="team_lead"))  # the deadline page's figures
    # "Review next" by a team: each call a moderator who holds nothing yet takes the most urgent
    # review nobody holds, past the ones the earlier calls leased (as on a busy shift).
    ContentReview.objects.filter(leased_to__isnull=False).update(leased_to=None, lease_expires_at=None)
    team = [User.objects.get_or_create(username=f"bench-moderator-{i}")[0] for i in range(ops + warmup + 1)]
    # The routed queue: its rule in the active policy, the queue open to one group, the team in it.
    from moderation import services
    from moderation.models import ModerationQueue

    routed, _ = ModerationQueue.objects.get_or_create(slug=ROUTED, defaults={"name": "Indonesian reports"})
    members, _ = Group.objects.get_or_create(name="bench-id-team")
    routed.groups.set([members])
    for user in [moderator, *team]:
        user.groups.add(members)
    if not services.policy_active().routing_rules:
        services.policy_publish_change(lambda active: {"routing_rules": [
            {"name": "Indonesian reports", "queue": ROUTED, "when": {"language": ["id"], "report_kind": ["user"]}}]},
            notes="bench: a routed queue")
    routed_team = [User.objects.get_or_create(username=f"bench-routed-{i}")[0] for i in range(ops + warmup + 1)]
    for user in routed_team:
        user.groups.add(members)
    http = Client()
    http.force_login(moderator)
    base = "/admin/moderation/contentreview/"

    def page(url):
        def get(_):
            response = http.get(url)
            assert response.status_code == 200, (url, response.status_code)
        return get

    def take_next(member):
        assert review_take_next(moderator=member, queue=ReviewQueue.LOW_CONFIDENCE) is not None

    def take_routed(member):
        assert review_take_next(moderator=member, queue=ROUTED) is not None

    paths = {"list": (page(base), team), "list filtered": (page(base + "?status__exact=manual_review"), team),
             "queue page": (page(base + "queues/?queue=low_confidence"), team), "review next": (take_next, team),
             "routed queue page": (page(base + f"queues/?queue={ROUTED}"), team),
             "routed review next": (take_routed, routed_team),
             "queue page by due time": (page(base + "queues/?queue=low_confidence&order=due"), team),
             "deadline page": (page(base + "deadlines/"), team)}
    out = {}
    for path, (func, items) in paths.items():
        timings, statements = growth.time_calls(func, items, warmup=warmup)
        timed_statements = [s for s in statements if "moderation_contentreview" in s[0]]
        out[path] = {
            "p50": common.percentile(timings, 50), "p95": common.percentile(timings, 95),
            "statements": len(statements),
            "plans": [(growth.shortened(sql), growth.plan_scans(sql, params)) for sql, params in timed_statements
                      if growth._explainable(sql)],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
