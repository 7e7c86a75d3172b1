"""The instruments of issue 17 measure what they say: wrk sends exactly the requests asked for
and counts every answer, and the framework ceiling (bench/wsgi.py) writes what its path must
write at the least, under the same WSGI entry point as the project (docs/benchmarks.md)."""

from __future__ import annotations

import io
import json
import socketserver
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler

import pytest
from django.test import RequestFactory

from audit.models import ReviewTransition
from bench import common, wrk
from bench.wsgi import application
from callbacks.models import ProviderCallback
from moderation.invariants import violations
from moderation.models import Content, ContentReview, ReviewStatus



@pytest.fixture(scope="module")
def installed_wrk() -> str:
    """wrk, installed from Debian's package when missing, as the benchmarks do (bench/wrk.py)."""
    try:
        return wrk.ensure()
    except wrk.WrkUnavailable as exc:
        pytest.skip(str(exc))


class _Recorder(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """A loopback HTTP server that closes every connection after its answer, as gunicorn's sync
    workers do, and records each request body; a body containing `bad` is answered 400."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        self.bodies: list[bytes] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.bodies.append(body)
                self.send_response(400 if b"bad" in body else 201)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]


@pytest.fixture
def recorder():
    server = _Recorder()
    yield server
    server.shutdown()
    server.server_close()


def test_wrk_sends_each_prepared_request_once_and_counts_every_status(installed_wrk, recorder, tmp_path):
    bodies = [b"ok-%d" % i for i in range(45)] + [b"bad-%d" % i for i in range(5)]
    raw = [b"POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies]
    wrk.write_requests(raw, tmp_path / "requests")

    result = wrk.requests_file(recorder.port, tmp_path / "requests", connections=4, max_seconds=30)

    assert Counter(recorder.bodies) == Counter(bodies)  # each once: none lost, none repeated
    assert result.requests == 50 and result.statuses == Counter({201: 45, 400: 5})
    assert result.ok == 45 and result.non_2xx == 5 and result.describe_errors() == "5x400"
    assert 0 < result.seconds < 30 and 0 < result.p50_ms <= result.p99_ms


def test_wrk_submissions_have_unique_external_ids_and_stop_at_the_count(installed_wrk, recorder):
    result = wrk.submissions(recorder.port, "token", tag="run", count=60, texts=["hello", "there"], connections=4)

    ids = [json.loads(body)["external_id"] for body in recorder.bodies]
    assert result.requests == len(ids) == 60 and len(set(ids)) == 60
    assert all(i.startswith("run-") for i in ids) and result.rate > 0


def test_wrk_submissions_by_authors_name_a_new_author_every_n_of_a_connection(installed_wrk, recorder):
    wrk.submissions(recorder.port, "token", tag="run", count=40, texts=["hello"], connections=2, per_author=5)

    bodies = [json.loads(body) for body in recorder.bodies]
    by_author = Counter(body["author_id"] for body in bodies)
    # (wrk may build a request on a connection that it never sends: that connection's first
    # author gets one review fewer, and one more author gets the rest.)
    assert len(bodies) == 40 and max(by_author.values()) == 5 and Counter(by_author.values())[5] >= 6


def test_the_authors_row_is_judged_against_the_same_runs_e2e_without_them():
    from bench import report

    def e2e(path: str, rate: float) -> dict:
        return {"path": path, "rate": rate, "p99": 1000.0, "violations": [], "final": 3000, "reviews": 3000}

    for rate, verdict in ((91.0, "0.91 of it met"), (89.0, "0.89 of it missed")):
        text = report.table(["e2e orm", "e2e authors"], {("e2e orm", "after"): e2e("e2e orm", 100.0),
                                                        ("e2e authors", "after"): e2e("e2e authors", rate)},
                            have_now=True)
        row = next(line for line in text.splitlines() if line.strip().startswith("e2e authors"))
        assert f"within 10% of e2e orm (100.0): {verdict}" in row


def _call(request) -> tuple[str, dict]:
    answer = {}

    def start_response(status, headers):
        answer["status"] = status

    body = b"".join(application(request.environ, start_response))
    return answer["status"], json.loads(body or b"{}")


@pytest.mark.django_db(transaction=True)
def test_the_submission_ceiling_writes_the_content_and_a_pending_review(api_client):
    post = RequestFactory().post
    body = {"external_id": "c-1", "content_type": "text", "text": "hello"}

    status, answer = _call(post(f"/bench/ceiling/reviews/?client={api_client.pk}", body, content_type="application/json"))
    assert status.startswith("201")
    review = ContentReview.objects.get(pk=answer["id"])
    assert review.status == ReviewStatus.PENDING and review.content.external_id == "c-1"
    assert violations([review.pk]) == []

    status, _ = _call(post(f"/bench/ceiling/reviews/?client={api_client.pk}", body, content_type="application/json"))
    assert status.startswith("200") and Content.objects.filter(external_id="c-1").count() == 1

    status, answer = _call(post("/bench/ceiling/reviews/", body, content_type="application/json"))
    assert status.startswith("400") and "client" in answer["detail"]


@pytest.mark.django_db(transaction=True)
def test_the_callback_ceiling_runs_the_pgbench_transaction(api_client):
    (review_id, key), = common.seed_processing(api_client.pk, 1, "cb-")
    body = common.callback_body(key, f"sim-{review_id}")

    def deliver():
        request = RequestFactory().post("/bench/ceiling/callback/", body, content_type="application/json",
                                        headers={"webhook-id": "evt-1"})
        return _call(request)

    assert deliver() == ("200 OK", {"status": "applied"})
    assert deliver() == ("200 OK", {"status": "duplicate"})
    inbox = ProviderCallback.objects.get(provider="ceiling", provider_event_id="evt-1")
    assert inbox.duplicate_count == 1
    assert ReviewTransition.objects.filter(review_id=review_id, actor_id="ceiling").count() == 1
    assert ContentReview.objects.get(pk=review_id).status == ReviewStatus.PROCESSING  # the ceiling never decides


@pytest.mark.django_db
def test_every_other_path_is_the_projects_application():
    request = RequestFactory().get("/healthz")
    request.environ["wsgi.input"] = io.BytesIO(b"")
    status, answer = _call(request)
    assert status.startswith("200")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("script", ["submit", "e2e"])
def test_the_pgbench_references_write_reviews_the_invariant_checker_accepts(api_client, script):
    """A reference that skipped a row the invariants require would flatter it: each pgbench
    transaction must leave a review as valid as the platform's (pending; decided)."""
    from bench import e2e, submit
    from lab.race_lab import database_url
    from moderation.services import policy_active

    common.pgbench(database_url(), {"submit": submit.PGBENCH_SCRIPT, "e2e": e2e.PGBENCH_SCRIPT}[script], clients=1,
                   seconds=0, transactions=3, defines={"client": api_client.pk, "policy": policy_active().pk})

    reviews = list(ContentReview.objects.filter(client=api_client).values_list("pk", "status"))
    assert len(reviews) == 3
    assert {status for _, status in reviews} == {"pending" if script == "submit" else "approved"}
    assert violations([pk for pk, _ in reviews]) == []


def test_without_the_tag_the_table_shows_the_recorded_figures_marked_as_such():
    from bench import checkout, report

    before, why = checkout.now(ref="no-such-tag-for-the-bench")
    assert before is None and "no-such-tag-for-the-bench" in why

    after = {"path": "submissions", "rate": 420.0, "p99": 80.0, "violations": [], "rss": {"web worker": 90 * 2**20},
             "reference": {"rate": 1000.0}, "ceiling": {"rate": 600.0}}
    text = report.table(["submissions"], {("submissions", "after"): after}, have_now=False)
    row = next(line for line in text.splitlines() if line.strip().startswith("submissions"))
    assert "113 (recorded)" in row and "420.0" in row and ">= 400, p99 < 100 ms met" in row
    assert "1,000 (0.42)" in row and "600.0 (0.70)" in row
    assert "<= 100 MiB met" in next(line for line in text.splitlines() if "web worker" in line)


def test_without_the_tag_the_commit_it_names_is_measured(monkeypatch):
    from bench import checkout

    if not checkout._git("rev-parse", "--verify", "--quiet", f"{checkout.NOW_COMMIT}^{{commit}}"):
        pytest.skip("a shallow clone: the commit before issue 17 is not in this history")
    monkeypatch.setattr(checkout, "NOW_TAG", "no-such-tag-for-the-bench")

    before, why = checkout.now(ref="no-such-tag-for-the-bench")

    assert why == "" and before is not None and checkout.NOW_COMMIT.startswith(before.commit)
    assert (before.path / "manage.py").exists()


def test_the_footprint_rows_judge_the_worse_of_idle_and_load_against_the_goal():
    from bench import report

    mib = 2**20
    after = {"path": "footprint", "rate": 80.0, "violations": [], "idle": {"rss": 1500 * mib, "pss": 480 * mib},
             "peak": {"rss": 1520 * mib, "pss": 810 * mib}}
    text = report.table(["footprint"], {("footprint", "after"): after}, have_now=False)
    rss = next(line for line in text.splitlines() if "RSS summed" in line)
    pss = next(line for line in text.splitlines() if "PSS summed" in line)
    assert "1500 / 1520 MiB" in rss and "<= 800 MiB missed" in rss
    assert "480 / 810 MiB" in pss and "<= 800 MiB missed" in pss  # the load's peak went over
    after["peak"]["pss"] = 520 * mib
    text = report.table(["footprint"], {("footprint", "after"): after}, have_now=False)
    assert "<= 800 MiB met" in next(line for line in text.splitlines() if "PSS summed" in line)
    assert "80.0" in next(line for line in text.splitlines() if "reviews/s" in line)
    now = {**after, "rate": 100.0}
    text = report.table(["footprint"], {("footprint", "after"): after, ("footprint", "now"): now}, have_now=True)
    assert "no loss: 0.80 of now missed" in next(line for line in text.splitlines() if "reviews/s" in line)


def test_the_footprint_reads_a_whole_process_tree_and_pss_counts_shared_pages_once():
    """A parent that fills 64 MiB and forks three children that only read it: RSS summed
    counts the block in all four, PSS about once."""
    import subprocess
    import sys
    import textwrap

    from bench import footprint

    program = textwrap.dedent("""
        import os, sys, time
        block = bytearray(64 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        for _ in range(3):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
        print("ready", flush=True)
        time.sleep(30)
    """)
    parent = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        found = footprint.snapshot(parent.pid)
    finally:
        for child in footprint.tree(parent.pid)[1:]:
            child.kill()
        parent.kill()
        parent.wait()
    mib = 2**20
    assert found["processes"] == 4
    assert found["rss"] >= 4 * 64 * mib
    assert 64 * mib <= found["pss"] < 2 * 64 * mib
