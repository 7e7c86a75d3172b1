"""The benchmarks measure what they say: the naive variant really drops the guards, the seeded
rows are what the pipeline itself writes, and the duplicate deliveries are real duplicates."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from django.db import transaction
from django_fsm import ConcurrentTransition
from django_q.models import OrmQ

from bench import checkout, common
from bench.ingest import signed_requests
from bench.naive import unguard
from moderation.invariants import violations
from moderation.models import ContentReview, ModerationRequest, ReviewStatus
from tests.helpers import active_points


@pytest.fixture
def client_id(api_client):
    return api_client.pk


def _stale_save(review_id):
    """Save a review read before another writer moved it on."""
    stale = ContentReview.objects.get(pk=review_id)
    fresh = ContentReview.objects.get(pk=review_id)
    fresh.apply_result(ReviewStatus.APPROVED)
    fresh.save()
    stale.escalate()
    stale.save()


@pytest.mark.django_db(transaction=True)
def test_the_naive_variant_drops_row_locks_and_conditional_updates(client_id, monkeypatch):
    (review_id, _), (other_id, _) = common.seed_processing(client_id, 2, "naive-")
    with transaction.atomic():
        assert "FOR UPDATE" in str(ContentReview.objects.select_for_update().filter(pk=review_id).query)
    with pytest.raises(ConcurrentTransition):
        _stale_save(review_id)

    unguard(monkeypatch.setattr)

    assert "FOR UPDATE" not in str(ContentReview.objects.select_for_update(skip_locked=True).filter(pk=other_id).query)
    with transaction.atomic():  # the broker's own locks stay: they are not what is measured
        assert "FOR UPDATE" in str(OrmQ.objects.select_for_update(skip_locked=True).all().query)
    _stale_save(other_id)  # the stale write wins: the lost update the guards exist to prevent
    assert ContentReview.objects.get(pk=other_id).status == ReviewStatus.MANUAL_REVIEW


@pytest.mark.django_db
def test_seeded_rows_are_what_the_pipeline_writes(client_id):
    common.seed_decided(client_id, 40, "seed-", batch=15)
    decided = list(ContentReview.objects.filter(content__external_id__startswith="seed-").values_list("pk", flat=True))
    processing = [r for r, _ in common.seed_processing(client_id, 10, "proc-")]
    pending = common.seed_pending(client_id, 10, "pend-")

    assert len(decided) == 40
    assert violations([*decided, *processing, *pending]) == []
    assert ContentReview.objects.filter(pk__in=decided, status=ReviewStatus.APPROVED, decision__isnull=False).count() == 40
    assert ModerationRequest.objects.filter(review_id__in=processing, status="sent").count() == 10


@pytest.mark.django_db
def test_duplicate_deliveries_repeat_an_earlier_request_byte_for_byte(client_id):
    reviews = common.seed_processing(client_id, 400, "dup-")
    requests, named = signed_requests(reviews, 500, 0.3, random.Random(3), tag="t")

    distinct = set(requests)
    assert len(requests) == 500
    assert len(named) == len(distinct) and set(named) <= {r for r, _ in reviews}
    assert 0.25 < 1 - len(distinct) / len(requests) < 0.35
    assert all(request.startswith(b"POST /api/v1/callbacks/webhook/ ") for request in distinct)


def test_percentile_is_the_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert common.percentile(values, 50) == 50.0
    assert common.percentile(values, 99) == 99.0
    assert common.percentile(values, 100) == 100.0
    assert common.percentile([7.0], 99) == 7.0


def test_the_rules_benchmark_runs_and_prints_each_path(monkeypatch, capsys):
    from bench import rules as bench_rules

    monkeypatch.setattr("sys.argv", ["bench.rules", "--chars", "3000", "--runs", "3"])
    bench_rules.main()
    out = capsys.readouterr().out
    for kind in bench_rules.TEXTS:
        assert all(f"{kind:<26}{path:<7}" in out for path in ("rules", "scan", "old")), out
    assert out.count(" ms goal (p95 ") == len(bench_rules.TEXTS)


@pytest.mark.django_db
def test_the_authors_benchmark_runs_each_path_on_probe_authors_that_stay_consistent(monkeypatch):
    from bench import authors as bench_authors
    from moderation.models import AccountAction, Author

    monkeypatch.setattr(bench_authors, "WARMUP", 2)
    common.sql(bench_authors._UUID7_AT)
    common.bench_client("authors")

    measured = {path: (timings, statements) for path, timings, statements in bench_authors._measure(3, tag="t-")}

    assert list(measured) == [*bench_authors.PATHS, "scrape"]
    assert all(len(timings) == 3 for path, (timings, _) in measured.items() if path != "scrape")
    assert len(measured["scrape"][0]) == bench_authors.SCRAPES
    ladder_sql = " ".join(sql for sql, _ in measured["ladder"][1])
    assert "UPDATE moderation_strike" in ladder_sql and 'INSERT INTO "moderation_strike"' in ladder_sql
    assert "moderation_accountaction" in " ".join(sql for sql, _ in measured["rung"][1])
    probes = Author.objects.filter(author_id__startswith="t-")
    assert probes.count() == 2 * (3 + 2 + 1)
    assert all(a.strike_points == active_points(a) for a in probes)  # the seeded points are the strikes'
    assert set(probes.values_list("standing", flat=True)) == {"warned"}  # the rung's authors were warned
    assert AccountAction.objects.filter(author__in=probes, cause="strikes").count() == 2 * (3 + 2 + 1)


def test_the_image_bombs_benchmark_sends_the_issues_bomb_and_the_heaviest_image_the_bounds_take():
    from bench import image_bombs
    from moderation.media.images import DecodeBounds, MediaRefused, image_inspect

    bomb, heaviest = image_bombs.bomb_png(), image_bombs.heaviest_accepted_png()

    with pytest.raises(MediaRefused, match="decompression bomb"):
        image_inspect(bomb, bounds=DecodeBounds.from_settings())
    unbounded = replace(DecodeBounds.from_settings(), max_pixels_per_byte=10**6, max_decode_bytes=10**10)
    assert len(bomb) < 160_000 and image_inspect(bomb, bounds=unbounded).pixels == 6300 * 6300
    assert image_inspect(heaviest, bounds=DecodeBounds.from_settings()).pixels > 9_000_000


@pytest.mark.django_db(transaction=True)
def test_the_image_bombs_benchmark_times_texts_while_images_arrive(live_server):
    from bench import image_bombs
    from moderation.services import api_client_create

    tokens = (api_client_create(name="texts")[1], api_client_create(name="images")[1])

    phase = image_bombs.measure(live_server.url, tokens, image_bombs.Phase("bombs"), count=5,
                                image=image_bombs.bomb_png(), at_once=2, tag="smoke")

    assert len(phase.latencies_ms) == 5 and not phase.text_errors
    assert list(phase.images) == ["400"] and phase.images["400"] >= 2
    assert "p95 / baseline p95 1.00" in image_bombs.describe(checkout.this(), phase, phase)
