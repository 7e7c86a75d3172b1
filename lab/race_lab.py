"""The race lab: the real system under the conditions that break ordinary pipelines, then every
invariant checked against the database (`manage.py race_lab`).

The production web tier (moderation/management/web.py, as `make run` starts it) serves the API
and the callbacks; K django-q2 clusters run the jobs as separate
processes; the provider simulator answers over HTTP with the faults asked for; worker processes
are killed with SIGKILL at random moments. All of them share the configured PostgreSQL.
"""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from unittest import mock
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, Sum
from django.test import override_settings
from django.utils import timezone

from audit.models import EventKind, PipelineEvent, ReviewTransition
from callbacks.models import ProviderCallback
from moderation.models import ResultOutcome
from moderation.invariants import violations
from moderation.models import FINAL_STATUSES, Cause, ContentErasure, ContentReview, ProviderAttempt
from moderation.privacy.retention import prune
from lab.author_traffic import AuthorTraffic
from lab.notice_traffic import NoticeTraffic
from lab.transparency_traffic import TransparencyTraffic
from lab.pgbouncer import PgBouncer, server_address
from lab.user_traffic import UserTraffic
from lab.simulator import Faults, ProviderSimulator
from moderation.management.processes import notification_cluster_env, signal_group, start, stop_groups
from moderation.management.web import web_command

TEXTS = ["thanks, this was helpful", "you absolute idiot", "see you tomorrow at nine", "shut up, moron",
         "great photo of the lake", "what a stupid take", "happy birthday!", "this is damn annoying"]

# Texts that took moderation down before (issue 22): no words at all, emoji, bidi and zero-width
# controls, combining marks, look-alike and spelt-out evasions, and a long text dense with
# reject and allow matches. Sent as written (no run suffix: that would give them words).
HOSTILE_TEXTS = [
    "🤬🤬🤬🖕🖕", "!!! ???", "\u202e\u200b\u200d", "... --- ...", "🖕", "\u0301\u0301\u0301\u0301\u0301\u0301",
    "\u202eesrever tohidi", "id\u200biot", "b.o.d.o.h", "Z\u0351\u0352\u0353a\u0354\u0355lgo \u05e9\u05dc\u05d5\u05dd",
    "\ufeff\u2066\u2067\u2068\u2069", "ｉｄｉｏｔ ｍｏｒｏｎ", "𝐢𝐝𝐢𝐨𝐭", "a\u00a0\u2003\u3000b",
]
# The lab's watched terms, published as a policy version before the traffic: a word, a phrase,
# patterns (one for wordless texts), and an allow rule whose matches contain the reject ones.
LAB_TERM_LISTS = [
    {"category": "harassment", "action": "reject", "language": "",
     "terms": ["idiot", "moron", "kill", "stupid take", "re:🖕+", "re:(?:\\d{3}-){2}\\d{4}"]},
    {"category": "harassment", "action": "allow", "language": "", "terms": ["kill the process"]},
    {"category": "violence", "action": "manual_review", "language": "", "terms": ["re:(🤬\\s*){3,}"]},
]


def hostile_text(rng: random.Random) -> str:
    """One of HOSTILE_TEXTS, or a long text (up to 60,000 characters) dense with reject and allow
    matches, as in issue 22's finding 5."""
    if rng.random() < 0.1:
        return "kill the process and kill it " * rng.randint(500, 2000)
    return rng.choice(HOSTILE_TEXTS)


# The race lab's authors write this many reviews each by default (1,000 reviews: 50 authors).
REVIEWS_PER_AUTHOR = 20
# The texts of TEXTS the lab's rules (and the local model) reject: an author's insults.
INSULTS = [text for text in TEXTS if any(term in text for term in LAB_TERM_LISTS[0]["terms"])]
POLITE = [text for text in TEXTS if text not in INSULTS]


