"""What the benchmarks share: a database of their own, seeded rows, the platform's processes,
pgbench, peak RSS, percentiles and tables (the HTTP load generator is wrk: bench/wrk.py).

Every benchmark recreates its databases, named after `BENCH_DATABASE` (default
`moderation_bench`), on the server `DATABASE_URL` points at (the embedded one when it is unset),
so it never touches the data of a running platform.
"""

from __future__ import annotations

import base64
import json
import math
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = os.environ.get("BENCH_DATABASE", "moderation_bench")
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"moderation-benchmark-secret-0001").decode()
# Production settings (DEBUG off: no query log, JSON logs), on plain HTTP over loopback.
PRODUCTION_ENV = {
    "DEBUG": "0", "SECRET_KEY": "bench-" + "k" * 60, "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
    "SECURE_SSL_REDIRECT": "0", "LOG_LEVEL": "WARNING", "PROVIDER_WEBHOOK_SECRET": WEBHOOK_SECRET,
}


# --- database --------------------------------------------------------------------------------


def server_url() -> str:
    """The PostgreSQL server to benchmark on: DATABASE_URL, else the embedded one."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    sys.path.insert(0, str(ROOT))
    from config.embedded_db import database_url

    return database_url()


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def admin_url() -> str:
    """The server's maintenance database, to create and drop the benchmark's own (the database
    DATABASE_URL names need not exist)."""
    return with_database(server_url(), "postgres")


def setup(*, env: dict[str, str] | None = None, name: str = BENCH_DB, recreate: bool = True) -> str:
    """(Re)create a benchmark database, point Django at it, migrate. Returns its URL."""
    import psycopg

    url = server_url()
    if recreate:
        with psycopg.connect(admin_url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    bench_url = with_database(url, name)
    os.environ.update({"DATABASE_URL": bench_url, "DJANGO_SETTINGS_MODULE": "config.settings", **PRODUCTION_ENV,
                       **(env or {})})
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django
    from django.core.management import call_command

    django.setup()
    if recreate:
        call_command("migrate", verbosity=0)
    return bench_url


def sql(statement: str, params=None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def bench_client(name: str = "bench", webhook_url: str = "") -> tuple[int, str]:
    """An API client; without a webhook_url its decisions are written to the outbox, not sent."""
    from moderation.services import api_client_create

    client, token = api_client_create(name=f"{name}-{uuid.uuid4().hex[:6]}", webhook_url=webhook_url)
    return client.pk, token


_SEED_PROCESSING = """
WITH g AS (
    SELECT i, gen_random_uuid() AS content_id, gen_random_uuid() AS review_id, gen_random_uuid() AS key
    FROM generate_series(1, %(n)s) AS i
), c AS (
    INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
    SELECT content_id, %(client)s, %(tag)s || i, 'text', 'seeded for the benchmark', '', '{}', now() FROM g
), r AS (
    INSERT INTO moderation_contentreview (id, content_id, client_id, status, version, active_idempotency_key,
        worker_id, provider_request_id, processing_started_at, last_enqueued_at, created_at, updated_at)
    SELECT review_id, content_id, %(client)s, 'processing', 2, key, 'bench', '', now(), now(), now(), now() FROM g
), q AS (
    INSERT INTO moderation_moderationrequest (review_id, idempotency_key, provider, provider_request_id, status,
        cause, generation, attempt_no, max_attempts, last_error, created_at, sent_at, updated_at)
    SELECT review_id, key, 'webhook', 'sim-' || i, 'sent', 'job_started', 0, 1, 4, '', now(), now(), now() FROM g
), t AS (
    INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id,
        idempotency_key, job_id, attempt_no, reason, created_at)
    SELECT review_id, 'pending', 'processing', 'job_started', 'worker', 'bench', key, '', NULL, '', now() FROM g
), h AS (
    INSERT INTO moderation_historicalcontentreview (id, status, version, active_idempotency_key, worker_id,
        provider_request_id, created_at, updated_at, history_date, history_change_reason, history_type, client_id,
        content_id)
    SELECT review_id, s.status, s.version, s.key, s.worker, '', now(), now(), now(), s.reason, s.kind, %(client)s,
        content_id
    FROM g CROSS JOIN LATERAL (VALUES ('pending', 1, NULL::uuid, '', NULL, '+'),
                                      ('processing', 2, key, 'bench', 'job_started', '~'))
        AS s(status, version, key, worker, reason, kind)
)
SELECT review_id, key FROM g ORDER BY i
"""

# A decided review as the pipeline leaves it: content, review, its completed request, the
# decision and its outbox row, the applied callback, two transitions and three history rows.
_SEED_DECIDED = """
WITH g AS (
    SELECT i, gen_random_uuid() AS content_id, gen_random_uuid() AS review_id, gen_random_uuid() AS key,
           now() - make_interval(secs => %(n)s - i) AS at
    FROM generate_series(1, %(n)s) AS i
), c AS (
    INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
    SELECT content_id, %(client)s, %(tag)s || i, 'text', 'seeded for the benchmark', '', '{}', at FROM g
), q AS (
    INSERT INTO moderation_moderationrequest (review_id, idempotency_key, provider, provider_request_id, status,
        cause, generation, attempt_no, max_attempts, last_error, created_at, sent_at, completed_at, updated_at)
    SELECT review_id, key, 'webhook', %(tag)s || i, 'completed', 'job_started', 0, 1, 4, '', at, at, at, at FROM g
    RETURNING id, review_id
), cb AS (
    INSERT INTO callbacks_providercallback (provider, provider_event_id, event_type, idempotency_key,
        provider_request_id, payload_json, headers, received_at, processed_at, outcome, outcome_detail,
        duplicate_count, process_failures, process_error)
    SELECT 'webhook', 'evt-' || %(tag)s || i, 'moderation.completed', key, %(tag)s || i, '{}', '{}', at, at,
        'applied', '', 0, 0, '' FROM g
), d AS (
    INSERT INTO moderation_decision (review_id, request_id, label, source, score, flagged, categories,
        category_scores, model, explanation, reason, policy_id, created_at)
    SELECT g.review_id, q.id, 'approved', 'provider', 0.01, false, '{}', '{}', 'seed', 'seeded', '', %(policy)s, at
    FROM g JOIN q USING (review_id)
    RETURNING id, review_id
), n AS (
    INSERT INTO moderation_decisionnotification (review_id, kind, decision_id, client_id, event_id, url, payload,
        status, attempts, last_error, created_at)
    SELECT review_id, 'review.decided', d.id, %(client)s, 'ntf-' || %(tag)s || i, '', '{}', 'no_endpoint', 0, '', at
    FROM g JOIN d USING (review_id)
), r AS (
    INSERT INTO moderation_contentreview (id, content_id, client_id, status, version, active_idempotency_key,
        worker_id, provider_request_id, decision_id, processing_started_at, completed_at, last_enqueued_at,
        created_at, updated_at)
    SELECT g.review_id, content_id, %(client)s, 'approved', 3, key, 'bench', %(tag)s || i, d.id, at, at, at, at, at
    FROM g JOIN d USING (review_id)
), t AS (
    INSERT INTO audit_reviewtransition (review_id, from_status, to_status, cause, actor, actor_id,
        idempotency_key, job_id, attempt_no, reason, created_at)
    SELECT review_id, s.f, s.t, s.cause, 'worker', 'bench', key, '', 1, '', at
    FROM g CROSS JOIN (VALUES ('pending', 'processing', 'job_started'),
                              ('processing', 'approved', 'provider_callback')) AS s(f, t, cause)
)
INSERT INTO moderation_historicalcontentreview (id, status, version, active_idempotency_key, worker_id,
    provider_request_id, created_at, updated_at, history_date, history_change_reason, history_type, client_id,
    content_id)
