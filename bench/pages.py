"""The pages of one much-reported review: its admin change page, its review page (first and
last timeline page) and its API timeline, with N user reports on it.

    python -m bench.pages [--reports 10000] [--rounds 3]

A database of its own (<BENCH_DATABASE>_pages): one review submitted and decided through the
services, then N reports inserted in SQL as `report_file` leaves them (one per reporter, a
millisecond apart). Each page is fetched in-process (Django's test client, a superuser's
session, production settings) `--rounds` times: the median time and the bytes of the answer
are printed, and the peak of Python allocations while it was built (tracemalloc, in one more
untimed fetch).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from bench import common

_SEED_REPORTS = """
INSERT INTO moderation_report (id, review_id, decision_id, reporter_id, reason, detail, created_at)
SELECT gen_random_uuid(), %(review)s, %(decision)s, 'user-' || i, 'spam', 'spam, says user ' || i,
       now() + make_interval(secs => i / 1000.0)
FROM generate_series(1, %(n)s) AS i
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    common.setup(name=f"{common.BENCH_DB}_pages")
    review, token = _seed(args.reports)

    from django.contrib.auth.models import User
    from django.test import Client

    browser, api = Client(), Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    browser.force_login(User.objects.create_superuser("bench-boss", password="pw-long-enough-1"))
    admin = f"/admin/moderation/contentreview/{review.pk}"
    pages = {
        "admin change page": (browser, f"{admin}/change/"),
        "review page": (browser, f"{admin}/timeline/"),
        "review page, last timeline page": (browser, f"{admin}/timeline/?timeline_page={args.reports // 100 + 1}"),
        "API timeline": (api, f"/api/v1/reviews/{review.pk}/timeline/"),
    }
    rows = []
    for name, (http, url) in pages.items():
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            response = http.get(url)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
        size = len(response.content)
        tracemalloc.start()  # once more, untimed: tracing slows the build several times over
        http.get(url)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append([name, f"{statistics.median(times) * 1000:.0f}", f"{size / 1e6:.2f}", f"{peak / 1e6:.1f}"])
    print(f"One review with {args.reports:,} reports (in-process; medians of {args.rounds})")
    print(common.table(["page", "ms", "MB sent", "MB peak allocated"], rows))


def _seed(n: int):
    from moderation import services
    from moderation.models import ApiClient
    from moderation.providers import ModerationResult

    client_id, token = common.bench_client("pages")
    review, _ = services.review_submit(client=ApiClient.objects.get(pk=client_id), external_id="reported",
                                       kind="text", text="a much-reported text")
    request = services.review_claim(review_id=review.pk, worker_id="bench")
    services.review_finalize(
        idempotency_key=request.idempotency_key, cause="provider_result",
        result=ModerationResult(model="bench", flagged=False, categories={"spam": False}, category_scores={"spam": 0.1}),
    )
    review.refresh_from_db()
    common.sql(_SEED_REPORTS, {"review": review.pk, "decision": review.decision_id, "n": n})
    common.sql("ANALYZE moderation_report")
    return review, token


if __name__ == "__main__":
    main()