@dataclass
class LabConfig:
    reviews: int = 200
    clusters: int = 2
    duplicate_rate: float = 0.1
    timeout_rate: float = 0.05
    late_rate: float = 0.05
    error_rate: float = 0.05
    kill_workers: int = 1
    # Kill any process of any cluster (the master, the sentinel, the pusher, the monitor, a worker;
    # the notification cluster's too), not only the sentinel's children. A cluster whose master
    # died is started again, as run_platform's supervisor and systemd's Restart=always do.
    kill_any: bool = False
    report_rate: float = 0.1  # share of decided reviews reported by more users than the threshold
    appeal_rate: float = 0.2  # share of rejected reviews appealed (several requests at once)
    seed: int = 1
    quiesce_timeout_s: float = 600.0
    web_workers: int = 2
    pgbouncer: bool = False  # every process of the platform through a real PgBouncer (transaction pooling)
    erase: int = 0  # reviews whose content the client erases while they are being moderated
    prune: bool = False  # at the end, prune as if a year had passed (then the invariants are checked)
    web_outage_s: float = 0.0  # stop the web tier this long once the reviews are in (0: never)
    batch_size: int | None = None  # MODERATION_BATCH_SIZE of the platform's processes (None: the setting's)
    hostile_rate: float = 0.2  # share of reviews with a hostile text (HOSTILE_TEXTS); the lab's rules are on
    decision_bound_s: float = 240.0  # every review's first decision at most this long after its submission
    # Authors (lab/author_traffic.py): the reviews are spread over this many authors (None: one
    # per REVIEWS_PER_AUTHOR reviews; 0: no author traffic), a share of their texts is an insult
    # (rejected: strikes, ladders climbed concurrently), and the authors meet moderators, appeals
    # and expiry runs at these rates.
    authors: int | None = None
    author_reject_rate: float = 0.3
    moderator_rate: float = 0.3
    stale_rate: float = 0.2
    override_rate: float = 0.2
    account_appeal_rate: float = 0.5
    sweep_ahead_days: float = 10.0
    lapse_rate: float = 0.005
    # Notices (lab/notice_traffic.py): a share of the reviews gets DSA notices and trusted
    # flaggers' reports a few seconds after its submission, with a share of those bursts carrying
    # the review's decision by a moderator or a reprocess.
    notice_rate: float = 0.1
    notice_decide_rate: float = 0.5
    notice_reprocess_rate: float = 0.3
    # Statements of reasons (lab/transparency_traffic.py): sent to a fake Transparency Database
    # through the run, with its outages and 5xx answers (tdb_faults); every one checked at the end.
    statements: bool = True
    tdb_faults: bool = True

    @property
    def author_count(self) -> int:
        return max(1, self.reviews // REVIEWS_PER_AUTHOR) if self.authors is None else self.authors


@dataclass
class LabReport:
    figures: dict = field(default_factory=dict)
    violations: list = field(default_factory=list)
    unfinished: list = field(default_factory=list)
    erased_found: set = field(default_factory=set)  # columns still holding an erased content
    late: list = field(default_factory=list)  # reviews first decided later than the lab's bound

    @property
    def ok(self) -> bool:
        return not self.violations and not self.unfinished and not self.erased_found and not self.late


def database_url() -> str:
    """The configured database, as a URL for child processes (TCP host or unix socket dir)."""
    db = connection.settings_dict
    host, port = server_address(db)
    credentials = f"{db['USER']}:{db['PASSWORD'] or ''}"
    if host.startswith("/"):
        return f"postgresql://{credentials}@/{db['NAME']}?host={host}&port={port}"
    return f"postgresql://{credentials}@{host}:{port}/{db['NAME']}"


def where_found(words) -> set[str]:
    """Every text, varchar and JSON column of the database holding one of `words`, as written or
    JSON-escaped: after an erasure, there must be none (docs/design.md, invariant 16)."""
    forms = {form for word in words if word for form in (word, json.dumps(word)[1:-1])}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND data_type IN ('text', 'character varying', 'json', 'jsonb')"
        )
        found = set()
        for table, column in cursor.fetchall():
            for form in forms:
                cursor.execute(f'SELECT 1 FROM "{table}" WHERE strpos("{column}"::text, %s) > 0 LIMIT 1', [form])
                if cursor.fetchone():
                    found.add(f"{table}.{column}")
                    break
    return found


