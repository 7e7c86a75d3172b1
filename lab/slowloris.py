"""Slow clients: connections that send a request one byte at a time (slowloris), for the test
that the web tier keeps answering meanwhile and for bench/slowloris.py.

Two kinds, the two ways a server waits on a client: `headers` never finishes its header block
(one more `X-Slow: 1` line, byte by byte, forever); `body` sends a whole callback head that
announces a body, then trickles the body. One thread drives every connection, and records what
the server answered each one and when it let go.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

CALLBACK_PATH = "/api/v1/callbacks/webhook/"
BODY_BYTES = 4096


def _endless_headers():
    yield b"GET /api/v1/reviews/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    while True:
        yield b"X-Slow: 1\r\n"


def _trickled_body():
    # Unsigned on purpose: the server reads the body before it can check a signature, so the
    # head alone must not let it refuse the request early.
    yield (f"POST {CALLBACK_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           f"Content-Length: {BODY_BYTES}\r\nwebhook-id: slow\r\nwebhook-timestamp: {int(time.time())}\r\n"
           "webhook-signature: v1,c2xvdw==\r\n\r\n").encode()
    while True:
        yield b" "


@dataclass
class SlowConnection:
    kind: str  # "headers" or "body"
    sock: socket.socket
    opened_at: float
    pending: bytes = b""
    answer: bytes = b""  # what the server sent back (its status line first)
    released_at: float | None = None  # when the server closed the connection
    _chunks: object = field(default=None, repr=False)

    @property
    def status(self) -> int | None:
        """The status code the server answered, if any."""
        parts = self.answer.split(b" ", 2)
        return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else None

    @property
    def held_s(self) -> float | None:
        return None if self.released_at is None else self.released_at - self.opened_at


class Slowloris:
    """`headers` + `body` connections to 127.0.0.1:`port`, each sending a byte every `interval_s`
    (the callback's head goes at once, so its body starts trickling at once)."""

    def __init__(self, port: int, *, headers: int, body: int, interval_s: float = 1.0):
        self.port, self.interval_s = port, interval_s
        self.kinds = ["headers"] * headers + ["body"] * body
        self.connections: list[SlowConnection] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)

    def __enter__(self) -> Slowloris:
        self.opened_at = time.monotonic()
        for kind in self.kinds:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.setblocking(False)
            chunks = _endless_headers() if kind == "headers" else _trickled_body()
            connection = SlowConnection(kind, sock, time.monotonic(), _chunks=chunks)
            if kind == "body":
                self._send(connection, next(chunks))  # the head at once: only the body trickles
            self.connections.append(connection)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for connection in self.connections:
            connection.sock.close()

    def released(self) -> list[SlowConnection]:
        return [c for c in self.connections if c.released_at is not None]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for connection in self.connections:
                if connection.released_at is None:
                    self._drip(connection)

    def _drip(self, connection: SlowConnection) -> None:
        self._read(connection)
        if connection.released_at is not None:
            return
        if not connection.pending:
            connection.pending = next(connection._chunks)
        self._send(connection, connection.pending[:1])
        connection.pending = connection.pending[1:]

    def _send(self, connection: SlowConnection, data: bytes) -> None:
        try:
            connection.sock.sendall(data)
        except OSError:
            connection.released_at = connection.released_at or time.monotonic()

    @staticmethod
    def _read(connection: SlowConnection) -> None:
        try:
            while data := connection.sock.recv(65536):
                connection.answer += data
        except BlockingIOError:
            return  # still open, nothing to read
        except OSError:
            pass  # reset by the server
        connection.released_at = time.monotonic()
