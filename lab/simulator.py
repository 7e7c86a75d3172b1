"""A provider simulator: a real HTTP server speaking the `webhook` protocol (docs/design.md), moderating
text with the local model and images by a score drawn from their bytes (or a set one), calling
back with Standard Webhooks signatures, with the faults that break ordinary pipelines: latency,
answers held past the client's timeout (work still done), 5xx, duplicate, late and reordered
callbacks. It also answers the OpenAI-compatible form (`{"model", "input"}`, synchronous: the
`openai` provider's), text or an image as a base64 data URL, with the same outages and holds.

It remembers Idempotency-Keys as a real provider does: the same key gets the same provider id
and one callback stream; a request answered with a 5xx was not processed and is not remembered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import itertools
import json
import logging
import random
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import httpx

from moderation.signing import sign
from moderation.providers import ModerationInput, ModerationResult, UnsupportedContent
from moderation.providers.local import LocalProvider

logger = logging.getLogger(__name__)


IMAGE_MODEL = "simulated-image-1"
IMAGE_CATEGORY = "sexual"  # one of omni-moderation's image categories


def image_score(raw: bytes) -> float:
    """A score in [0, 1] drawn from an image's bytes (the first 16 bits of their sha256)."""
    return round(int.from_bytes(hashlib.sha256(raw).digest()[:2], "big") / 0xFFFF, 4)


def image_result(raw: bytes, score: float | None = None) -> ModerationResult:
    score = image_score(raw) if score is None else score
    return ModerationResult(model=IMAGE_MODEL, flagged=score >= 0.5, categories={IMAGE_CATEGORY: score >= 0.5},
                            category_scores={IMAGE_CATEGORY: score})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a worker stopped with a pooled connection open) is not an
        error worth a traceback; anything else is logged."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            logger.debug("client %s went away", client_address)
            return
        logger.exception("error answering %s", client_address)


