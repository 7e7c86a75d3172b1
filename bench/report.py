"""Issue 17's table in one run (`make bench`): the code before the change ("now", the tag
bench-now) and this checkout ("after"), each path against its goal, its pgbench reference and
its framework ceiling, measured on the same machine in the same session.

    python -m bench.report [--quick] [--reviews 3000] [--requests 3000] [--no-now | --code DIR]

Paths: end to end on the ORM broker and on Redis (bench.e2e), and on the ORM broker with every
review by an author (20 each: strikes, the ladder, statements of reasons and notices, against
the same run's end to end without them), submissions (bench.submit) and
callback ingestion at 8 connections (bench.ingest), and `make run`'s memory idle and under the
end-to-end load (bench.footprint: RSS and PSS summed over its processes, and the reviews/s of
that load); then the peak RSS of a web worker and of a q2 worker with the model loaded, and the
invariant violations of every run. "now" and "after"
alternate (now first for one path, after first for the next) so the machine's drift hits both.
Without the tag, the commit it names; without git or that commit, "now" shows the figures
recorded in the issue, marked as recorded.
Ratios mean more than absolute figures on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import checkout, common, e2e, footprint, ingest, submit, wrk

# Issue 17, "Measured now" (2-core machine, production settings), for when the tag is unavailable.
RECORDED = {"e2e orm": (45.0, None), "e2e redis": (43.0, None), "submissions": (113.0, 103.0),
            "callbacks": (240.0, None)}
GOALS = {  # path -> (figure at least, p99 ms below)
    "e2e orm": (200.0, None), "e2e redis": (200.0, None), "submissions": (400.0, 100.0), "callbacks": (600.0, 100.0),
}
UNITS = {"e2e orm": "reviews/s", "e2e redis": "reviews/s", "e2e authors": "reviews/s", "submissions": "req/s",
         "callbacks": "req/s"}
PER_AUTHOR = 20  # e2e authors: reviews per author, each named on its submission
AUTHORS_KEEP = 0.9  # e2e authors: at least this share of the same run's e2e orm ("within 10%")
RSS_GOALS = {"web worker": 100, "q2 worker": 150}  # MiB
FOOTPRINT_GOAL_MIB = 800  # make run, all its processes, idle and under the e2e load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for a check of the instruments (300 reviews, 600 requests, 3 s pgbench)")
    parser.add_argument("--reviews", type=int, help="reviews per end-to-end run (default 3000; --quick 300)")
    parser.add_argument("--requests", type=int, help="requests per submission/callback run (default 3000; --quick 600)")
    parser.add_argument("--pgbench-seconds", type=int, help="seconds per pgbench reference (default 10; --quick 3)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--brokers", default="orm,redis")
    parser.add_argument("--paths", default="e2e,submissions,callbacks,footprint")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for an end-to-end run")
    parser.add_argument("--no-now", action="store_true", help="measure this checkout only")
    parser.add_argument("--code", metavar="DIR", help="the 'now' checkout to measure instead of the tag bench-now")
    args = parser.parse_args()
    reviews = args.reviews or (300 if args.quick else 3000)
    requests = args.requests or (600 if args.quick else 3000)
    pg_seconds = args.pgbench_seconds or (3 if args.quick else 10)
    paths = args.paths.split(",")
    unknown = set(paths) - {"e2e", "submissions", "callbacks", "footprint"}
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")

    common.setup_driver()
    wrk_binary = wrk.ensure()
    after = checkout.this()
    before, why = (None, "--no-now") if args.no_now else checkout.now(directory=args.code)
    codes = [c for c in (before, after) if c is not None]
    began = time.monotonic()
    print(f"bench.report: after = this checkout ({after.commit}), now = "
          + (f"{before.path} ({before.commit})" if before else f"recorded figures ({why})")
          + f"; {os.cpu_count()} CPUs, {wrk_binary}, {reviews} reviews per e2e run, {requests} requests per run, "
          f"{args.connections} connections", flush=True)

    results: dict[tuple[str, str], dict] = {}
    jobs = [f"e2e {b}" for b in args.brokers.split(",")] * ("e2e" in paths)
    jobs += ["e2e authors"] * ("e2e orm" in jobs)
    jobs += [p for p in ("submissions", "callbacks", "footprint") if p in paths]
    for job_no, path in enumerate(jobs):
        for code in codes if job_no % 2 == 0 else codes[::-1]:
            print(f"\n== {path}, {code.label} ==", flush=True)
            run_began = time.monotonic()
            result = _run(path, code, args, reviews=reviews, requests=requests, pg_seconds=pg_seconds)
            results[(path, code.label)] = result
            for line in _describe(path, result):
                print(line, flush=True)
            print(f"({time.monotonic() - run_began:.0f} s with set-up and references)", flush=True)

    print(f"\nnow ({before.commit if before else 'recorded'}) and after ({after.commit}), same run, "
          f"{(time.monotonic() - began) / 60:.1f} min")
    print(table(jobs, results, before is not None))


def _run(path: str, code: checkout.Checkout, args, *, reviews: int, requests: int, pg_seconds: int) -> dict:
    if path == "footprint":
        return footprint.measure(code, reviews=reviews, idle_s=10 if args.quick else 30,
                                 connections=args.connections, timeout=args.timeout)
    if path == "e2e authors":  # the ORM broker, every review by an author: strikes, statements, notices
        return e2e.run(code, "orm", reviews=reviews, connections=args.connections, web_workers=3, q_workers=2,
                       timeout=args.timeout, per_author=PER_AUTHOR)
    if path.startswith("e2e "):
        result = e2e.run(code, path.split()[1], reviews=reviews, connections=args.connections, web_workers=3,
                         q_workers=2, timeout=args.timeout)
        if code.is_this:
            result["reference"] = e2e.reference(result["database"], result["client"], clients=args.connections,
                                                seconds=pg_seconds)
        return result
    if path == "submissions":
        return submit.run(code, requests=requests, connections=args.connections, web_workers=4, ceiling=code.is_this,
                          pgbench_seconds=pg_seconds)
    result = ingest.run(code, levels=[args.connections], requests=requests, seconds=120, duplicates=0.3,
                        web_workers=4, ceiling=code.is_this, pgbench_seconds=pg_seconds)
    level = ingest.at(result, args.connections)
    result.update({k: level[k] for k in ("rate", "p50", "p99")})
    for k in ("reference", "ceiling"):
        if k in level:
            result[k] = level[k]
    return result


def _describe(path: str, result: dict) -> list[str]:
    if path == "footprint":
        return footprint.describe(result)
    if path.startswith("e2e "):
        return e2e.describe(result)
    if path == "submissions":
        return submit.describe(result)
    return ingest.describe(result)


def _p99(path: str, result: dict | None) -> str:
    if result is None:
        return "-"
    return f"{result['p99']:,.0f}" if path.startswith("e2e ") else f"{result['p99']:.1f}"


def table(jobs: list[str], results: dict, have_now: bool) -> str:
    rows = []
    for path in jobs:
        if path == "footprint":
            rows += _footprint_rows(results.get((path, "now")), results.get((path, "after")))
            continue
        now, after = results.get((path, "now")), results.get((path, "after"))
        if path == "e2e authors":
            rows.append(_authors_row(now, after, results.get(("e2e orm", "after"))))
            continue
        if have_now:
            now_cell = _figure(now)
        else:
            rate, p99 = RECORDED[path]
            now_cell = f"{rate:g} (recorded)"
        goal_rate, goal_p99 = GOALS[path]
        goal = f">= {goal_rate:g}" + (f", p99 < {goal_p99:g} ms" if goal_p99 else "")
        met = after is not None and after["rate"] >= goal_rate and (goal_p99 is None or after["p99"] < goal_p99)
        ref, top = (after or {}).get("reference"), (after or {}).get("ceiling")
        rows.append([
            f"{path} ({UNITS[path]})", now_cell, _figure(after), goal + (" met" if met else " missed"),
            f"{ref['rate']:,.0f} ({common.ratio(after['rate'], ref['rate'])})" if ref else "-",
            f"{top['rate']:,.1f} ({common.ratio(after['rate'], top['rate'])})" if top else "-",
            f"{_p99(path, now)} / {_p99(path, after)}",
            f"{_violations(now)} / {_violations(after)}",
        ])
    for kind, goal in RSS_GOALS.items():
        peaks = {label: max((r.get("rss", {}).get(kind, 0) for (_, code), r in results.items() if code == label), default=0)
                 for label in ("now", "after")}
        rows.append([f"peak RSS, {kind}" + (" (model loaded)" if kind == "q2 worker" else ""),
                     f"{peaks['now'] / 2**20:.0f} MiB" if peaks["now"] else "-",
                     f"{peaks['after'] / 2**20:.0f} MiB" if peaks["after"] else "-",
                     f"<= {goal} MiB" + (" (not measured in this run)" if not peaks["after"] else
                                         " met" if peaks["after"] <= goal * 2**20 else " missed"),
                     "-", "-", "-", "-"])
    return common.table(["path", "now", "after", "goal", "pgbench reference (ratio)", "framework ceiling (ratio)",
                         "p99 ms now / after", "violations now / after"], rows) + (
        "\n(e2e: reviews/s = reviews / (last completed_at - first created_at), p99 = submit -> final; submissions and"
        "\n callbacks at 8 connections, p99 = request latency; ratio = after / reference; 'incomplete': a run's"
        "\n reviews were not all final before the timeout)")


def _authors_row(now: dict | None, after: dict | None, without: dict | None) -> list[str]:
    """End to end with authors against the same run's end to end without them (ORM broker)."""
    kept = after["rate"] / without["rate"] if after and without and without["rate"] else 0.0
    goal = f"within 10% of e2e orm ({without['rate']:.1f}): {kept:.2f} of it" if without else "needs e2e orm"
    met = kept >= AUTHORS_KEEP
    return [f"e2e authors, {PER_AUTHOR} reviews each ({UNITS['e2e authors']})", _figure(now), _figure(after),
            goal + (" met" if met else " missed"), "-", "-", f"{_p99('e2e authors', now)} / {_p99('e2e authors', after)}",
            f"{_violations(now)} / {_violations(after)}"]