SELECT review_id, s.status, s.version, key, 'bench', '', at, at, at, s.reason, s.kind, %(client)s, content_id
FROM g CROSS JOIN (VALUES ('pending', 1, NULL, '+'), ('processing', 2, 'job_started', '~'),
                          ('approved', 3, 'provider_callback', '~')) AS s(status, version, reason, kind)
"""


_SEED_PENDING = """
WITH g AS (
    SELECT i, gen_random_uuid() AS content_id, gen_random_uuid() AS review_id FROM generate_series(1, %(n)s) AS i
), c AS (
    INSERT INTO moderation_content (id, client_id, external_id, kind, text, media_url, metadata, created_at)
    SELECT content_id, %(client)s, %(tag)s || i, 'text', 'seeded for the benchmark', '', '{}', now() FROM g
), r AS (
    INSERT INTO moderation_contentreview (id, content_id, client_id, status, version, worker_id,
        provider_request_id, last_enqueued_at, created_at, updated_at)
    SELECT review_id, content_id, %(client)s, 'pending', 1, '', '', now(), now(), now() FROM g
), h AS (
    INSERT INTO moderation_historicalcontentreview (id, status, version, worker_id, provider_request_id, created_at,
        updated_at, history_date, history_type, client_id, content_id)
    SELECT review_id, 'pending', 1, '', '', now(), now(), now(), '+', %(client)s, content_id FROM g
)
SELECT review_id FROM g ORDER BY i
"""


def seed_pending(client_id: int, n: int, tag: str) -> list[uuid.UUID]:
    """n reviews just submitted (`pending`)."""
    return [row[0] for row in sql(_SEED_PENDING, {"n": n, "client": client_id, "tag": tag})]


def seed_processing(client_id: int, n: int, tag: str) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """n reviews in `processing`, each with its live sent request: (review id, idempotency key)."""
    return [tuple(row) for row in sql(_SEED_PROCESSING, {"n": n, "client": client_id, "tag": tag})]


def seed_decided(client_id: int, n: int, tag: str, *, batch: int = 100_000) -> None:
    """n decided reviews with everything the pipeline writes for one, in batches."""
    from moderation.services import policy_active

    policy = policy_active().pk
    for start in range(0, n, batch):
        sql(_SEED_DECIDED, {"n": min(batch, n - start), "client": client_id, "tag": f"{tag}{start}-", "policy": policy})


def analyze() -> None:
    sql("ANALYZE")


# --- signed callbacks ---------------------------------------------------------------------------


def callback_body(key, provider_request_id: str, *, score: float = 0.02) -> bytes:
    return json.dumps({"type": "moderation.completed", "data": {
        "id": provider_request_id, "idempotency_key": str(key), "model": "bench-model",
        "results": [{"flagged": score >= 0.5, "categories": {"profanity": score >= 0.5},
                     "category_scores": {"profanity": score}}],
    }}).encode()


def signed_request(event_id: str, body: bytes, *, path: str = "/api/v1/callbacks/webhook/",
                   keep_alive: bool = False) -> bytes:
    """A whole HTTP/1.1 request for the callback endpoint, signed now (valid for 5 minutes)."""
    from moderation.signing import sign

    headers = sign(WEBHOOK_SECRET, event_id=event_id, body=body)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n" + ("" if keep_alive else "Connection: close\r\n")
        + "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        + "\r\n"
    )
    return head.encode() + body


# --- processes ----------------------------------------------------------------------------------


# The web servers a benchmark can run (`server`): gunicorn's sync workers (what the benchmarks'
# figures were measured with), its threaded workers, and granian serving config.asgi, what
# `make run` and the systemd unit run (moderation/management/web.py). -> gunicorn's arguments.
SERVERS = {
    "gunicorn": ("--backlog", "2048"),
    "gthread": ("--backlog", "2048", "-k", "gthread", "--threads", "4"),
    "granian": (),
}


class Platform:
    """gunicorn and django-q2 clusters as real processes on the benchmark database.

    `naive=True` starts them through bench.naive (guards replaced by unconditional updates);
    `wsgi_app` is what gunicorn serves (bench.wsgi: the project with the framework ceiling beside
    it); `code` is the checkout the processes run from (default: this one) and `python` the
    interpreter they run on (default: this one's; another checkout's is `Checkout.executable`,
    its own virtualenv when its requirements differ: bench.checkout); `server`, a key of
    SERVERS (granian serves the project as `make run` does, never `wsgi_app`).
    """

    def __init__(self, *, web_workers: int = 4, clusters: int = 0, q_workers: int = 2, naive: bool = False,
                 env: dict[str, str] | None = None, wsgi_app: str = "config.wsgi", code: Path | None = None,
                 server: str = "gunicorn", python: str | None = None):
        from lab.race_lab import free_port

        self.port = free_port()
        self.web_workers, self.clusters, self.naive = web_workers, clusters, naive
        if server not in SERVERS:
            raise ValueError(f"server must be one of {', '.join(SERVERS)}, got {server!r}")
        self.wsgi_app, self.code, self.server, self.python = wsgi_app, code, server, python
        self.env = {
            **os.environ, "PUBLIC_BASE_URL": f"http://127.0.0.1:{self.port}", "LOG_LEVEL": "WARNING",
            "Q_NAME": f"bench-{uuid.uuid4().hex[:8]}", "Q_WORKERS": str(q_workers),
            "THROTTLE_CLIENT_RATE": "10000000/min", "THROTTLE_CALLBACK_RATE": "10000000/min",
            "BREAKER_MIN_CALLS": "1000000", **(env or {}),
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self.peak_rss: dict[str, int] = {}
        self._sampling = False

    def __enter__(self) -> Platform:
        from lab.race_lab import start_platform

        self.processes = start_platform(
            self.env, self.port, web_workers=self.web_workers, clusters=self.clusters,
            # `-m bench.naive` runs the rest of the command line unguarded (see bench/naive.py).
            prefix=("-m", "bench.naive") if self.naive else (), gunicorn_args=SERVERS[self.server],
            wsgi_app=None if self.server == "granian" else self.wsgi_app, cwd=self.code, python=self.python,
        )
        return self

    def __exit__(self, *exc) -> None:
        from lab.race_lab import stop

        self._sampling = False
        stop(self.processes.values())

    def sample_rss(self, interval: float = 0.1) -> None:
        """Record, until exit, the peak RSS of one web worker and of one q2 worker (the
        largest of each kind), in a background thread."""
        import psutil

        from lab.race_lab import cluster_workers

        self._sampling = True

        def loop():
            while self._sampling:
                for name, process in self.processes.items():
                    if name == "web":
                        kind = "web worker"
                        try:
                            children = psutil.Process(process.pid).children()
                        except psutil.NoSuchProcess:
                            continue
                    else:
                        kind, children = "q2 worker", cluster_workers(process)
                    for child in children:
                        try:
                            rss = child.memory_info().rss
                        except psutil.NoSuchProcess:
                            continue
                        self.peak_rss[kind] = max(self.peak_rss.get(kind, 0), rss)
                time.sleep(interval)

        threading.Thread(target=loop, daemon=True).start()


# --- figures ------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))  # nearest rank
    return ordered[rank]


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def token() -> str:
    return secrets.token_hex(4)


# --- the driver of the wrk benchmarks, pgbench ---------------------------------------------------

FINAL = ("approved", "rejected", "manual_review")  # moderation_contentreview.status of a decided review


def setup_driver() -> None:
    """Django set up in the benchmark's own process (signing requests, starting processes); it
    opens no connection: each run has its own database (bench.checkout)."""
    os.environ.update({"DJANGO_SETTINGS_MODULE": "config.settings", **PRODUCTION_ENV})
    os.environ.setdefault("DATABASE_URL", server_url())
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import django

    django.setup()


def pgbench(url: str, script: str, *, clients: int, seconds: int, defines: dict | None = None,
            transactions: int = 0) -> tuple[float, float]:
    """Run a pgbench script (-M prepared) on `url`: (tps, average latency ms)."""
    import re
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sql") as f:
        f.write(script)
        f.flush()
        bound = ["-t", str(transactions)] if transactions else ["-T", str(seconds)]
        run = subprocess.run(
            [pgbench_binary(), "-n", "-M", "prepared", "-f", f.name, *bound, "-c", str(clients),
             "-j", str(min(clients, 2)), *(f"-D{k}={v}" for k, v in (defines or {}).items()), url],
            capture_output=True, text=True,
        )
    if run.returncode:
        raise SystemExit(f"pgbench failed:\n{run.stderr[-3000:]}")
    tps = float(re.search(r"tps = ([\d.]+)", run.stdout).group(1))
    latency = float(re.search(r"latency average = ([\d.]+) ms", run.stdout).group(1))
    return tps, latency


def pgbench_binary() -> str:
    """The server's pgbench, else the one pgserver ships (the embedded PostgreSQL's)."""
    import shutil

    found = shutil.which("pgbench")
    if found:
        return found
    import pgserver

    bundled = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pgbench"
    if not bundled.exists():
        raise SystemExit("pgbench not found: install PostgreSQL's client programs (postgresql-client)")
    return str(bundled)


def ratio(value: float, reference: float) -> str:
    return f"{value / reference:.2f}" if reference else "-"


def rss_line(rss: dict) -> str:
    return ", ".join(f"{kind} {value / 2**20:.0f} MiB" for kind, value in sorted(rss.items())) or "-"