def first_decision_latencies(review_ids: list) -> dict:
    """Seconds from each review's submission to its first decision (its first logged transition
    to a final status); reviews never decided are left out (they are `unfinished`)."""
    rows = ReviewTransition.objects.filter(review_id__in=review_ids, to_status__in=FINAL_STATUSES).values(
        "review_id").annotate(first=Min("created_at")).values_list("review_id", "first", "review__created_at")
    return {pk: (first - submitted).total_seconds() for pk, first, submitted in rows}


def percentile(ordered: list, q: float) -> float:
    """The q-quantile of an ascending list (nearest rank)."""
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


@contextmanager
def job_queues(q_name: str):
    """While inside, what this process enqueues (the lab's reprocesses, its moderators'
    notifications) goes on the job queues named `q_name`, the run's, which its clusters consume.
    django-q2 also signs each task with the queue's name (`Conf.PREFIX`, read at import): a task
    signed with another is refused by the cluster, and the job lost until the sweeper's requeue."""
    from django_q.conf import Conf

    notify = f"{q_name}-notify"
    alt = {notify: next(iter(settings.Q_CLUSTER["ALT_CLUSTERS"].values()))}
    with override_settings(Q_CLUSTER={**settings.Q_CLUSTER, "name": q_name, "ALT_CLUSTERS": alt},
                           NOTIFY_CLUSTER=notify), mock.patch.object(Conf, "PREFIX", q_name):
        yield


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What the lab's processes print (their tracebacks above all) goes to files here, so that an
# answer the lab did not expect (a 500) can be explained: see process_errors.
LOG_DIR = Path(tempfile.gettempdir()) / f"race-lab-logs-{os.getpid()}"


def spawn(env: dict, *args: str, cwd=None, python: str | None = None) -> subprocess.Popen:
    """`python <args>` in the project directory (or `cwd`, another checkout of it, run by `python`:
    its own virtualenv's, bench.checkout), in a session of its own (stopped as a group). Its output
    goes to a file of its own in LOG_DIR."""
    LOG_DIR.mkdir(exist_ok=True)
    with open(LOG_DIR / f"{time.monotonic_ns()}-{'-'.join(args)[:60].replace('/', '_')}.log", "ab") as log:
        return start([python or sys.executable, *args], env, cwd=cwd or settings.BASE_DIR, stdout=log,
                     stderr=subprocess.STDOUT)


def process_errors(limit_chars: int = 6000) -> str:
    """The last error each lab process logged, with its traceback (empty if none did). The lines
    are JSON without DEBUG (LOG_FORMAT), plain text with it; a crash prints a bare traceback."""
    found = []
    for path in sorted(LOG_DIR.glob("*.log")) if LOG_DIR.exists() else ():
        lines = path.read_text(errors="replace").splitlines()
        starts = [i for i, line in enumerate(lines)
                  if line.startswith("Traceback") or '"level": "ERROR"' in line or " ERROR " in line]
        if starts:
            found.append(f"== {path.name}\n" + "\n".join(lines[starts[-1]:])[:limit_chars])
    return "\n".join(found)


def stop(processes) -> None:
    """SIGTERM each process's leader (or its group, when the leader has exited already: a cluster
    master killed leaves its workers running), then SIGKILL what is left of the group 20 s later."""
    stop_groups(dict(enumerate(processes)), grace_s=20)


