"""A fake DSA Transparency Database: a real HTTP server on loopback that answers
`POST /api/v1/statements` as the database does (docs/transparency.md), validating each statement
from the rules fixture (lab/transparency_rules.py), with the faults a sender must survive.

What it answers, in the database's order of checks:
- no or unknown bearer token: 401 {"message": "Unauthenticated."};
- a body without 1 to 100 statements: 422 {"message", "errors": {"statements": [...]}};
- any statement invalid: 422 {"errors": {"statement_<index>": {field: [messages]}}}, nothing
  stored (the batch is all or nothing);
- a puid repeated in the batch, or already stored for the token's platform: 422 {"message",
  "errors": {"puid": [...], "existing_puids": [...]}}, nothing stored, the new ones included;
- otherwise 201 {"statements": [...]} with a uuid, created_at, self and permalink for each.
`GET /api/v1/statement/existing-puid/{puid}` answers 302 or 404 as the database does.

Faults: `outage(seconds, mode="503"|"refuse")`, `slow(seconds, delay_s, store=...)` (answers
held past a client's timeout, the statements stored first, or never: a 504), `fail_next(n, status)`.
`received` counts how many times each puid arrived, whatever the answer: the proof that a sender
never sent a statement twice.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from lab.transparency_rules import Rules, check_statement, default_rules, php_string, preprocess, validate_batch_shape

logger = logging.getLogger(__name__)

STATEMENTS_PATH = "/api/v1/statements"
EXISTING_PUID_PATH = "/api/v1/statement/existing-puid/"
DUPLICATE_MESSAGE = "The platform identifier(s) are not all unique within this call."
# Statement fields the database fills in its answer when a statement left them out
# (GroupedSubmissionsService::buildOutputJsonResponse).
ARRAY_FIELDS = ("decision_visibility", "category_addition", "category_specification", "content_type", "territorial_scope")
# ... and the fields it blanks when their condition does not hold (sanitizePayloadStatement).
OTHER_WHEN_LISTED = (("category_specification", "category_specification_other", "KEYWORD_OTHER"),
                     ("content_type", "content_type_other", "CONTENT_TYPE_OTHER"),
                     ("decision_visibility", "decision_visibility_other", "DECISION_VISIBILITY_OTHER"))
OTHER_WHEN_EQUAL = (("decision_monetary", "decision_monetary_other", "DECISION_MONETARY_OTHER"),
                    ("decision_ground", "illegal_content_legal_ground", "DECISION_GROUND_ILLEGAL_CONTENT"),
                    ("decision_ground", "illegal_content_explanation", "DECISION_GROUND_ILLEGAL_CONTENT"),
                    ("decision_ground", "incompatible_content_ground", "DECISION_GROUND_INCOMPATIBLE_CONTENT"),
                    ("decision_ground", "incompatible_content_explanation", "DECISION_GROUND_INCOMPATIBLE_CONTENT"),
                    ("decision_ground", "incompatible_content_illegal", "DECISION_GROUND_INCOMPATIBLE_CONTENT"))


@dataclass
class Answer:
    status: int
    body: dict | str
    hold_s: float = 0.0


@dataclass
class Received:
    """One request to the statements endpoint, as the fake saw it."""
    status: int
    puids: list[str]
    at: float = field(default_factory=time.monotonic)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # a client that gave up on a held answer
        logger.exception("error answering %s", client_address)


def _parse_json(raw: bytes, content_type: str):
    """The body as Laravel reads it: JSON only with a JSON content type; invalid JSON (PHP refuses
    lone surrogates, NaN and nesting past 512) reads as no input."""
    if "/json" not in content_type and "+json" not in content_type:
        return {}

    def refuse(constant):
        raise ValueError(constant)

    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if _has_lone_surrogate(body, 0):
        return {}
    if isinstance(body, list):
        return dict(enumerate(body))
    return body if isinstance(body, dict) else {}


def _has_lone_surrogate(value, depth: int) -> bool:
    if depth > 512:
        return True
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k, depth + 1) or _has_lone_surrogate(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item, depth + 1) for item in value)
    return False


def _summary(errors: dict[str, list[str]]) -> str:
    """ValidationException::summarize: the first message, and how many more."""
    messages = [message for field_messages in errors.values() for message in field_messages]
    more = len(messages) - 1
    return messages[0] + (f" (and {more} more {'error' if more == 1 else 'errors'})" if more else "")


class FakeTransparencyDatabase:
    def __init__(self, *, tokens: dict[str, str] | None = None, rules: Rules | None = None,
                 host: str = "127.0.0.1", port: int = 0):
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the fake Transparency Database listens on loopback only")
        self.tokens = tokens if tokens is not None else {"fake-tdb-token": "Fake Platform"}
        self.rules = rules or default_rules()
        self.lock = threading.Lock()
        self.stored: dict[tuple[str, str], dict] = {}  # (platform, puid) -> statement as stored
        self.received: Counter[str] = Counter()  # puid -> times it arrived in a request
        self.named_existing: Counter[str] = Counter()  # puid -> times answered "already stored"
        self.requests: list[Received] = []
        self.stats: Counter[str] = Counter()
        self._outage_until, self._refuse_until = 0.0, 0.0
        self._slow_until, self._slow_delay_s, self._slow_store = 0.0, 0.0, True
        self._fail_next: list[int] = []
        # Called between the duplicate check and the insert (holding the lock), for race tests.
        self.before_store: Callable[[], None] | None = None
        self._stopped = threading.Event()
        self._address = (host, port)
        self._server: _Server | None = None
        self._listen()

    # --- lifecycle ---------------------------------------------------------------------------

    def _listen(self) -> None:
        self._server = _Server(self._address, self._handler_class())
        self._address = self._server.server_address[:2]  # keep the port across a refused outage
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="fake-tdb-http", daemon=True).start()

    def _close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    @property
    def url(self) -> str:
        host, port = self._address
        return f"http://{host}:{port}"

    def start(self) -> FakeTransparencyDatabase:
        return self  # listening since construction; kept for the house `Simulator(...).start()` form

    def stop(self) -> None:
        self._stopped.set()
        with self.lock:
            self._outage_until = 0.0
        self._close()

    def __enter__(self) -> FakeTransparencyDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- faults ------------------------------------------------------------------------------

    def outage(self, seconds: float, *, mode: str = "503") -> None:
        """For `seconds`, answer every request 503 ("503"), or listen on nothing so connections
        are refused ("refuse"). Nothing is stored during an outage."""
        if mode not in ("503", "refuse"):
            raise ValueError(f"unknown outage mode {mode!r}")
        if seconds <= 0:
            raise ValueError("seconds must be positive")
        with self.lock:
            self._outage_until = time.monotonic() + seconds
        if mode == "refuse":
            with self.lock:
                self._refuse_until = self._outage_until
            self._close()
            timer = threading.Timer(seconds, self._reopen)
            timer.daemon = True
            timer.start()

    def _refusing(self) -> bool:
        with self.lock:
            return self._server is None or self._refuse_until > time.monotonic()

    def _reopen(self) -> None:
        if not self._stopped.is_set() and self._server is None:
            self._listen()

    def slow(self, seconds: float, *, delay_s: float, store: bool = True) -> None:
        """For `seconds`, hold each answer `delay_s`. With `store`, the batch is processed (and
        stored if valid) before the wait, as a database that committed and then answered late;
        without, nothing is processed: after the wait the answer is a gateway's 504."""
        if seconds <= 0 or delay_s < 0:
            raise ValueError("seconds must be positive and delay_s not negative")
        with self.lock:
            self._slow_until, self._slow_delay_s, self._slow_store = time.monotonic() + seconds, delay_s, store

    def fail_next(self, count: int = 1, *, status: int = 500) -> None:
        """Answer the next `count` statement requests `status` (5xx, or 429 as the rate limiter
        does) without processing them."""
        if count < 1 or not (status == 429 or 500 <= status <= 599):
            raise ValueError("count must be positive and status 429 or 5xx")
        with self.lock:
            self._fail_next.extend([status] * count)

    # --- what tests read ---------------------------------------------------------------------

    def statements(self, platform: str | None = None) -> list[dict]:
        with self.lock:
            return [dict(s) for (p, _), s in self.stored.items() if platform is None or p == platform]

    def stored_puids(self, platform: str | None = None) -> set[str]:
        with self.lock:
            return {puid for (p, puid) in self.stored if platform is None or p == platform}

    def sent_more_than_once(self) -> dict[str, int]:
        with self.lock:
            return {puid: n for puid, n in self.received.items() if n > 1}

    # --- the endpoint ------------------------------------------------------------------------

    def handle_statements(self, authorization: str, content_type: str, raw: bytes) -> Answer:
        platform = self._platform(authorization)
        if platform is None:
            return Answer(401, {"message": "Unauthenticated."})
        body = preprocess(_parse_json(raw, content_type))
        statements = body.get("statements")
        puids = self._puids(statements)
        with self.lock:
            self.stats["requests"] += 1
            self.received.update(puids)
            fault = self._fault()
            slow = time.monotonic() < self._slow_until
            delay, store_first = (self._slow_delay_s, self._slow_store) if slow else (0.0, True)
        if fault is not None:
            return self._record(fault, puids)
        if slow and not store_first:
            # Held in front of the database (a gateway), which gives up before passing it on.
            self._stopped.wait(delay)
            return self._record(Answer(504, {"message": "Gateway Timeout"}), puids)
        answer = self._process(platform, body, statements)
        answer.hold_s = delay
        return self._record(answer, puids)

    def _platform(self, authorization: str) -> str | None:
        scheme, _, token = (authorization or "").partition(" ")
        return self.tokens.get(token.strip()) if scheme.lower() == "bearer" and token.strip() else None

    @staticmethod
    def _puids(statements) -> list[str]:
        items = statements.values() if isinstance(statements, dict) else statements if isinstance(statements, list) else []
        return [php_string(s["puid"]) for s in items if isinstance(s, dict) and isinstance(s.get("puid"), (str, int)) and not isinstance(s.get("puid"), bool)]

    def _fault(self) -> Answer | None:
        """Call while holding the lock."""
        if time.monotonic() < self._outage_until:
            self.stats["outage"] += 1
            return Answer(503, {"message": "Service Unavailable"})
        if self._fail_next:
            status = self._fail_next.pop(0)
            self.stats[f"failed_{status}"] += 1
            if status == 429:
                return Answer(429, "Limit Reached. Please do not overload the API")
            return Answer(status, {"message": "Server Error"})
        return None

    def _record(self, answer: Answer, puids: list[str]) -> Answer:
        with self.lock:
            self.requests.append(Received(answer.status, puids))
            self.stats[f"answered_{answer.status}"] += 1
        return answer

    def _process(self, platform: str, body: dict, statements) -> Answer:
        batch_errors = validate_batch_shape(body, self.rules)
        if batch_errors:
            return Answer(422, {"message": _summary(batch_errors), "errors": batch_errors})
        items = list(statements.items()) if isinstance(statements, dict) else list(enumerate(statements))
        errors, validated = {}, []
        for index, statement in items:
            statement_errors, data = check_statement(statement, self.rules, preprocessed=True)
            if statement_errors:
                errors[f"statement_{index}"] = statement_errors
            validated.append(data)
        if errors:
            return Answer(422, {"errors": errors})
        puids = [php_string(data["puid"]) for data in validated]
        repeated = sorted({p for p in puids if puids.count(p) > 1}, key=puids.index)
        if repeated:
            return self._duplicate(repeated)
        with self.lock:  # the database's per-puid locks and unique index: one winner per puid
            existing = [p for p in puids if (platform, p) in self.stored]
            if existing:
                self.named_existing.update(existing)
                return self._duplicate(existing)
            if self.before_store is not None:
                self.before_store()  # a test's pause point: another request may try to get here now
            now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
            out = []
            for puid, data in zip(puids, validated, strict=True):
                answer, stored = self._as_stored(platform, data, now)
                self.stored[(platform, puid)] = stored
                out.append(answer)
            self.stats["stored"] += len(out)
        return Answer(201, {"statements": out})

    @staticmethod
    def _duplicate(puids: list[str]) -> Answer:
        return Answer(422, {"message": DUPLICATE_MESSAGE, "errors": {"puid": [DUPLICATE_MESSAGE], "existing_puids": puids}})

    def _as_stored(self, platform: str, data: dict, now: str) -> tuple[dict, dict]:
        """(the statement as the 201 shows it, as the database keeps it)."""
        data = dict(data)
        scope = data.get("territorial_scope")
        codes = self.rules.enumerations["EUROPEAN_COUNTRY_CODES"]
        data["territorial_scope"] = sorted({c for c in (scope or []) if isinstance(c, str) and c in codes})
        statement_uuid = str(uuid.uuid4())
        answer = dict(data)
        content_id = answer.pop("content_id", None)
        answer["content_id_ean"] = content_id.get("EAN-13") if isinstance(content_id, dict) else None
        for name in ARRAY_FIELDS:
            if answer.get(name) is None:  # PHP's ??= []: absent or null
                answer[name] = []
        for name in self.rules.fields:
            if "." not in name and name != "content_id":
                answer.setdefault(name, None)
        answer.update(uuid=statement_uuid, created_at=now, platform_name=platform,
                      self=f"{self.url}/api/v1/statement/{statement_uuid}", permalink=f"{self.url}/statement/{statement_uuid}")
        stored = dict(answer)
        for array_field, other, needle in OTHER_WHEN_LISTED:
            if not (isinstance(stored.get(array_field), list) and needle in stored[array_field]):
                stored[other] = None
        for source, other, needle in OTHER_WHEN_EQUAL:
            if stored.get(source) != needle:
                stored[other] = None
        if stored.get("source_type") == "SOURCE_VOLUNTARY":
            stored["source_identity"] = None
        return answer, stored

    def handle_existing_puid(self, authorization: str, puid: str) -> Answer:
        platform = self._platform(authorization)
        if platform is None:
            return Answer(401, {"message": "Unauthenticated."})
        with self.lock:
            found = (platform, puid) in self.stored
        if found:
            return Answer(302, {"message": "statement of reason found", "puid": puid})
        return Answer(404, {"message": "statement of reason not found", "puid": puid})

    # --- HTTP --------------------------------------------------------------------------------

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms wait

            def do_POST(self):  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if fake._refusing():
                    self.close_connection = True  # a kept-alive connection dies with the server
                    return
                if self.path.split("?")[0].rstrip("/") != STATEMENTS_PATH:
                    return self._answer(Answer(404, {"message": f"The route {self.path.lstrip('/')} could not be found."}))
                self._answer(fake.handle_statements(self.headers.get("Authorization", ""),
                                                    self.headers.get("Content-Type", ""), raw))

            def do_GET(self):  # noqa: N802
                if fake._refusing():
                    self.close_connection = True
                    return
                path = self.path.split("?")[0]
                if path.startswith(EXISTING_PUID_PATH) and len(path) > len(EXISTING_PUID_PATH):
                    return self._answer(fake.handle_existing_puid(self.headers.get("Authorization", ""),
                                                                  unquote(path[len(EXISTING_PUID_PATH):])))
                if path.rstrip("/") == "/stats":
                    with fake.lock:
                        stats = {**fake.stats, "stored_now": len(fake.stored), "puids_received": len(fake.received),
                                 "sent_more_than_once": sum(1 for n in fake.received.values() if n > 1)}
                    return self._answer(Answer(200, stats))
                self._answer(Answer(404, {"message": f"The route {path.lstrip('/')} could not be found."}))

            def _answer(self, answer: Answer) -> None:
                if answer.hold_s and fake._stopped.wait(answer.hold_s):
                    self.close_connection = True
                    return
                is_json = not isinstance(answer.body, str)
                raw = (json.dumps(answer.body) if is_json else answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json" if is_json else "text/html; charset=UTF-8")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a held answer: what was stored stays stored

            def log_message(self, format, *args):  # noqa: A002
                logger.debug("fake tdb: " + format, *args)

        return Handler