def _footprint_rows(now: dict | None, after: dict | None) -> list[list[str]]:
    """make run's memory: RSS summed (shared pages once per process) and PSS summed (what the
    processes hold in all), each idle / at the load's peak, and the reviews/s of that load."""
    rows = []
    for measure, what in (("rss", "RSS summed"), ("pss", "PSS summed")):
        def cell(result):
            if result is None:
                return "-"
            return f"{result['idle'][measure] / 2**20:.0f} / {result['peak'][measure] / 2**20:.0f} MiB"

        worst = max(after["idle"][measure], after["peak"][measure]) if after else 0
        met = 0 < worst <= FOOTPRINT_GOAL_MIB * 2**20
        rows.append([f"make run, {what}, idle / under load", cell(now), cell(after),
                     f"<= {FOOTPRINT_GOAL_MIB} MiB" + (" met" if met else " missed"), "-", "-", "-",
                     f"{_violations(now)} / {_violations(after)}"])
    if now and after and now["rate"]:
        # A shared machine's run-to-run noise is a few per cent: within 5% of "now" is no loss.
        kept = after["rate"] / now["rate"]
        loss = f"no loss: {kept:.2f} of now" + (" met" if kept >= 0.95 else " missed")
    else:
        loss = "no loss (needs now)"
    rows.append(["make run under the load (reviews/s)", _figure(now), _figure(after), loss, "-", "-", "-", "-"])
    return rows


def _figure(result: dict | None) -> str:
    if result is None:
        return "-"
    if result["path"].startswith("e2e") and not result["rate"]:
        return f"incomplete ({result['final']}/{result['reviews']})"
    return f"{result['rate']:,.1f}"


def _violations(result: dict | None) -> str:
    return "-" if result is None else str(len(result["violations"]))


if __name__ == "__main__":
    main()
