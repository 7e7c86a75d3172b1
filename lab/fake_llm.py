"""A fake OpenAI-compatible chat-completions server on loopback: the `llm` provider's counterpart
(moderation/providers/llm.py, docs/providers.md), answering as vLLM, Ollama and llama.cpp's server
do, with the failures a caller must survive.

`POST /v1/chat/completions` with `{"model", "messages": [system, user], "response_format"?}`:
- a missing or wrong bearer key (when one is set): 401 with OpenAI's error body;
- otherwise a chat completion whose message's `content` is the verdict as JSON,
  `{"category", "score", "rationale", "quote"}`, judged by a small word list per category (only
  the categories the request defines: its schema's enum, or the prompt's "- name:" lines). The
  quote is copied from the user's text, so its span is real.

Modes (`mode`, or `script(...)` for the next requests one by one):
  good            the verdict, as plain JSON content
  fenced          the verdict in a ```json fence, with the model's thinking in `reasoning_content`
                  (a reasoning model behind vLLM) and in a leading <think> block
  malformed_json  content cut off mid-object
  wrong_schema    a JSON object of other keys ({"label", "confidence"})
  bad_category    a category the policy does not define
  bad_score       a score of 1.7
  span_not_in_text a quote the text does not hold
  empty           no content: the model spent its tokens reasoning (finish_reason "length")
  slow            the verdict after `delay_s`
  hang            nothing, until the client gives up (or the server stops)
  trickle         the head, then a byte of the body every `delay_s`, for as long as the client listens
  error_500       500 with an error body
  rate_limited    429 with `Retry-After: retry_after_s`
  no_schema       400 to a json_schema response_format (an older server), the verdict otherwise
  echo_key        401 whose message quotes the Authorization header it got (a careless proxy)

`requests` keeps each request's headers and body: tests read what was sent.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

logger = logging.getLogger(__name__)

CHAT_PATH = "/v1/chat/completions"
MODES = ("good", "fenced", "malformed_json", "wrong_schema", "bad_category", "bad_score", "span_not_in_text", "empty",
         "slow", "hang", "trickle", "error_500", "rate_limited", "no_schema", "echo_key")
# What the fake "model" reads as each category: whole words, in any case. A text with none of them
# violates nothing.
WORDS = {
    "threat": ("kill you", "hurt you", "find where you live", "burn your house"),
    "hate": ("vermin", "subhuman"),
    "insult": ("idiot", "moron", "stupid", "loser", "bodoh"),
    "sexual": ("nudes", "sexy pics"),
    "profanity": ("fuck", "shit", "damn"),
}
_DEFINED = re.compile(r"^- ([a-z0-9][a-z0-9_/-]{0,63}):", re.MULTILINE)


@dataclass
class Received:
    headers: dict[str, str]
    body: dict


def judge(text: str, categories: list[str]) -> dict:
    """The fake model's verdict of `text` under `categories`: the first category (in WORDS' order,
    the most severe first) with one of its words in it (any case), the word quoted as written."""
    for category, words in WORDS.items():
        if category not in categories:
            continue
        for word in words:
            found = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE)
            if found:
                quote = found.group()
                return {"category": category, "score": 0.93,
                        "rationale": f"Saying \u201c{quote}\u201d to someone falls under {category} as the policy defines it.",
                        "quote": quote}
    return {"category": "none", "score": 0.02, "rationale": "Nothing in it matches a category's definition.", "quote": ""}


def requested_categories(body: dict) -> list[str]:
    """The categories a request defines: its JSON schema's enum, else its system prompt's lines."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    enum = ((schema.get("properties") or {}).get("category") or {}).get("enum")
    if isinstance(enum, list):
        return [c for c in enum if isinstance(c, str) and c != "none"]
    system = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system"), "")
    return _DEFINED.findall(system if isinstance(system, str) else "")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # a client that gave up on a held answer
        logger.exception("error answering %s", client_address)