def start_platform(env: dict, port: int, *, web_workers: int, clusters: int, prefix: tuple = (),
                   gunicorn_args: tuple = (), wsgi_app: str | None = None, cwd=None,
                   python: str | None = None) -> dict[str, subprocess.Popen]:
    """The web tier on `port` (see start_web) and `clusters` django-q2 clusters, each `python
    [prefix] ...` run in `cwd` (default: this checkout; `python` as spawn's); returns once the web
    server answers. If it never does, everything started is stopped again (a caller that gets the
    exception has nothing to stop)."""
    processes = {"web": start_web(env, port, web_workers=web_workers, prefix=prefix, gunicorn_args=gunicorn_args,
                                  wsgi_app=wsgi_app, cwd=cwd, python=python)}
    try:
        for i in range(clusters):
            processes[f"cluster-{i}"] = spawn(env, *prefix, "manage.py", "qcluster", cwd=cwd, python=python)
        if clusters:  # notifications have a cluster of their own, never the moderation workers
            processes["notification-cluster"] = spawn(notification_cluster_env(env), *prefix, "manage.py", "qcluster",
                                                      cwd=cwd, python=python)
        wait_until_serving(port)
    except BaseException:
        stop(processes.values())
        raise
    return processes


def start_web(env: dict, port: int, *, web_workers: int, prefix: tuple = (), gunicorn_args: tuple = (),
              wsgi_app: str | None = None, cwd=None, python: str | None = None) -> subprocess.Popen:
    """The production web tier, as `make run` and the systemd unit start it (web_command); or,
    given `wsgi_app`, gunicorn serving it: the benchmarks give bench.wsgi, the project's
    application with their framework ceiling beside it, and keep the server their figures were
    measured with."""
    if wsgi_app is None:
        return spawn(env, *prefix, *web_command("127.0.0.1", port, workers=web_workers)[1:], cwd=cwd, python=python)
    return spawn(env, *prefix, "-m", "gunicorn", wsgi_app, "--bind", f"127.0.0.1:{port}",
                 "--workers", str(web_workers), *gunicorn_args, cwd=cwd, python=python)