@dataclass
class Faults:
    delay_ms: int = 50  # before a callback is sent
    timeout_rate: float = 0.0  # hold the answer for hold_s (past the client's timeout), still process
    hold_s: float = 12.0
    error_rate: float = 0.0  # answer 503 without processing
    duplicate_rate: float = 0.0  # deliver a callback a second time (same webhook-id)
    late_rate: float = 0.0  # deliver a callback late_ms later than usual
    late_ms: int = 5000
    reorder: bool = False  # random jitter so callbacks overtake each other
    sync_rate: float = 0.0  # answer 200 with the result instead of 202 + callback
    redeliveries: int = 3  # re-deliveries of a callback the receiver did not accept (non-2xx)
    status_endpoint: bool = True  # answer GET /v1/moderations/{id}; False: 404, as a provider without it
    # The score of every image; None: derived from its bytes (image_score), the same for the same bytes.
    image_score: float | None = None
    seed: int | None = None

    def validate(self) -> None:
        if self.image_score is not None and not 0.0 <= self.image_score <= 1.0:
            raise ValueError("image_score must be between 0 and 1")
        for name in ("timeout_rate", "error_rate", "duplicate_rate", "late_rate", "sync_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        for name in ("delay_ms", "late_ms", "redeliveries", "hold_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


@dataclass
class _Job:
    provider_id: str
    idempotency_key: str
    sync: bool
    body: dict  # the callback body, or the 200 answer's data
    ready_at: float = 0.0  # time.monotonic() when its result is out (its first callback is due)


class ProviderSimulator:
    def __init__(self, *, secret: str, faults: Faults | None = None, api_key: str = "", host: str = "127.0.0.1", port: int = 0):
        self.faults = faults or Faults()
        self.faults.validate()
        self.secret, self.api_key = secret, api_key
        self.rng = random.Random(self.faults.seed)
        self.lock = threading.Lock()
        self.jobs: dict[str, _Job] = {}
        self.jobs_by_id: dict[str, _Job] = {}  # provider id -> job, for the status endpoint
        self.arrivals: Counter[str] = Counter()  # Idempotency-Key -> requests received
        self.stats: Counter[str] = Counter()
        self.model = LocalProvider()
        self._queue: list = []  # heap of (due, seq, delivery)
        self._seq = itertools.count()
        self._wake = threading.Condition(self.lock)
        self._senders = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sim-callback")
        self._http = httpx.Client(timeout=10)
        self._stopping = False
        self.server = _Server((host, port), self._handler_class())
        self._threads = [
            threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, name="sim-http", daemon=True),
            threading.Thread(target=self._deliver_loop, name="sim-scheduler", daemon=True),
        ]

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ProviderSimulator:
        # Ready when started: a first request that loaded the model could outlast a client's timeout.
        self.model.warm_up()
        for thread in self._threads:
            thread.start()
        self._started = True
        return self

    def stop(self) -> None:
        with self.lock:
            self._stopping = True
            self._wake.notify_all()
        if getattr(self, "_started", False):  # shutdown() would wait for ever on a server never served
            self.server.shutdown()
        self.server.server_close()
        self._senders.shutdown(wait=True, cancel_futures=True)
        self._http.close()

    def pending_deliveries(self) -> int:
        with self.lock:
            return len(self._queue)

    # --- requests --------------------------------------------------------------------------

    def _chance(self, rate: float) -> bool:
        return rate > 0 and self.rng.random() < rate

    def handle_moderation(self, headers, body: bytes) -> tuple[int, dict, float]:
        """Returns (status, answer, seconds to hold the answer)."""
        if self.api_key and headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": "invalid api key"}, 0
        key = headers.get("Idempotency-Key", "")
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and "callback_url" not in request and "model" in request:
            return self._openai_answer(request)
        try:
            assert isinstance(request, dict) and isinstance(request.get("callback_url"), str)
            uuid.UUID(key)
        except (ValueError, AssertionError):
            return 400, {"error": "a JSON body with callback_url and a UUID Idempotency-Key are required"}, 0
        with self.lock:
            self.arrivals[key] += 1
            self.stats["requests"] += 1
            if self._chance(self.faults.error_rate):
                self.stats["errors_5xx"] += 1
                return 503, {"error": "simulated outage"}, 0
            hold = self.faults.hold_s if self._chance(self.faults.timeout_rate) else 0
            self.stats["held"] += bool(hold)
            job = self.jobs.get(key)
        if job is None:
            # The model runs outside the lock (it is slow on first use); if another request
            # with the same key got there first, its job stands and this one is dropped.
            body = self._moderate(key, request)
            with self.lock:
                job = self.jobs.get(key) or self._new_job(key, request, body)
        else:
            with self.lock:
                self.stats["repeated_keys"] += 1
        if job.sync:
            return 200, job.body["data"], hold
        return 202, {"id": job.provider_id, "status": "queued"}, hold

    def _openai_answer(self, request: dict) -> tuple[int, dict, float]:
        """The OpenAI-compatible form (`{"model", "input"}`, answered at once, as the `openai`
        provider expects): a text `input`, or a list of parts, an image as a data URL
        (`{"type": "image_url", "image_url": {"url": "data:<mime>;base64,..."}}`) or a text part.
        The same faults apply: outages (5xx) and held answers."""
        with self.lock:
            self.stats["requests"] += 1
            if self._chance(self.faults.error_rate):
                self.stats["errors_5xx"] += 1
                return 503, {"error": {"message": "simulated outage"}}, 0
            hold = self.faults.hold_s if self._chance(self.faults.timeout_rate) else 0
        parts = request["input"] if isinstance(request["input"], list) else [{"type": "text", "text": request["input"]}]
        try:
            results = [self._openai_part(part) for part in parts]
        except (UnsupportedContent, KeyError, TypeError, ValueError) as exc:
            return 400, {"error": {"message": f"invalid input: {exc}"}}, 0
        worst = max(results, key=lambda r: max(r.category_scores.values(), default=0.0))
        model = IMAGE_MODEL if any(p.get("type") == "image_url" for p in parts) else self.model.model_name
        return 200, {"id": f"modr_{uuid.uuid4().hex[:16]}", "model": model, "results": [
            {"flagged": worst.flagged, "categories": worst.categories, "category_scores": worst.category_scores}
        ]}, hold

    def _openai_part(self, part: dict) -> ModerationResult:
        if part.get("type") == "image_url":
            url = part["image_url"]["url"]
            header, _, data = url.partition(",")
            if not header.startswith("data:") or not header.endswith(";base64"):
                raise UnsupportedContent("the simulator judges images sent as base64 data URLs only")
            return self._judge_image({"base64": data, "mime_type": header[len("data:"):-len(";base64")]})
        return self.model.moderate(ModerationInput(idempotency_key="", content_type="text", text=str(part["text"])))

    def _moderate(self, key: str, request: dict) -> dict:
        """The callback body for a request: a completed result, or a failure."""
        data = {"id": f"modr_{uuid.uuid4().hex[:16]}", "idempotency_key": key, "model": self.model.model_name}
        try:
            if request.get("content_type") == "image":
                data["model"] = IMAGE_MODEL
                result = self._judge_image(request.get("image"))
            else:
                result = self.model.moderate(ModerationInput(
                    idempotency_key=key, content_type=request.get("content_type", "text"),
                    text=str(request.get("input", "")), metadata=(request.get("metadata") or {}).get("content") or {}))
        except UnsupportedContent as exc:
            return {"type": "moderation.failed", "data": {**data, "error": str(exc)}}
        return {"type": "moderation.completed", "data": {**data, "results": [
            {"flagged": result.flagged, "categories": result.categories, "category_scores": result.category_scores}
        ]}}

    def _judge_image(self, image) -> ModerationResult:
        """An image judged from the protocol's `image` field: `Faults.image_score`, or else a score
        drawn from its bytes' sha256, so the same bytes always get the same score. (The simulator
        stands in for a provider's model; it sees no pixels.) Without the bytes it fails, as a
        provider given nothing to judge would."""
        try:
            raw = base64.b64decode(image["base64"], validate=True)
            if not raw or not str(image["mime_type"]).startswith("image/"):
                raise ValueError("no image bytes")
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise UnsupportedContent(f"an image request without its bytes ({exc})") from exc
        return image_result(raw, self.faults.image_score)

    def _new_job(self, key: str, request: dict, body: dict) -> _Job:
        """Call while holding the lock. Remembers the key and schedules its callback stream."""
        # A failure has no synchronous form in the protocol: it is always a callback.
        sync = body["type"] == "moderation.completed" and self._chance(self.faults.sync_rate)
        job = _Job(body["data"]["id"], key, sync, body)
        self.jobs[key] = self.jobs_by_id[job.provider_id] = job
        if not job.sync:
            event_id = f"evt_{uuid.uuid4().hex}"
            due = time.monotonic() + self.faults.delay_ms / 1000
            if self._chance(self.faults.late_rate):
                due += self.faults.late_ms / 1000
                self.stats["late"] += 1
            if self.faults.reorder:
                due += self.rng.uniform(0, 0.5)
            job.ready_at = due
            self._schedule(due, (request["callback_url"], event_id, body, 0))
            if self._chance(self.faults.duplicate_rate):
                self.stats["duplicates"] += 1
                self._schedule(due + self.rng.uniform(0.01, 0.2), (request["callback_url"], event_id, body, 0))
        return job

    def handle_status(self, headers, provider_id: str) -> tuple[int, dict]:
        """`GET /v1/moderations/{id}` (docs/design.md, "Provider status and reconcile"): "queued" until the
        result's first callback is due, then "completed" or "failed" with the callback's data."""
        if not self.faults.status_endpoint:
            return 404, {"error": "not found"}
        if self.api_key and headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": "invalid api key"}
        with self.lock:
            job = self.jobs_by_id.get(provider_id)
            self.stats["status_queries"] += 1
        if job is None:
            return 404, {"error": "unknown id"}
        if time.monotonic() < job.ready_at:
            return 200, {"id": provider_id, "status": "queued", "result": None, "error": None}
        data = job.body["data"]
        if job.body["type"] == "moderation.failed":
            return 200, {"id": provider_id, "status": "failed", "result": None, "error": data["error"]}
        return 200, {"id": provider_id, "status": "completed", "result": data, "error": None}

    # --- callbacks ---------------------------------------------------------------------------

    def _schedule(self, due: float, delivery: tuple) -> None:
        heapq.heappush(self._queue, (due, next(self._seq), delivery))
        self._wake.notify()

    def _deliver_loop(self) -> None:
        with self.lock:
            while not self._stopping:
                if not self._queue:
                    self._wake.wait()
                    continue
                due, _, delivery = self._queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(timeout=wait)
                    continue
                heapq.heappop(self._queue)
                self._senders.submit(self._send, delivery)

    def _send(self, delivery: tuple) -> None:
        url, event_id, body, attempt = delivery
        raw = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **sign(self.secret, event_id=event_id, body=raw)}
        try:
            status = self._http.post(url, content=raw, headers=headers).status_code
        except httpx.HTTPError as exc:
            status, error = None, exc
        with self.lock:
            self.stats["callbacks_sent"] += 1
            if status is not None and 200 <= status < 300:
                self.stats["callbacks_accepted"] += 1
                return
            self.stats["callbacks_refused"] += 1
            if attempt < self.faults.redeliveries and not self._stopping:
                logger.info("callback %s answered %s; re-delivering", event_id, status or error)
                self._schedule(time.monotonic() + 0.5 * 2**attempt, (url, event_id, body, attempt + 1))

    # --- HTTP ------------------------------------------------------------------------------------

    def _handler_class(self):
        simulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's naming
                if self.path.rstrip("/") != "/v1/moderations":
                    return self._answer(404, {"error": "not found"})
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, answer, hold = simulator.handle_moderation(self.headers, body)
                if hold:
                    time.sleep(hold)
                self._answer(status, answer)

            def do_GET(self):  # noqa: N802
                prefix = "/v1/moderations/"
                if self.path.startswith(prefix) and len(self.path) > len(prefix):
                    return self._answer(*simulator.handle_status(self.headers, unquote(self.path[len(prefix):])))
                if self.path.rstrip("/") != "/stats":
                    return self._answer(404, {"error": "not found"})
                with simulator.lock:
                    stats = {**simulator.stats, "keys": len(simulator.arrivals), "faults": asdict(simulator.faults)}
                self._answer(200, stats)

            def _answer(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a held answer): the work was still done

            def log_message(self, format, *args):  # noqa: A002
                logger.debug("simulator: " + format, *args)

        return Handler


