"""The invariant checker's author checks can fail (moderation/invariants.py, invariant 17): each is
shown the violation its guard prevents, written past the services (raw SQL, `queryset.update`,
rows created directly), and reports it; the same author left to the services reports nothing."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F
from django.utils import timezone

from moderation import services
from moderation.invariants import author_violations, violations
from moderation.models import AccountAction, Author, Standing, StandingTransition, Strike
from tests.helpers import SCORE_FOR, result

pytestmark = pytest.mark.django_db


def authored(client, author_id: str, label: str):
    review, _ = services.review_submit(client=client, external_id=uuid.uuid4().hex, kind="text", text="a sentence",
                                       author_id=author_id)
    request = services.review_claim(review_id=review.pk, worker_id="w1")
    services.review_finalize(idempotency_key=request.idempotency_key, result=result(SCORE_FOR[label]),
                             cause="provider_result")
    return review


@pytest.fixture
def suspended(api_client) -> Author:
    """An author the ladder warned (3 points), then suspended (5), through the services."""
    reviews = [authored(api_client, "u1", "rejected") for _ in range(5)]
    author = Author.objects.get(client=api_client, author_id="u1")
    assert author.standing == Standing.SUSPENDED
    assert violations([r.pk for r in reviews]) == [] == author_violations([author.pk])
    return author


def test_the_checker_reads_authors_through_their_reviews(api_client, suspended):
    review = suspended.reviews.first()
    Author.objects.filter(pk=suspended.pk).update(strike_points=F("strike_points") + 1)
    assert f"author {suspended.pk}: 6 strike points kept, 5 in active strikes" in violations([review.pk])


def test_points_that_are_not_the_sum_of_the_active_strikes_are_reported(suspended):
    Strike.objects.filter(pk=Strike.objects.filter(author=suspended).first().pk).update(
        ended_at=timezone.now(), end="lapsed")  # a lapse that did not take its points off
    assert author_violations([suspended.pk]) == [f"author {suspended.pk}: 5 strike points kept, 4 in active strikes"]


def test_a_review_with_two_active_strikes_is_reported(api_client, suspended, django_user_model):
    review = suspended.reviews.first()
    services.review_override(review_id=review.pk, label="rejected", reason="hate", category="hate",
                             moderator=django_user_model.objects.create_user("mia"))
    assert author_violations([suspended.pk]) == []
    with connection.cursor() as cursor:  # the guard, the partial unique index, out for this test's transaction
        cursor.execute("DROP INDEX strike_one_active_per_review")
    Strike.objects.filter(review=review, end="replaced").update(ended_at=None, end="")

    found = author_violations([suspended.pk])
    assert f"{review.pk}: 2 active strikes" in found, found


def test_a_rung_taken_twice_is_reported(suspended):
    """What two workers would write without the author's lock: the suspend rung again, from the
    same strike, the second not seeing the first's standing."""
    first = AccountAction.objects.get(author=suspended, action="suspend")
    again = AccountAction.objects.create(
        author=suspended, action="suspend", cause="strikes", until=first.until, reason=first.reason,
        strike_points=first.strike_points, strikes=first.strikes, previous_standing=Standing.SUSPENDED,
        strike=first.strike)
    StandingTransition.objects.create(author=suspended, from_standing=Standing.SUSPENDED, to_standing=Standing.SUSPENDED,
                                      cause="strikes", actor="system", action=again, strike_points=5)
    trigger = first.strike

    found = author_violations([suspended.pk])
    assert f"action {again.pk} (suspend by strikes, end: none): logged 1 times as taken, 0 as ended, 1 in all; " \
           "did not raise the standing" in found, found
    assert f"strike {trigger.pk}: the ladder took 2 actions on it ({', '.join(sorted([str(first.pk), str(again.pk)]))})" \
           in found, found
    assert f"author {suspended.pk}: suspend {again.pk} in force, but not the author's restriction" in found, found


def test_an_automatic_action_with_no_strike_behind_it_is_reported(api_client):
    author = Author.objects.get(pk=services.author_ensure(api_client, author_id="u2").pk)
    action = AccountAction.objects.create(author=author, action="warn", cause="strikes", reason="r",
                                          previous_standing=Standing.GOOD)
    StandingTransition.objects.create(author=author, from_standing=Standing.GOOD, to_standing=Standing.WARNED,
                                      cause="strikes", actor="system", action=action, strike_points=0)
    Author.objects.filter(pk=author.pk).update(standing=Standing.WARNED)
    assert author_violations([author.pk]) == [f"automatic actions {action.pk}: taken with no strike that reached the rung"]


def test_a_standing_changed_without_its_logged_transition_is_reported(suspended):
    Author.objects.filter(pk=suspended.pk).update(standing=Standing.BANNED)
    found = author_violations([suspended.pk])
    assert f"author {suspended.pk}: banned, but its last logged standing is suspended" in found, found
    assert f"author {suspended.pk}: banned, but its restriction is not the action in force that made it so" in found


def test_a_broken_chain_of_standing_changes_is_reported(suspended):
    action = AccountAction.objects.get(author=suspended, action="warn")
    change = StandingTransition.objects.create(author=suspended, from_standing=Standing.GOOD,
                                               to_standing=Standing.SUSPENDED, cause="moderator", actor="admin",
                                               action=action, strike_points=5)
    found = author_violations([suspended.pk])
    assert f"author {suspended.pk}: transition {change.pk} from good, but the one before went to suspended" in found
    assert any(f"action {action.pk} (warn by strikes, end: none): logged 1 times as taken, 0 as ended, 2 in all" in p
               for p in found), found


