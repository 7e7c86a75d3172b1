"""Authors at scale: the author page, the standing lookup on finalize and the ladder check, timed
with 10k authors (100k strikes) and with 1M authors (10M strikes).

    python -m bench.authors [--sizes 10000,1000000] [--strikes-per-author 10] [--ops 200]
                            [--rounds 3] [--reuse] [--keep] [--database moderation_bench]

Each size has a database of its own (<database>_authors_<size>), seeded in SQL: the authors of one
client, ten strikes each over two years (a 90-day window: about one in eight still active, the rest
lapsed, replaced or overturned, as the lapse job leaves them), the ladder's warnings of those with
three active points, and a few suspensions and bans (past and in force) with their logged
standing changes. The background strikes stand for rejections whose reviews the benchmark does not
seed (their foreign keys are not checked while seeding: the reviews table's growth is
bench.growth's); what grows here is the authors, strikes, actions and standing changes and their
indexes. Each round then seeds its own probe authors, alike at every size, each with ten strikes
on ten real reviews (contents, reviews, rejections), and times:

- page: the queries of `GET /api/v1/authors/{author_id}/` and the admin's author page: the author
  by (client, author_id) with its restriction, its active strikes, its actions with their appeals,
  its review and rejection counts, its newest reviews (review_author_idx);
- admin: the admin's author page itself, rendered for a moderator (Django's test client);
- standing: the standing lookup on finalize: `author_ensure` of an existing author, then
  `authors_lock`, in one transaction;
- ladder: a rejection's `strikes_after_decision_locked` (under the review's lock, committed): one
  strike lapsed as due, the strike written (the points, one off and one on, need no write), the
  ladder read, no rung reached;
- rung: the same for an author whose points reach the warn rung: the action, the logged standing
  change and the `author.actioned` notification are written too;
- scrape: the authors' figures of a /metrics scrape, uncached (`SCRAPES` times a round): it
  counts every strike, so it grows with them, and has no target.

Rounds alternate between the sizes in fresh processes (medians over rounds of `--ops`
operations after a warm-up). Every SELECT, UPDATE and DELETE a path ran is EXPLAINed; a sequential
scan of a table over 10k rows is reported. The databases are dropped at the end unless `--keep`
(`--reuse` measures databases an earlier `--keep` run left).
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import contextmanager

from bench import common, growth
from bench.growth import child, plan_scans, shortened, report, time_calls

PATHS = ("page", "admin", "standing", "ladder", "rung")
SCRAPES = 5  # the authors' figures of an uncached /metrics scrape, timed this many times a round
MODULE = "bench.authors"
WARMUP = 20

# The background: `n` authors of one client, then `per_author * n` strikes in batches (the
# strikes' indexes dropped meanwhile and built after, as a restore does). A review id is a
# version 7 UUID of the strike's time (moderation/db/ids.py), a decision id a negative number no
# real decision has.
_UUID7_AT = """
CREATE OR REPLACE FUNCTION bench_uuid7_at(at timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS $$
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
    FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$
"""

_SEED_AUTHORS = """
INSERT INTO moderation_author (client_id, author_id, standing, strike_points, version, created_at, updated_at)
SELECT %(client)s, 'bg-' || i, 'good', 0, 1, now() - interval '800 days', now() FROM generate_series(1, %(n)s) AS i
"""

_SEED_STRIKES = """
INSERT INTO moderation_strike (author_id, review_id, decision_id, category, points, policy_id, created_at,
    expires_at, ended_at, "end")
SELECT %(first)s::bigint + (j %% %(authors)s::bigint), bench_uuid7_at(at), -j, 'spam', 1, %(policy)s, at, at + interval '90 days',
    CASE WHEN j %% 20 < 2 THEN at + interval '1 day' WHEN at + interval '90 days' <= now() THEN at + interval '90 days' END,
    CASE WHEN j %% 20 = 0 THEN 'overturned' WHEN j %% 20 = 1 THEN 'replaced'
         WHEN at + interval '90 days' <= now() THEN 'lapsed' ELSE '' END
FROM (SELECT j, now() - random() * interval '730 days' AS at FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS j) AS g
"""

# What the ladder and the expiry job would have left: the points kept, a warning for three active
# points, one author in fifty suspended once long ago (expired: warned since), one in a thousand
# banned and one in a thousand suspended now, each change logged.
_SEED_STANDINGS = ("""
UPDATE moderation_author a SET strike_points = s.points
FROM (SELECT author_id, sum(points) AS points FROM moderation_strike WHERE ended_at IS NULL GROUP BY author_id) s
WHERE a.id = s.author_id
""", """
WITH w AS (
    INSERT INTO moderation_accountaction (id, author_id, action, cause, reason, strike_points, strikes,
        previous_standing, created_at, "end", policy_id)
    SELECT gen_random_uuid(), id, 'warn', 'strikes', 'seeded', strike_points, '[]', 'good',
        now() - interval '30 days', '', %(policy)s
    FROM moderation_author WHERE client_id = %(client)s AND strike_points >= 3 AND id %% 50 <> 0
    RETURNING id, author_id, created_at
), s AS (
    INSERT INTO moderation_accountaction (id, author_id, action, cause, until, reason, strike_points, strikes,
        previous_standing, created_at, ended_at, "end", policy_id)
    SELECT gen_random_uuid(), id, 'suspend', 'moderator', now() - interval '193 days', 'seeded', 0, '[]', 'good',
        now() - interval '200 days', now() - interval '193 days', 'expired', %(policy)s
    FROM moderation_author WHERE client_id = %(client)s AND id %% 50 = 0
    RETURNING id, author_id, created_at, ended_at
), t AS (
    INSERT INTO moderation_standingtransition (author_id, action_id, from_standing, to_standing, cause, actor,
        actor_id, strike_points, reason, created_at)
    SELECT author_id, id, 'good', 'warned', 'strikes', 'worker', 'bench', 3, 'seeded', created_at FROM w
    UNION ALL
    SELECT author_id, id, 'good', 'suspended', 'moderator', 'admin', '1', 0, 'seeded', created_at FROM s
    UNION ALL
    SELECT author_id, id, 'suspended', 'warned', 'expired', 'system', 'expiry', 0, 'seeded', ended_at FROM s
)
UPDATE moderation_author SET standing = 'warned', version = 2
WHERE id IN (SELECT author_id FROM w UNION ALL SELECT author_id FROM s)
""", """
WITH r AS (
    INSERT INTO moderation_accountaction (id, author_id, action, cause, until, reason, strike_points, strikes,
        previous_standing, created_at, "end", policy_id)
    SELECT gen_random_uuid(), id, CASE WHEN id %% 1000 = 1 THEN 'ban' ELSE 'suspend' END, 'moderator',
        CASE WHEN id %% 1000 = 2 THEN now() + interval '3 days' END, 'seeded', strike_points, '[]', standing,
        now() - interval '4 days', '', %(policy)s
    FROM moderation_author WHERE client_id = %(client)s AND id %% 1000 IN (1, 2)
    RETURNING id, author_id, action, until, previous_standing, created_at
), t AS (
    INSERT INTO moderation_standingtransition (author_id, action_id, from_standing, to_standing, cause, actor,
        actor_id, strike_points, reason, created_at)
    SELECT author_id, id, previous_standing, CASE WHEN action = 'ban' THEN 'banned' ELSE 'suspended' END,
        'moderator', 'admin', '1', 0, 'seeded', created_at FROM r
)
UPDATE moderation_author a SET standing = CASE WHEN r.action = 'ban' THEN 'banned' ELSE 'suspended' END,
    restriction_id = r.id, restricted_until = r.until, version = a.version + 1
FROM r WHERE a.id = r.author_id
""")

# One round's probe authors, alike at every size: each with ten strikes on ten real rejected
# reviews, of 20 and 40 days ago (active: 2 points), then one every 60 days from 180 days ago
# (lapsed). `due`: the second is of 100 days ago instead, past its window but not lapsed yet (the
# ladder check lapses it first), and the author was warned 150 days ago; otherwise the author is
# in good standing, one point from the warn rung.
_SEED_PROBES = """
WITH a AS (
    INSERT INTO moderation_author (client_id, author_id, standing, strike_points, version, created_at, updated_at)
    SELECT %(client)s, %(tag)s || i, CASE WHEN %(due)s THEN 'warned' ELSE 'good' END, 2, 3, now(), now()
    FROM generate_series(1, %(n)s) AS i
    RETURNING id, author_id
), g AS (
    SELECT a.id AS author, k, gen_random_uuid() AS content_id, at, bench_uuid7_at(at) AS review_id
    FROM a CROSS JOIN generate_series(1, 10) AS k
    CROSS JOIN LATERAL (SELECT now() - CASE WHEN k = 1 THEN 20 WHEN k = 2 AND %(due)s THEN 100 WHEN k = 2 THEN 40
                                            ELSE k * 60 END * interval '1 day' AS at) AS t
), c AS (
    INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
    SELECT content_id, %(client)s, %(tag)s || author || '-' || k, 'text', 'seeded for the benchmark', '', '{}', at
    FROM g
), r AS (
    INSERT INTO moderation_contentreview (id, content_id, client_id, author_id, status, version, worker_id,
        provider_request_id, completed_at, created_at, updated_at)
    SELECT review_id, content_id, %(client)s, author, 'rejected', 3, 'bench', '', at, at, at FROM g
), d AS (
    INSERT INTO moderation_decision (review_id, label, source, categories, category_scores, model, explanation,
        reason, category, policy_id, created_at)
    SELECT review_id, 'rejected', 'moderator', '{}', '{}', '', '', 'seeded', 'spam', %(policy)s, at FROM g
    RETURNING id, review_id
), s AS (
    INSERT INTO moderation_strike (author_id, review_id, decision_id, category, points, policy_id, created_at,
        expires_at, ended_at, "end")
    SELECT author, g.review_id, d.id, 'spam', 1, %(policy)s, at, at + interval '90 days',
        CASE WHEN k > 2 THEN at + interval '90 days' END, CASE WHEN k > 2 THEN 'lapsed' ELSE '' END
    FROM g JOIN d USING (review_id)
), w AS (
    INSERT INTO moderation_accountaction (id, author_id, action, cause, reason, strike_points, strikes,
        previous_standing, created_at, "end", policy_id)
    SELECT gen_random_uuid(), id, 'warn', 'strikes', 'seeded', 3, '[]', 'good', now() - interval '150 days', '',
        %(policy)s
    FROM a WHERE %(due)s
    RETURNING id, author_id, created_at
), t AS (
    INSERT INTO moderation_standingtransition (author_id, action_id, from_standing, to_standing, cause, actor,
        actor_id, strike_points, reason, created_at)
    SELECT author_id, id, 'good', 'warned', 'strikes', 'worker', 'bench', 3, 'seeded', created_at FROM w
)
SELECT id, author_id FROM a ORDER BY id
"""

# A new rejection for each probe author, decided but not yet counted: what the ladder check is
# handed by decide_locked.
_SEED_REJECTIONS = """
WITH g AS (
    SELECT author, gen_random_uuid() AS content_id, bench_uuid7_at(now()) AS review_id
    FROM unnest(%(authors)s::bigint[]) AS author
), c AS (
    INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
    SELECT content_id, %(client)s, %(tag)s || author, 'text', 'seeded for the benchmark', '', '{}', now() FROM g
), r AS (
    INSERT INTO moderation_contentreview (id, content_id, client_id, author_id, status, version, worker_id,
        provider_request_id, completed_at, created_at, updated_at)
    SELECT review_id, content_id, %(client)s, author, 'rejected', 3, 'bench', '', now(), now(), now() FROM g
)
INSERT INTO moderation_decision (review_id, label, source, categories, category_scores, model, explanation, reason,
    category, policy_id, created_at)
SELECT review_id, 'rejected', 'moderator', '{}', '{}', '', '', 'seeded', 'spam', %(policy)s, now() FROM g
RETURNING id
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,1000000", help="authors, one database each")
    parser.add_argument("--strikes-per-author", type=int, default=10)
    parser.add_argument("--ops", type=int, default=200, help="timed operations per path, size and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="measure the databases an earlier --keep run left")
    parser.add_argument("--keep", action="store_true", help="keep the databases (for --reuse)")
    parser.add_argument("--database", default=common.BENCH_DB, help="prefix of the databases")
    parser.add_argument("--prepare", type=int, help=argparse.SUPPRESS)  # internal: seed one size's database
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # internal: one round on one size
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        return _prepare(args.database, args.prepare, args.strikes_per_author)
    if args.measure:
        return _measure_round(args.database, args.measure, args.ops, args.round)
    sizes = [int(x) for x in args.sizes.split(",")]
    try:
        _run(args, sizes)
    finally:
        if not args.keep:
            _drop([_database(args.database, size) for size in sizes])


def _run(args, sizes: list[int]) -> None:
    for size in [] if args.reuse else sizes:
        print(child("--prepare", size, "--strikes-per-author", args.strikes_per_author, "--database", args.database,
                     module=MODULE).strip(), flush=True)
    results: dict[tuple[int, str], list[dict]] = {}
    for round_no in range(args.rounds):
        for size in sizes[round_no % len(sizes):] + sizes[:round_no % len(sizes)]:
            measured = json.loads(child("--measure", size, "--ops", args.ops, "--round", round_no,
                                         "--database", args.database, module=MODULE))
            for path, figures in measured.items():
                results.setdefault((size, path), []).append(figures)
        print(f"round {round_no + 1} of {args.rounds} done", flush=True)
    rows = report(f"Authors as they grow ({args.strikes_per_author} strikes each; in-process; ms per operation; "
                  f"medians of {args.rounds} alternating rounds of {args.ops} operations)",
                  sizes, (*PATHS, "scrape"), results, unit="authors")
    for path in (*PATHS, "scrape"):
        small = next(r for r in rows if r[0] == f"{sizes[0]:,}" and r[1] == path)
        large = next(r for r in rows if r[0] == f"{sizes[-1]:,}" and r[1] == path)
        print(f"{path}: p50 at {sizes[-1]:,} / p50 at {sizes[0]:,} = {large[3] / small[3]:.2f}, "
              f"p95 {large[4] / small[4]:.2f}" + (" (target <= 1.25)" if path in PATHS else ""))


def _database(prefix: str, size: int) -> str:
    return f"{prefix}_authors_{size}"


def _drop(names: list[str]) -> None:
    import psycopg

    with psycopg.connect(common.admin_url(), autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _prepare(prefix: str, size: int, per_author: int) -> None:
    started = time.monotonic()
    name = _database(prefix, size)
    common.setup(name=name)
    from moderation.services import policy_active

    common.sql(_UUID7_AT)
    client_id, _ = common.bench_client("authors")
    policy = policy_active().pk
    common.sql(_SEED_AUTHORS, {"client": client_id, "n": size})
    first = common.sql("SELECT min(id) FROM moderation_author WHERE client_id = %s", [client_id])[0][0]
    timings = {"authors": time.monotonic() - started}
    strikes = size * per_author
    step = time.monotonic()
    with _indexes_dropped("moderation_strike"):
        common.sql("SET session_replication_role = replica")  # the strikes' reviews and decisions are not seeded
        for start in range(1, strikes + 1, 1_000_000):
            common.sql(_SEED_STRIKES, {"first": first, "authors": size, "policy": policy, "start": start,
                                       "stop": min(start + 999_999, strikes)})
        common.sql("SET session_replication_role = origin")
        timings["strikes"] = time.monotonic() - step
        step = time.monotonic()
    timings["strike indexes"] = time.monotonic() - step
    step = time.monotonic()
    for statement in _SEED_STANDINGS:
        common.sql(statement, {"client": client_id, "policy": policy})
    timings["standings"] = time.monotonic() - step
    step = time.monotonic()
    common.sql("VACUUM ANALYZE")
    timings["vacuum"] = time.monotonic() - step
    counts = dict(common.sql("SELECT standing, count(*) FROM moderation_author GROUP BY standing"))
    actions = common.sql("SELECT count(*) FROM moderation_accountaction")[0][0]
    print(f"{name}: {size:,} authors ({', '.join(f'{n:,} {s}' for s, n in sorted(counts.items()))}), "
          f"{strikes:,} strikes, {actions:,} actions seeded in {time.monotonic() - started:.0f} s ("
          + ", ".join(f"{part} {seconds:.0f} s" for part, seconds in timings.items()) + ")")


@contextmanager
def _indexes_dropped(table: str):
    """Drop a table's indexes and unique constraints but its primary key, and build them again
    after (with more memory for the sorts): faster than keeping them through a bulk insert."""
    constraints = common.sql("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                             "WHERE conrelid = %s::regclass AND contype = 'u'", [table])
    indexes = common.sql("SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index "
                         "WHERE indrelid = %s::regclass AND NOT indisprimary AND indexrelid NOT IN "
                         "(SELECT conindid FROM pg_constraint WHERE conrelid = %s::regclass)", [table, table])
    for name, _ in constraints:
        common.sql(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        common.sql(f'DROP INDEX "{name}"')
    yield
    common.sql("SET maintenance_work_mem = '1GB'")
    for name, definition in constraints:
        common.sql(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    for _, definition in indexes:
        common.sql(definition)


def _measure_round(prefix: str, size: int, ops: int, round_no: int) -> None:
    common.setup(name=_database(prefix, size), recreate=False)
    out = {}
    for path, timings, statements in _measure(ops, tag=f"r{round_no}-{common.token()}-"):
        out[path] = {
            "p50": common.percentile(timings, 50), "p95": common.percentile(timings, 95),
            "statements": len(statements),
            "plans": [(shortened(sql), plan_scans(sql, params)) for sql, params in statements if _explainable(sql)],
        }
    print(json.dumps(out))


def _explainable(query: str) -> bool:
    """growth's, and the statements that start with a CTE (`author_ensure`'s upsert)."""
    return growth._explainable(query) or query.lstrip().upper().startswith("WITH")


def probes(client_id: int, policy_id: int, n: int, tag: str, *, due: bool) -> list[tuple[int, str]]:
    """Seed `n` probe authors (see _SEED_PROBES): their (id, author_id)."""
    return [tuple(row) for row in common.sql(_SEED_PROBES, {"client": client_id, "policy": policy_id, "n": n,
                                                            "tag": tag, "due": due})]


def rejections(client_id: int, policy_id: int, authors: list[int], tag: str) -> list[int]:
    """A new rejected review of each author, with its decision: the decisions' ids."""
    return [row[0] for row in common.sql(_SEED_REJECTIONS, {"client": client_id, "policy": policy_id,
                                                            "authors": authors, "tag": tag})]


def author_page(client, author_id: str) -> dict:
    """What `GET /api/v1/authors/{author_id}/` and the admin's author page read of one author."""
    from django.db.models import Count, Q

    from moderation.models import AccountAction, Author, ContentReview, ReviewStatus, Strike

    author = Author.objects.select_related("restriction").get(client=client, author_id=author_id)
    reviews = ContentReview.objects.filter(author=author)
    return {
        "author": author,
        "strikes": list(Strike.objects.filter(author=author, ended_at__isnull=True).order_by("created_at", "id")
                        .values("review_id", "category", "points", "created_at", "expires_at")),
        "actions": list(AccountAction.objects.filter(author=author).select_related("appeal")),
        **reviews.aggregate(review_count=Count("pk"), rejected_count=Count("pk", filter=Q(status=ReviewStatus.REJECTED))),
        "reviews": list(reviews.select_related("content", "decision").order_by("-created_at")[:20]),
    }


def _measure(ops: int, tag: str):
    from django.db import transaction

    from moderation.models import ApiClient, ContentReview, Decision
    from moderation.services import policy_active
    from moderation.services.authors import author_ensure, authors_lock
    from moderation.services.strikes import strikes_after_decision_locked

    client = ApiClient.objects.get(name__startswith="authors-")
    policy = policy_active().pk
    n = ops + WARMUP + 1
    warned = probes(client.pk, policy, n, tag + "w-", due=True)
    good = probes(client.pk, policy, n, tag + "g-", due=False)
    checks = rejections(client.pk, policy, [pk for pk, _ in warned], tag + "check-")
    rungs = rejections(client.pk, policy, [pk for pk, _ in good], tag + "rung-")
    common.sql("ANALYZE moderation_author, moderation_strike, moderation_contentreview, moderation_decision")

    def page(probe):
        found = author_page(client, probe[1])
        assert found["review_count"] == 11 and len(found["strikes"]) == 2, found  # ten, and the rejection below

    yield ("page", *time_calls(page, warned, warmup=WARMUP))

    from django.contrib.auth.models import Group, User
    from django.test import Client

    moderator, _ = User.objects.get_or_create(username="bench-moderator", defaults={"is_staff": True})
    moderator.groups.add(Group.objects.get(name="moderator"))
    http = Client()
    http.force_login(moderator)

    def admin(probe):
        response = http.get(f"/admin/moderation/author/{probe[0]}/change/")
        assert response.status_code == 200 and probe[1].encode() in response.content, response.status_code

    yield ("admin", *time_calls(admin, warned, warmup=WARMUP))

    def standing(probe):
        with transaction.atomic():
            ref = author_ensure(client, author_id=probe[1])
            assert authors_lock([ref.pk])[ref.pk].strike_points == 2

    yield ("standing", *time_calls(standing, warned, warmup=WARMUP))

    def ladder(expected_points):
        def decide(decision):
            with transaction.atomic():
                review = ContentReview.objects.select_for_update(of=("self",)).get(pk=decision.review_id)
                author = authors_lock([review.author_id])[review.author_id]  # after the review's, as a finalize
                strikes_after_decision_locked(review, decision, actor="worker", actor_id="bench", author=author)
            assert (author.strike_points, author.standing) == (expected_points, "warned"), author
        return decide

    decisions = Decision.objects.select_related("policy").order_by("pk")
    yield ("ladder", *time_calls(ladder(2), list(decisions.filter(pk__in=checks)), warmup=WARMUP))
    yield ("rung", *time_calls(ladder(3), list(decisions.filter(pk__in=rungs)), warmup=WARMUP))

    from django.test import override_settings

    from moderation.observability.metrics import PipelineCollector

    collector = PipelineCollector()
    with override_settings(METRICS_CACHE_S=0):  # the strikes counted afresh each time (`_strike_counts`)
        scrape = time_calls(lambda _: list(collector._authors()), list(range(SCRAPES + 2)), warmup=1)
    yield ("scrape", *scrape)

if __name__ == "__main__":
    main()