def cluster_tree(cluster: subprocess.Popen) -> list:
    """Every process of a cluster (psutil): its master, the sentinel, the pusher, the monitor and
    the workers."""
    import psutil

    try:
        master = psutil.Process(cluster.pid)
        return [master, *master.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def role_of(process, cluster: subprocess.Popen) -> str:
    """A cluster process's role, by its title (setproctitle) and place in the tree."""
    if process.pid == cluster.pid:
        return "master"
    try:
        title = " ".join(process.cmdline()).strip()
    except Exception:  # noqa: BLE001 - gone already: only the figures lose its name
        return "gone"
    for role in ("sentinel", "pusher", "monitor"):
        if role in title:
            return role
    return "busy worker" if " processing " in title else "worker"


def cluster_workers(cluster: subprocess.Popen) -> list:
    """A cluster's working processes (psutil): the sentinel's children, i.e. the pusher, the
    monitor and the workers, which django-q2 reincarnates. Empty once the cluster is gone."""
    import psutil

    try:
        descendants = psutil.Process(cluster.pid).children(recursive=True)
        return [p for p in descendants if p.ppid() != cluster.pid]
    except psutil.NoSuchProcess:
        return []


def wait_until_serving(port: int, timeout_s: float = 60) -> None:
    """Wait for the web server on `port` to answer /healthz."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError("the web server did not start") from None
            time.sleep(0.2)


@dataclass
class WebOutage:
    """The reviews not final when the web tier went down, and when it was down (wall clock)."""

    affected: list
    began: float = 0.0
    ended: float = 0.0

    def figures(self) -> dict:
        rows = ContentReview.objects.filter(pk__in=self.affected)
        last = rows.aggregate(last=Max("completed_at"))["last"]
        final = rows.filter(status__in=FINAL_STATUSES).count()
        after_end = max(last.timestamp() - self.ended, 0.0) if last else None
        return {
            "web outage (s)": round(self.ended - self.began, 1),
            "reviews not final at the outage": len(self.affected),
            "  final since": f"{final} of {len(self.affected)}",
            "  recovered by asking the provider": ReviewTransition.objects.filter(
                review_id__in=self.affected, cause=Cause.PROVIDER_RESULT).count(),
            "  superseded": ReviewTransition.objects.filter(
                review_id__in=self.affected, cause=Cause.RETRY_RECONCILE).count(),
            "recovery: all final, s after the web tier returned": round(after_end, 1) if after_end is not None else "-",
            "recovery: all final, s after the outage began": round(last.timestamp() - self.began, 1) if last else "-",
        }


class RaceLab:
    def __init__(self, config: LabConfig):
        self.config = config
        self.rng = random.Random(config.seed)
        self.processes: dict[str, subprocess.Popen] = {}
        self.kills = self.stopped = self.restarts = 0
        self.killed_roles: Counter = Counter()
        self.env: dict = {}
        self.pruned: dict[str, int] = {}
        self.began = timezone.now()  # reset by run(); callbacks received since are this run's

    def run(self) -> LabReport:
        from moderation.services import api_client_create

        started, self.began = time.monotonic(), timezone.now()
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        c = self.config
        simulator = ProviderSimulator(secret=secret, api_key="lab-key", faults=Faults(
            delay_ms=50, timeout_rate=c.timeout_rate, hold_s=4.0, error_rate=c.error_rate,
            duplicate_rate=c.duplicate_rate, late_rate=c.late_rate, late_ms=3000, reorder=True, seed=c.seed,
        )).start()
        port = free_port()
        bouncer = PgBouncer.for_database(connection.settings_dict).start() if c.pgbouncer else None
        env = {
            **os.environ, "MODERATION_PROVIDER": "webhook",
            "DATABASE_URL": bouncer.url(connection.settings_dict["NAME"]) if bouncer else database_url(),
            "DB_POOL_MODE": "transaction" if bouncer else "",
            "PROVIDER_URL": simulator.url, "PROVIDER_API_KEY": "lab-key", "PROVIDER_WEBHOOK_SECRET": secret,
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}", "Q_NAME": f"lab-{uuid.uuid4().hex[:8]}",
            "Q_WORKERS": "2", "NOTIFY_WORKERS": "4", "Q_TASK_TIMEOUT_S": "15", "PROVIDER_TIMEOUT_S": "2", "PROVIDER_CONNECT_TIMEOUT_S": "1",
            "MODERATION_RETRY_BACKOFF_S": "1", "MODERATION_RETRY_BACKOFF_MAX_S": "5", "MODERATION_MAX_ATTEMPTS": "4",
            # The silence deadline follows from the provider's latency (late callbacks come 3 s
            # late): reconcile asks the simulator before superseding anything.
            "PROVIDER_EXPECTED_LATENCY_S": "2", "WEBHOOK_ALLOW_PRIVATE": "1",
            "BREAKER_MIN_CALLS": "1000000", "LOG_LEVEL": "WARNING",
            "THROTTLE_CLIENT_RATE": "100000/min", "THROTTLE_CALLBACK_RATE": "100000/min",
            "MODERATION_BATCH_SIZE": str(c.batch_size or settings.MODERATION_BATCH_SIZE),
        }
        self.env = env
        authors, acting, notices, noticing = None, [], None, []
        statements = TransparencyTraffic(seed=c.seed, faults=c.tdb_faults) if c.statements else None
        if statements:
            env.update(statements.env())
        with job_queues(env["Q_NAME"]):  # what the lab's own threads enqueue goes to its clusters
            try:
                if c.hostile_rate:
                    self._publish_lab_rules()
                self.processes = start_platform(env, port, web_workers=c.web_workers, clusters=c.clusters)
                client, token = api_client_create(name=f"race-lab-{uuid.uuid4().hex[:8]}")
                authors = AuthorTraffic(
                    client, moderator_rate=c.moderator_rate, stale_rate=c.stale_rate, override_rate=c.override_rate,
                    account_appeal_rate=c.account_appeal_rate, sweep_ahead_days=c.sweep_ahead_days,
                    lapse_rate=c.lapse_rate, seed=c.seed,
                ) if c.author_count else None
                if authors:
                    acting = authors.start()  # from the first submission on
                if c.notice_rate:
                    notices = NoticeTraffic(f"http://127.0.0.1:{port}", token, client, notice_rate=c.notice_rate,
                                            decide_rate=c.notice_decide_rate, reprocess_rate=c.notice_reprocess_rate,
                                            seed=c.seed)
                    noticing = notices.start()  # from the first submission on
                if statements:
                    statements.start()
                review_ids, erased = self._submit(port, token)
                killer = threading.Thread(target=self._kill_workers, daemon=True)
                killer.start()
                users = UserTraffic(f"http://127.0.0.1:{port}", token, review_ids, c.report_rate, c.appeal_rate, c.seed)
                contesting = threading.Thread(target=users.run, daemon=True)
                contesting.start()
                outage = self._web_outage(env, port, review_ids) if c.web_outage_s > 0 else None
                unfinished = self._quiesce(review_ids, bouncer)
                users.done.set()
                contesting.join(timeout=120)
                killer.join(timeout=1)
                if notices:
                    notices.done.set()  # its scheduled bursts end, then what they reprocessed is decided
                    for thread in noticing:
                        thread.join(timeout=120)
                    if notices.counts["reprocessed"]:
                        unfinished = self._quiesce(review_ids, bouncer)
                if authors:
                    authors.done.set()  # their last actions are taken before the statements are counted
                    for thread in acting:
                        thread.join(timeout=120)
                if statements:
                    statements.finish(review_ids)
            finally:
                if statements:
                    statements.stop()
                if notices:
                    notices.done.set()
                if authors:
                    authors.done.set()  # their last steps end before the platform stops
                for thread in acting:
                    thread.join(timeout=120)
                stop(self.processes.values())
                simulator.stop()
                if bouncer:
                    bouncer.stop()
        if c.prune:
            self.pruned = prune(for_real=True, now=timezone.now() + timedelta(days=400))
        latencies = first_decision_latencies(review_ids)
        report = LabReport(violations=violations(review_ids) + users.unexpected + (authors.unexpected if authors else [])
                           + (notices.unexpected if notices else []) + (statements.unexpected if statements else []),
                           unfinished=unfinished,
                           erased_found=where_found(erased) if erased else set(),
                           late=[pk for pk, s in latencies.items() if s > c.decision_bound_s])
        report.figures = self._figures(review_ids, time.monotonic() - started, simulator, report, bouncer, latencies)
        report.figures = {**report.figures, **users.figures(), **(authors.figures() if authors else {}),
                          **(notices.figures() if notices else {}), **(statements.figures() if statements else {})}
        if outage:
            report.figures.update(outage.figures())
        return report

    @staticmethod
    def _publish_lab_rules() -> None:
        """Publish the lab's watched terms (LAB_TERM_LISTS) over the active policy's, once."""
        from moderation.services import policy_publish_change

        def change(active):
            rules = {(r["category"], r["action"], r["language"]): r for r in active.term_lists}
            rules.update({(r["category"], r["action"], r["language"]): r for r in LAB_TERM_LISTS})
            return {"term_lists": list(rules.values())}

        policy_publish_change(change, notes="race lab: hostile traffic rules")

    def _web_outage(self, env: dict, port: int, review_ids: list) -> WebOutage:
        """Stop the web tier (its whole process group, at once) for web_outage_s seconds, then
        start it again: callbacks sent meanwhile are refused until the simulator gives up."""
        time.sleep(0.5)  # callbacks are flowing
        outage = WebOutage(affected=list(
            ContentReview.objects.filter(pk__in=review_ids).exclude(status__in=FINAL_STATUSES).values_list("pk", flat=True)
        ))
        outage.began = time.time()
        signal_group(self.processes["web"], signal.SIGKILL)
        self.processes["web"].wait()
        time.sleep(self.config.web_outage_s)
        self.processes["web"] = start_web(env, port, web_workers=self.config.web_workers)
        wait_until_serving(port)
        outage.ended = time.time()
        return outage

    def _submit(self, port: int, token: str) -> tuple[list, list[str]]:
        """Submit the reviews, 8 at a time; the client erases `erase` of them right after
        submitting each (so mostly mid-moderation). Returns the review ids and the erased texts,
        to be looked for in every column afterwards."""
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        run = uuid.uuid4().hex[:6]  # texts unique to this run: an erased one is looked for across the database
        texts = [hostile_text(self.rng) if self.rng.random() < self.config.hostile_rate
                 else f"{self._text()} (lab {run}-{i})" for i in range(self.config.reviews)]
        authors = self.config.author_count
        written_by = [f"lab-{run}-author-{self.rng.randrange(authors)}" if authors else None
                      for _ in range(self.config.reviews)]
        # Erased texts are looked for across the database afterwards: only the run's unique ones.
        unique = [i for i, text in enumerate(texts) if f"(lab {run}-{i})" in text]
        erase = set(self.rng.sample(unique, min(self.config.erase, len(unique))))

        def one(i: int):
            body = {"external_id": f"lab-{run}-{i}", "content_type": "text", "text": texts[i],
                    **({"author_id": written_by[i]} if written_by[i] else {})}
            response = http.post("/api/v1/reviews/", json=body)
            if response.status_code != 201:
                raise RuntimeError(f"submitting {texts[i][:40]!r} failed: {response.status_code} {response.text[:200]}\n"
                                   f"{process_errors()}")
            review_id = response.json()["id"]
            if i in erase:
                response = http.delete(f"/api/v1/reviews/{review_id}/content", params={"reason": "race lab"})
                if response.status_code != 200:
                    raise RuntimeError(f"erasing {review_id} failed: {response.status_code} {response.text[:200]}\n"
                                       f"{process_errors()}")
            return review_id

        with ThreadPoolExecutor(max_workers=8) as pool:
            review_ids = list(pool.map(one, range(self.config.reviews)))
        self.stopped = ContentErasure.objects.filter(review_id__in=review_ids, stopped_moderation=True).count()
        return review_ids, [texts[i] for i in sorted(erase)]

    def _text(self) -> str:
        """One of TEXTS; with authors, an insult for a share `author_reject_rate` of them."""
        if not self.config.author_count:
            return self.rng.choice(TEXTS)
        return self.rng.choice(INSULTS if self.rng.random() < self.config.author_reject_rate else POLITE)

    def _kill_workers(self) -> None:
        clusters = [n for n in self.processes if "cluster" in n] if self.config.kill_any else [
            n for n in self.processes if n.startswith("cluster")]
        for _ in range(self.config.kill_workers):
            time.sleep(self.rng.uniform(0.5, 5.0))
            name = self.rng.choice(clusters)
            victims = cluster_tree(self.processes[name]) if self.config.kill_any else cluster_workers(self.processes[name])
            if victims:
                victim = self.rng.choice(victims)
                role = role_of(victim, self.processes[name])  # (read while it is alive)
                os.kill(victim.pid, signal.SIGKILL)
                self.kills += 1
                self.killed_roles[role] += 1
            if self.config.kill_any:
                self._restart_dead_clusters()

    def _restart_dead_clusters(self) -> None:
        """A cluster whose master exited (it was killed, or its sentinel was: the master then
        returns) is stopped as a group (its orphans too) and started again."""
        time.sleep(2)  # a killed sentinel's master notices and exits
        for name, process in list(self.processes.items()):
            if "cluster" in name and process.poll() is not None:
                stop_groups({name: process}, grace_s=5)
                env = notification_cluster_env(self.env) if name == "notification-cluster" else self.env
                self.processes[name] = spawn(env, "manage.py", "qcluster")
                self.restarts += 1

    def _quiesce(self, review_ids: list, bouncer=None) -> list:
        # This run's callbacks only: a callback an earlier run left unprocessed (parked after its
        # failures) must not hold this one until its timeout.
        unprocessed = ProviderCallback.objects.filter(processed_at__isnull=True, received_at__gte=self.began)
        deadline = time.monotonic() + self.config.quiesce_timeout_s
        while time.monotonic() < deadline:
            if bouncer:
                bouncer.sample(connection.settings_dict["NAME"])
            open_reviews = ContentReview.objects.filter(pk__in=review_ids).exclude(status__in=FINAL_STATUSES).count()
            waiting = unprocessed.count()
            if not open_reviews and not waiting:
                time.sleep(4)  # late callbacks still on their way
                if not unprocessed.exists():
                    return []
            time.sleep(1)
        return [str(pk) for pk in ContentReview.objects.filter(pk__in=review_ids).exclude(status__in=FINAL_STATUSES)
                .values_list("pk", flat=True)]

    @staticmethod
    def _batched(review_ids: list) -> int:
        """Reviews whose claim shared its job with another review's: claimed by a batch."""
        claims = ReviewTransition.objects.filter(review_id__in=review_ids, cause=Cause.JOB_STARTED)
        jobs = claims.values("job_id").annotate(n=Count("id")).filter(n__gt=1).values("job_id")
        return claims.filter(job_id__in=jobs).count()

    def _figures(self, review_ids: list, elapsed: float, simulator: ProviderSimulator, report: LabReport, bouncer,
                 latencies: dict) -> dict:
        callbacks = ProviderCallback.objects.filter(idempotency_key__in=ProviderAttempt.objects.filter(
            request__review_id__in=review_ids).values("request__idempotency_key"))
        events = PipelineEvent.objects.filter(review_id__in=review_ids)
        statuses = dict(ContentReview.objects.filter(pk__in=review_ids).values_list("status").annotate(
            n=Count("id")).order_by())
        return {
            "reviews": len(review_ids),
            **{f"  {status}": n for status, n in sorted(statuses.items())},
            "provider attempts": ProviderAttempt.objects.filter(request__review_id__in=review_ids).count(),
            "callbacks stored": callbacks.count(),
            "duplicate deliveries": callbacks.aggregate(n=Sum("duplicate_count"))["n"] or 0,
            "stale results": callbacks.filter(outcome=ResultOutcome.STALE).count(),
            "lost claims": events.filter(kind=EventKind.CLAIM_LOST).count(),
            "batch size / reviews claimed in batches of 2+": f"{self.config.batch_size or settings.MODERATION_BATCH_SIZE} / "
                                                           f"{self._batched(review_ids)}",
            "worker kills": self.kills,
            "killed, by role": dict(self.killed_roles) or "-",
            "clusters restarted": self.restarts,
            "simulator 5xx / held": f"{simulator.stats['errors_5xx']} / {simulator.stats['held']}",
            **({"erased (of which mid-moderation)": f"{self.config.erase} ({self.stopped})",
                "columns still holding an erased text": len(report.erased_found)} if self.config.erase else {}),
            **({"pruned (a year on)": ", ".join(f"{n} {name}" for name, n in self.pruned.items())}
               if self.config.prune else {}),
            **({"pgbouncer peak clients / server conns / waiting":
                " / ".join(str(bouncer.peaks[k]) for k in ("cl_active", "sv_active", "cl_waiting"))} if bouncer else {}),
            "hostile texts": ContentReview.objects.filter(
                pk__in=review_ids, content__text__in=HOSTILE_TEXTS).count() + ContentReview.objects.filter(
                pk__in=review_ids, content__text__startswith="kill the process and kill it ").count(),
            "first decision, s after submission: p50 / p95 / max": " / ".join(
                str(round(percentile(sorted(latencies.values()), q), 1)) for q in (0.5, 0.95, 1.0)) if latencies else "-",
            f"reviews first decided later than {self.config.decision_bound_s:g} s": len(report.late),
            "violations": len(report.violations),
            "seconds": round(elapsed, 1),
        }