def test_restriction_fields_that_do_not_match_the_standing_are_reported(suspended):
    Author.objects.filter(pk=suspended.pk).update(restricted_until=F("restricted_until") + timedelta(days=1))
    assert author_violations([suspended.pk]) == [
        f"author {suspended.pk}: suspended, but its restriction is not the action in force that made it so"]

    Author.objects.filter(pk=suspended.pk).update(restriction=None, restricted_until=None)
    suspension = AccountAction.objects.get(author=suspended, action="suspend")
    assert author_violations([suspended.pk]) == [
        f"author {suspended.pk}: suspended with restriction fields that say otherwise",
        f"author {suspended.pk}: suspend {suspension.pk} in force, but not the author's restriction"]


def test_a_restriction_ended_without_its_logged_change_is_reported(suspended):
    suspension = AccountAction.objects.get(author=suspended, action="suspend")
    AccountAction.objects.filter(pk=suspension.pk).update(ended_at=timezone.now(), end="expired")
    found = author_violations([suspended.pk])
    assert f"action {suspension.pk} (suspend by strikes, end: expired): logged 1 times as taken, 0 as ended, " \
           "1 in all" in found, found


def test_what_the_services_write_leaves_nothing_to_report(api_client, suspended):
    """Expiry, a manual ban, an appeal overturned by a second moderator, a lift, a lapse."""
    users = get_user_model().objects
    mod_a, mod_b = users.create_user("mod-a"), users.create_user("mod-b")
    services.authors_sweep(now=timezone.now() + timedelta(days=8))
    services.author_act(author_pk=suspended.pk, moderator=mod_a, action="ban", reason="again")
    appeal = services.account_appeal_file(client=api_client, author_id="u1", statement="sorry")
    services.account_appeal_resolve(appeal_id=appeal.pk, moderator=mod_b, outcome="overturned", reason="fair")
    services.author_act(author_pk=suspended.pk, moderator=mod_b, action="suspend", days=3, reason="cool off")
    services.author_lift(author_pk=suspended.pk, moderator=mod_a, reason="done")
    services.authors_sweep(now=timezone.now() + timedelta(days=400))
    assert Author.objects.values_list("standing", "strike_points").get(pk=suspended.pk) == (Standing.WARNED, 0)
    assert author_violations([suspended.pk]) == []


AUTHOR_CHECKS = ("_POINTS", "_STRIKES_TWICE", "_ACTIONS_LOGGED", "_TRIGGERS", "_STANDING", "_CHAIN", "_IN_FORCE")


def test_the_author_checks_read_a_few_authors_through_indexes_among_thousands(api_client, suspended):
    """Beside 5,000 other authors with 10 strikes each and a warning for one in five, every author
    check of a few authors is planned as index lookups: it reads what it checks, not the tables
    (at 1M authors and 10M strikes, 50 authors take 0.04 s: docs/race-lab.md's lab checks 50)."""
    from moderation import invariants

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")  # strikes of reviews not seeded
        cursor.execute(
            "INSERT INTO moderation_author (client_id, author_id, standing, strike_points, version, created_at, "
            "updated_at) SELECT %s, 'bulk-' || g, CASE WHEN g %% 5 = 0 THEN 'warned' ELSE 'good' END, 5, 2, now(), "
            "now() FROM generate_series(1, 5000) g", [api_client.pk])
        cursor.execute(
            "INSERT INTO moderation_strike (category, points, created_at, expires_at, ended_at, \"end\", author_id, "
            "decision_id, review_id) SELECT 'harassment', 1, now() - interval '1 day', now(), "
            "CASE WHEN g % 2 = 0 THEN now() END, CASE WHEN g % 2 = 0 THEN 'lapsed' ELSE '' END, a.id, "
            "1000000 + a.id * 10 + g, gen_random_uuid() FROM moderation_author a, generate_series(1, 10) g "
            "WHERE a.author_id LIKE 'bulk-%'")
        cursor.execute(
            "WITH w AS (INSERT INTO moderation_accountaction (id, author_id, action, cause, reason, strike_points, "
            "strikes, previous_standing, created_at, \"end\") SELECT gen_random_uuid(), id, 'warn', 'strikes', 'r', 5, "
            "'[]', 'good', now(), '' FROM moderation_author WHERE standing = 'warned' AND author_id LIKE 'bulk-%' "
            "RETURNING id, author_id) INSERT INTO moderation_standingtransition (author_id, from_standing, "
            "to_standing, cause, actor, actor_id, action_id, strike_points, reason, created_at) "
            "SELECT author_id, 'good', 'warned', 'strikes', 'system', '', id, 5, 'r', now() FROM w")
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")
        cursor.execute("ANALYZE")
        scanned = {}
        for name in AUTHOR_CHECKS:
            cursor.execute("EXPLAIN " + getattr(invariants, name), {"ids": [suspended.pk]})
            plan = "\n".join(row for (row,) in cursor.fetchall())
            scanned[name] = re.findall(r"Seq Scan on (\w+)", plan)
    assert scanned == dict.fromkeys(AUTHOR_CHECKS, []), scanned
