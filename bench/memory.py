"""Memory: what each piece a worker loads adds to a process, each step measured in a fresh process.

    python -m bench.memory [--chain django,local ...] [--repeat 3]
    python -m bench.memory --platform [--reviews 600] [--database moderation_bench_memory]

Each line starts a new interpreter, runs the steps named before it and then its own, and prints
RSS, USS and PSS (MiB, from /proc through psutil) after each step, so a step's cost is its delta
over the step before it in the same process. `--repeat` runs each chain that many times and
prints the median. The steps:

- django: `django.setup()` with the production settings and every app's models imported, as a
  worker has them;
- sklearn: `import sklearn, scipy.sparse` (what the training imports; a worker never does);
- local: the provider's `predictor()` (moderation/providers/local.py: the multilingual model,
  NumPy only), called once;
- detector: the product's language detector (moderation/text/language.py: the configured languages,
  loaded whole and the heap trimmed), after one detection;
- lingua-high-<langs>, lingua-low-<langs>: a detector for those languages (`en+id+ms`), with one
  short text of each language detected, so every language's models are loaded.

No database is touched: Django is set up, never connected.

`--platform` measures the processes themselves: gunicorn (2 workers) and a django-q2 cluster
(2 workers) with the local model and the ORM broker, on a database of its own (recreated);
`--reviews` submitted through the API from 8 connections until all are final, then a policy dry
run through the admin (pasted texts and the last 200 reviews) sent once per web worker. It
prints the peak RSS of the largest web and q2 worker (as bench/common.py samples it) under load
and after the dry runs, and each worker's RSS, USS and PSS at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench import common

TEXTS = {
    "en": "you are a complete idiot and everyone knows it",
    "id": "kamu benar-benar bodoh dan semua orang tahu itu",
    "ms": "awak memang bodoh dan semua orang tahu tentang itu",
    "de": "du bist ein kompletter Idiot und alle wissen es",
}
CHAINS = (
    ("django",),
    ("django", "sklearn"),
    ("django", "local"),
    ("django", "lingua-high-en+id+ms"),
    ("django", "lingua-low-en+id+ms"),
    ("django", "lingua-high-en+id"),
    ("django", "lingua-high-en"),
    ("django", "local", "lingua-high-en+id+ms"),
    ("django", "detector"),
    ("django", "local", "detector"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chain", action="append", help="steps joined by ',' (repeatable; default: a fixed set)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", help=argparse.SUPPRESS)  # internal: run one chain in this process
    parser.add_argument("--platform", action="store_true", help="measure gunicorn and django-q2 workers")
    parser.add_argument("--reviews", type=int, default=600)
    parser.add_argument("--database", default=common.BENCH_DB + "_memory")
    args = parser.parse_args()
    if args.run:
        return _run(args.run.split(","))
    if args.platform:
        return _platform(args.reviews, args.database)
    chains = [tuple(c.split(",")) for c in args.chain] if args.chain else CHAINS
    rows = []
    for chain in chains:
        runs = [json.loads(_child(",".join(chain))) for _ in range(args.repeat)]
        previous = {"rss": runs[0][0]["start"]["rss"], "uss": 0.0, "pss": 0.0}
        for index in range(len(chain)):
            figures = {k: statistics.median(run[index][k] for run in runs) for k in ("rss", "uss", "pss")}
            start = statistics.median(run[0]["start"]["rss"] for run in runs)
            before = start if index == 0 else previous["rss"]
            rows.append([" > ".join(chain[:index + 1]), figures["rss"], figures["rss"] - before,
                         figures["uss"], figures["pss"]])
            previous = figures
    print(f"Memory per step (MiB; median of {args.repeat} fresh processes; the interpreter alone: "
          f"{start:.1f} RSS)")
    print(common.table(["steps", "RSS", "RSS +", "USS", "PSS"], rows))


def _child(chain: str) -> str:
    env = {**os.environ, **common.PRODUCTION_ENV, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.setdefault("DATABASE_URL", "postgres://127.0.0.1:1/unused")  # set up, never connected
    run = subprocess.run([sys.executable, "-m", "bench.memory", "--run", chain], cwd=common.ROOT,
                         capture_output=True, text=True, env=env, timeout=600)
    if run.returncode:
        raise SystemExit(f"bench.memory --run {chain} failed:\n{run.stderr}")
    return run.stdout.strip().splitlines()[-1]


def _sample() -> dict[str, float]:
    import psutil

    info = psutil.Process().memory_full_info()
    return {"rss": info.rss / 2**20, "uss": info.uss / 2**20, "pss": info.pss / 2**20}


def _run(chain: list[str]) -> None:
    out = []
    start = _sample()
    for step in chain:
        STEPS[step.split("-", 1)[0]](step)
        out.append({"step": step, **_sample(), "start": start})
    print(json.dumps(out))


def _django(_step: str) -> None:
    sys.path.insert(0, str(common.ROOT))
    import django

    django.setup()
    import moderation.services  # noqa: F401  (what a worker imports before its first task)
    import moderation.tasks  # noqa: F401


def _sklearn(_step: str) -> None:
    import scipy.sparse  # noqa: F401
    import sklearn  # noqa: F401


def _local(_step: str) -> None:
    from moderation.providers.local import predictor

    predictor()([TEXTS["en"]])


def _detector(_step: str) -> None:
    from moderation.text.language import detect

    detect(TEXTS["en"])


def _lingua(step: str) -> None:
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    _, mode, codes = step.split("-", 2)
    languages = [Language.from_iso_code_639_1(getattr(IsoCode639_1, c.upper())) for c in codes.split("+")]
    if len(languages) == 1:  # lingua needs two to tell apart; the other is never loaded unless seen
        languages.append(Language.GERMAN)
    builder = LanguageDetectorBuilder.from_languages(*languages)
    if mode == "low":
        builder = builder.with_low_accuracy_mode()
    detector = builder.build()
    for text in TEXTS.values():
        detector.compute_language_confidence_values(text)


def _platform(reviews: int, database: str) -> None:
    import psutil

    common.setup(name=database, env={"MODERATION_PROVIDER": "local"})
    from django.contrib.auth import get_user_model

    from lab.race_lab import TEXTS, cluster_workers
    from moderation.models import FINAL_STATUSES, ContentReview

    get_user_model().objects.create_superuser("bench-admin", "bench@example.com", "bench-password-1")
    _, token = common.bench_client("memory")
    with common.Platform(web_workers=2, clusters=1, q_workers=2, env={"MODERATION_PROVIDER": "local"}) as platform:
        platform.sample_rss()
        base = f"http://127.0.0.1:{platform.port}"
        _submit(base, token, reviews, TEXTS)
        while ContentReview.objects.exclude(status__in=FINAL_STATUSES).exists():
            time.sleep(0.5)
        under_load = dict(platform.peak_rss)
        platform.peak_rss.clear()
        for _ in range(2 * platform.web_workers):
            _admin_dry_run(base, TEXTS)
        time.sleep(1)
        after = dict(platform.peak_rss)
        rows = []
        for name, process in platform.processes.items():
            children = psutil.Process(process.pid).children() if name == "web" else cluster_workers(process)
            for child in children:
                info = child.memory_full_info()
                rows.append([name, child.pid, " ".join(child.cmdline()[-2:])[:40], info.rss / 2**20,
                             info.uss / 2**20, info.pss / 2**20])
    mib = {k: round(v / 2**20, 1) for k, v in under_load.items()}
    print(f"Peak RSS under load ({reviews} reviews, local model, ORM broker), MiB: {mib}")
    print(f"Peak RSS during and after {2 * platform.web_workers} admin dry runs, MiB: "
          f"{ {k: round(v / 2**20, 1) for k, v in after.items()} }")
    print(common.table(["process", "pid", "command", "RSS", "USS", "PSS"], rows))


def _submit(base: str, token: str, reviews: int, texts) -> None:
    import random
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    rng = random.Random(17)
    with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
        def submit(i: int) -> None:
            http.post("/api/v1/reviews/", json={"external_id": f"mem-{i}", "content_type": "text",
                                                "text": rng.choice(texts)}).raise_for_status()

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(submit, range(reviews)))


def _admin_dry_run(base: str, texts) -> None:
    """Log in to the admin and preview a term-list change with a dry run. Cookies are sent by
    hand: production settings mark them Secure, and this is plain HTTP on loopback."""
    import re

    import httpx

    with httpx.Client(base_url=base, timeout=120) as http:
        def cookie_header(response, jar):
            jar.update({c.name: c.value for c in response.cookies.jar})
            return {"Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}

        jar: dict[str, str] = {}
        page = http.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        login = http.post("/admin/login/?next=/admin/", headers=cookie_header(page, jar), data={
            "csrfmiddlewaretoken": csrf, "username": "bench-admin", "password": "bench-password-1"})
        assert login.status_code == 302, login.text[:500]
        form = http.get("/admin/moderation/moderationpolicy/terms/", headers=cookie_header(login, jar))
        form.raise_for_status()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        version = re.search(r'name="base_version" value="(\d+)"', form.text).group(1)
        preview = http.post("/admin/moderation/moderationpolicy/terms/", headers=cookie_header(form, jar), data={
            "csrfmiddlewaretoken": csrf, "base_version": version, "category": "insult", "action": "reject",
            "language": "id", "mode": "add", "terms": "bodoh", "dry_texts": "\n".join(texts[:50]),
            "dry_last": "200", "notes": "", "preview": "1"})
        assert preview.status_code == 200 and "bodoh" in preview.text, preview.text[:500]


STEPS = {"django": _django, "sklearn": _sklearn, "local": _local,
         "detector": _detector, "lingua": _lingua}


if __name__ == "__main__":
    main()