class WebhookReceiver:
    """A client application's webhook on loopback, for decision notifications: answers from a
    script of status codes (`statuses`, then `default_status`) and keeps what it received as
    (lower-cased headers, body).

    `mode` makes it misbehave as a real receiver can: "trickle" sends its answer one byte every
    `trickle_s` seconds (each read is quick, the whole never ends in time); "hang" reads the
    request and never answers. Both stop when the receiver is stopped.
    """

    def __init__(self, statuses=(), default_status: int = 200, *, mode: str = "answer", trickle_s: float = 4.0):
        if mode not in ("answer", "trickle", "hang"):
            raise ValueError(f"unknown receiver mode {mode!r}")
        self.statuses, self.default_status = list(statuses), default_status
        self.mode, self.trickle_s = mode, trickle_s
        self.received: list[tuple[dict, bytes]] = []
        self._stopped = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else receiver.default_status
                if receiver.mode == "hang":
                    receiver._stopped.wait()
                    self.close_connection = True
                    return
                if receiver.mode == "trickle":
                    return self._trickle(f"HTTP/1.1 {status} OK\r\nContent-Length: 0\r\n\r\n".encode())
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _trickle(self, answer: bytes) -> None:
                self.close_connection = True
                try:
                    for i in range(len(answer)):
                        if receiver._stopped.wait(receiver.trickle_s):
                            return
                        self.wfile.write(answer[i:i + 1])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up: that is the point

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/moderation"

    def stop(self) -> None:
        self._stopped.set()
        self.server.shutdown()
        self.server.server_close()
