"""Any one process of a cluster killed, the platform as `make run` starts it goes on moderating.

The platform runs as a user starts it (`manage.py run_platform`: the web server, the moderation
cluster and the notification cluster, the local model, the ORM broker). In turn, an idle worker,
a busy worker, the monitor, the pusher and a notification worker are killed with SIGKILL while
reviews arrive. After each kill every review submitted around it is final within 60 s, and at
the end every decision has reached the client's webhook and every invariant holds
(moderation/management/cluster.py; docs/operations.md, "When a process dies").

Before the cluster rebuilt itself, the idle round alone stalled it: an idle worker waits for a
task holding the task queue's reader lock, and its replacement waited on that lock for good.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import httpx
import psutil
import pytest
from django.conf import settings

from lab.simulator import WebhookReceiver
from moderation.invariants import pipeline_violations, review_violations
from moderation.models import FINAL_STATUSES, ContentReview, ProviderAttempt
from moderation.services import api_client_create
from tests.e2e.conftest import run_platform

pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

FINAL_WITHIN_S = 60
# Long enough that a batch of them keeps a worker busy for a moment: the busy round catches one.
SLOW_TEXT = "thank you for the long and careful explanation of the plan " * 1500


def cluster_processes(platform, *, notification: bool) -> list[psutil.Process]:
    """The processes under the moderation (or the notification) cluster's sentinel, titled by
    django-q2 with their role (`... idle`, `... processing ...`, `... monitor`, `... pusher`); the
    sentinel's title names its queue (`qcluster sentinel [<queue>]`)."""
    for master in psutil.Process(platform.pid).children():
        for sentinel in master.children():
            name = title(sentinel)
            if name.startswith("qcluster sentinel [") and name.endswith("-notify]") == notification:
                return sentinel.children()
    return []


def title(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline()).strip()  # (setproctitle pads the title with blanks)
    except psutil.NoSuchProcess:
        return ""


def wait_for(predicate, timeout_s: float, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every_s)
    return predicate()


def submit(http: httpx.Client, label: str, count: int, text: str = "see you at the meeting tomorrow") -> list[str]:
    ids = []
    for i in range(count):
        answer = http.post("/api/v1/reviews/", json={
            "external_id": f"{label}-{i}-{uuid.uuid4().hex[:6]}", "content_type": "text", "text": text})
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    return ids


def not_final(ids: list[str]) -> list[str]:
    return [str(pk) for pk in ContentReview.objects.filter(pk__in=ids).exclude(status__in=FINAL_STATUSES)
            .values_list("pk", flat=True)]


def story(ids: list[str]) -> str:
    """What became of reviews that are not final: for the failure message."""
    from audit.models import PipelineEvent

    lines = []
    for review in ContentReview.objects.filter(pk__in=ids).exclude(status__in=FINAL_STATUSES):
        events = PipelineEvent.objects.filter(review_id=review.pk).order_by("created_at").values_list("kind", "detail")
        attempts = ProviderAttempt.objects.filter(request__review=review).values_list(
            "request_id", "attempt_no", "worker_id", "outcome", "started_at", "finished_at", "error")
        lines.append(f"{review.pk} {review.status} worker {review.worker_id}: {list(events)} {list(attempts)}")
    return "\n".join(lines)


def notifications_of(ids) -> list:
    from moderation.models import DecisionNotification

    from django_q.models import OrmQ

    rows = list(DecisionNotification.objects.filter(review_id__in=ids).values_list(
        "pk", "status", "attempts", "locked_until", "last_enqueued_at", "last_error")[:5])
    from audit.models import ReviewTransition

    jobs = [(job.key, job.lock, job.task().get("kwargs")) for job in OrmQ.objects.all()]
    moves = list(ReviewTransition.objects.filter(review__notifications__pk__in=[r[0] for r in rows]).values_list(
        "review_id", "to_status", "actor_id", "created_at"))
    return [rows, jobs, moves]


def kill(process: psutil.Process) -> None:
    os.kill(process.pid, signal.SIGKILL)


def idle_workers(platform) -> list[psutil.Process]:
    return [p for p in cluster_processes(platform, notification=False) if title(p).endswith(" idle")]


def test_each_cluster_process_killed_in_turn_leaves_every_review_final_within_a_minute_and_nothing_lost():
    receiver = WebhookReceiver()
    _, token = api_client_create(name=f"chaos-{uuid.uuid4().hex[:6]}", webhook_url=receiver.url)
    submitted: list[str] = []
    with run_platform(WEBHOOK_ALLOW_PRIVATE="1", Q_WORKERS="2", NOTIFY_WORKERS="2") as (platform, port):
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                            timeout=30)
        assert wait_for(lambda: len(idle_workers(platform)) == 2, 60), "the moderation cluster did not start"
        assert wait_for(lambda: cluster_processes(platform, notification=True), 60)

        def round_(name: str, victims) -> None:
            before = submit(http, f"{name}-before", 5)
            killed = victims()
            assert killed, f"no {name} to kill"
            for process in killed:
                kill(process)
            after = submit(http, f"{name}-after", 5)
            ids = before + after
            left = wait_for(lambda: not not_final(ids) or None, FINAL_WITHIN_S, every_s=0.2)
            assert left, f"after killing the {name}, still not final after {FINAL_WITHIN_S} s:\n{story(ids)}"
            submitted.extend(ids)

        # Every idle worker: one of them held the task queue's reader lock.
        round_("idle worker", lambda: wait_for(lambda: idle_workers(platform), 10))

        def busy_worker():
            slow = submit(http, "slow", 4, text=SLOW_TEXT)
            submitted.extend(slow)
            busy = wait_for(lambda: [p for p in cluster_processes(platform, notification=False)
                                     if " processing " in title(p)], 30, every_s=0.005)
            return busy[:1]

        round_("busy worker", busy_worker)
        def role(name: str, *, notification: bool = False):
            # (A process just started by a rebuild takes its title a moment later.)
            return lambda: wait_for(lambda: [p for p in cluster_processes(platform, notification=notification)
                                             if title(p).endswith(f" {name}")][:1], 10)

        round_("monitor", role("monitor"))
        round_("pusher", role("pusher"))
        round_("notification worker", role("idle", notification=True))

        # Nothing lost: every decision reaches the client, once the notification cluster is back.
        def delivered() -> set[str]:
            return {json.loads(body)["data"]["review_id"] for _, body in list(receiver.received)
                    if json.loads(body).get("type") == "review.decided"}

        # Mostly within seconds; a decision whose job went with a killed worker at the wrong moment
        # waits for the sweeper, which enqueues it again once the job queue's lease has passed.
        horizon = settings.Q_CLUSTER["retry"] + 2 * 60 * settings.MODERATION_SWEEP_EVERY_MIN
        assert wait_for(lambda: set(submitted) <= delivered(), horizon, every_s=0.5), (
            f"{len(set(submitted) - delivered())} of {len(submitted)} decisions never delivered: "
            f"{notifications_of(set(submitted) - delivered())}")
    receiver.stop()
    assert review_violations(submitted) == []
    assert pipeline_violations(submitted) == []