class FakeLlmServer:
    def __init__(self, *, api_key: str = "", model: str = "fake-safeguard", mode: str = "good", host: str = "127.0.0.1",
                 port: int = 0, delay_s: float = 2.0, retry_after_s: int = 7) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the fake LLM server listens on loopback only")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
        self.api_key, self.model, self.mode = api_key, model, mode
        self.delay_s, self.retry_after_s = delay_s, retry_after_s
        self.requests: list[Received] = []
        self.stats: Counter[str] = Counter()
        self._script: list[str] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server = _Server((host, port), self._handler_class())
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *modes: str) -> None:
        """Answer the next requests in these modes, one each, then in `mode` again."""
        unknown = [m for m in modes if m not in MODES]
        if unknown:
            raise ValueError(f"unknown modes: {', '.join(unknown)}")
        with self._lock:
            self._script.extend(modes)

    def stop(self) -> None:
        self._stopped.set()  # a held answer gives up
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLlmServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _next_mode(self) -> str:
        with self._lock:
            return self._script.pop(0) if self._script else self.mode

    def answer(self, headers: dict[str, str], body: dict) -> tuple[str, int, dict, dict[str, str]]:
        """(mode, status, JSON body, extra headers) for one request."""
        self.requests.append(Received(headers, body))
        mode = self._next_mode()
        self.stats[mode] += 1
        authorization = headers.get("authorization", "")
        if mode == "echo_key":
            return mode, 401, _error(f"Incorrect API key provided in {authorization!r}.", "invalid_api_key"), {}
        if self.api_key and authorization != f"Bearer {self.api_key}":
            return mode, 401, _error("Incorrect API key provided.", "invalid_api_key"), {}
        if mode == "error_500":
            return mode, 500, _error("The server had an error while processing your request.", "server_error"), {}
        if mode == "rate_limited":
            return mode, 429, _error("Rate limit reached, retry later.", "rate_limit_exceeded"), \
                {"Retry-After": str(self.retry_after_s)}
        response_format = body.get("response_format") or {}
        if mode == "no_schema" and response_format.get("type") == "json_schema":
            return mode, 400, _error("response_format type json_schema is not supported", "invalid_request_error"), {}
        text = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
        verdict = judge(text if isinstance(text, str) else "", requested_categories(body))
        return mode, 200, self._completion(mode, verdict), {}

    def _completion(self, mode: str, verdict: dict) -> dict:
        message: dict = {"role": "assistant", "content": json.dumps(verdict)}
        finish = "stop"
        if mode == "fenced":
            message["reasoning_content"] = "The user wrote something; let me weigh it against each definition."
            message["content"] = f"<think>Weighing the definitions.</think>\n```json\n{json.dumps(verdict, indent=2)}\n```"
        elif mode == "malformed_json":
            message["content"] = json.dumps(verdict)[:25]
        elif mode == "wrong_schema":
            message["content"] = json.dumps({"label": verdict["category"], "confidence": "high"})
        elif mode == "bad_category":
            message["content"] = json.dumps({**verdict, "category": "spam"})
        elif mode == "bad_score":
            message["content"] = json.dumps({**verdict, "score": 1.7})
        elif mode == "span_not_in_text":
            message["content"] = json.dumps({**verdict, "category": "insult", "quote": "words nobody wrote"})
        elif mode == "empty":
            message["content"], message["reasoning_content"], finish = "", "Let me think about this at length...", "length"
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != CHAT_PATH:
                    return self._send(404, _error(f"Unknown path {self.path}", "not_found"), {})
                try:
                    body = json.loads(raw)
                except (ValueError, UnicodeDecodeError):
                    return self._send(400, _error("We could not parse the JSON body of your request.",
                                                  "invalid_request_error"), {})
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    return self._send(400, _error("'messages' is a required property", "invalid_request_error"), {})
                mode, status, answer, extra = fake.answer({k.lower(): v for k, v in self.headers.items()}, body)
                if mode == "hang":
                    fake._stopped.wait()
                    return None
                if mode == "slow":
                    fake._stopped.wait(fake.delay_s)
                if mode == "trickle":
                    return self._trickle(json.dumps(answer).encode())
                return self._send(status, answer, extra)

            def _send(self, status: int, answer: dict, extra: dict[str, str]) -> None:
                raw = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for name, value in extra.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def _trickle(self, raw: bytes) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    for byte in raw:
                        if fake._stopped.wait(fake.delay_s):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        return Handler


def _error(message: str, code: str) -> dict:
    """OpenAI's error body (vLLM and Ollama answer the same shape)."""
    return {"error": {"message": message, "type": "invalid_request_error" if code != "server_error" else code,
                      "param": None, "code": code}}
