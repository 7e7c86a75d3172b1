"""Outbound HTTP bounded by one overall deadline: connecting, and every read and write after it.

httpx's timeouts bound each read or write alone, so a peer trickling a byte every few seconds
holds its caller for as long as it likes. Webhook deliveries (moderation.netguard, which also vets
the addresses) and the `llm` provider's calls (moderation/providers/llm.py) go through these
instead, and end at their deadline whatever the peer does.
"""

from __future__ import annotations

import time

import httpcore
import httpx


class _DeadlineStream(httpcore.NetworkStream):
    """A stream whose every read and write waits at most until the attempt's deadline: a
    receiver trickling one byte every few seconds cannot stretch an attempt past it."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner, self._deadline = inner, deadline

    def _remaining(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the exchange's overall deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, self._remaining(timeout, httpcore.ReadTimeout))
        except httpcore.ReadTimeout:
            self._remaining(None, httpcore.ReadTimeout)  # says so when it was the deadline
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, self._remaining(timeout, httpcore.WriteTimeout))
        except httpcore.WriteTimeout:
            self._remaining(None, httpcore.WriteTimeout)
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        inner = self._inner.start_tls(ssl_context, server_hostname, self._remaining(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with the whole exchange bounded by `deadline` (time.monotonic):
    connecting, and every read and write after. A read timeout alone bounds each read, so a peer
    trickling a byte a second would hold the caller for ever; this one cannot. Any address goes
    (the `llm` provider's configured server, often on loopback); moderation.netguard.GuardedBackend
    vets them."""

    def __init__(self, deadline: float) -> None:
        self._inner, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the exchange's overall deadline passed")
        timeout = left if timeout is None else min(timeout, left)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, *args, **kwargs):
        raise httpcore.ConnectError("only TCP connections are made")

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, max(self._deadline - time.monotonic(), 0)))


class DeadlineTransport(httpx.HTTPTransport):
    """An httpx transport that connects through `backend` (a DeadlineBackend)."""

    def __init__(self, backend: DeadlineBackend, retries: int = 0) -> None:
        super().__init__(trust_env=False)  # no proxy from the environment: we connect ourselves
        # httpx offers no way to hand its connection pool a network backend, so the pool it
        # built is replaced by the same pool with ours (the only difference).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), network_backend=backend, retries=retries,
        )


def deadline_transport(*, deadline: float, retries: int = 0) -> httpx.HTTPTransport:
    """An httpx transport for one call to a server the operator configured (any address): every
    byte exchanged before `deadline` (time.monotonic()); `retries` failed connections retried."""
    return DeadlineTransport(DeadlineBackend(deadline), retries=retries)
