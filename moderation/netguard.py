"""Where the platform may send a client's webhook: refusing server-side request forgery.

A webhook URL is the client's, so it must not reach the platform's own network: loopback
(the database, /metrics), private ranges, link-local (cloud metadata at 169.254.169.254),
multicast, and reserved or unspecified addresses are refused. Checked twice:

- when the URL is set (`webhook_url_check`), so a client learns at once;
- at send time, on the address actually connected to (`GuardedBackend`): the name is resolved
  once, every address it resolves to is classified, and the socket is opened to a vetted
  address. A name that resolved to a public address when it was set and to 127.0.0.1 now (DNS
  rebinding) is refused at connect time. TLS keeps the URL's host name for SNI and certificate
  checks, and the Host header is the URL's, because only the TCP connect is redirected.

`WEBHOOK_ALLOW_PRIVATE` (development, tests, the race lab on loopback) turns the address check
off and allows plain http without DEBUG.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

from moderation.errors import UnsafeWebhookUrl


def address_refusal(address: str) -> str:
    """Why `address` (an IP literal) may not receive webhooks; "" when it may."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # a scope id (fe80::1%eth0) says nothing
    if ip.version == 6 and ip.ipv4_mapped:  # ::ffff:127.0.0.1 is 127.0.0.1
        ip = ip.ipv4_mapped
    for kind in ("loopback", "link_local", "multicast", "private", "reserved", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            return f"{address} is a {kind.replace('_', '-')} address"
    if not ip.is_global:  # shared address space (100.64/10), 6to4 relays and the like
        return f"{address} is not a public address"
    return ""


def resolve_public(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, all of them allowed; UnsafeWebhookUrl if any is not (a
    name that mixes public and private answers is refused as a whole)."""
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnsafeWebhookUrl(f"{host} does not resolve: {exc}") from exc
    addresses = list(dict.fromkeys(answer[4][0] for answer in answers))
    if settings.WEBHOOK_ALLOW_PRIVATE:
        return addresses
    for address in addresses:
        if why := address_refusal(address):
            raise UnsafeWebhookUrl(f"{host} resolves to {why}")
    return addresses


def webhook_url_check(url: str) -> None:
    """Raise UnsafeWebhookUrl unless `url` may receive webhooks (checked when a URL is set)."""
    parts = urlsplit(url)
    allow_http = settings.DEBUG or settings.WEBHOOK_ALLOW_PRIVATE
    if parts.scheme != "https" and not (allow_http and parts.scheme == "http"):
        raise UnsafeWebhookUrl("webhook URLs must use https" if not allow_http else "webhook URLs must be http(s)")
    if not parts.hostname:
        raise UnsafeWebhookUrl("the webhook URL has no host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise UnsafeWebhookUrl(f"the webhook URL's port is invalid: {exc}") from exc
    if not settings.WEBHOOK_ALLOW_PRIVATE:  # (with it, any address goes: nothing to look up)
        resolve_public(parts.hostname, port)


class _DeadlineStream(httpcore.NetworkStream):
    """A stream whose every read and write waits at most until the attempt's deadline: a
    receiver trickling one byte every few seconds cannot stretch an attempt past it."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner, self._deadline = inner, deadline

    def _remaining(self, timeout: float | None, error: type[Exception]) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise error("the delivery's overall deadline passed")
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


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend for webhook deliveries: connects only to vetted addresses
    (see the module docstring), and bounds the whole exchange by `deadline` (time.monotonic)."""

    def __init__(self, deadline: float) -> None:
        self._inner, self._deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        try:
            addresses = resolve_public(host, port)
        except UnsafeWebhookUrl as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the delivery's overall deadline passed")
        timeout = left if timeout is None else min(timeout, left)
        # The first vetted address: the socket is opened to this IP, never to the name again.
        stream = self._inner.connect_tcp(addresses[0], port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(self, *args, **kwargs):
        raise httpcore.ConnectError("webhooks are delivered over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, max(self._deadline - time.monotonic(), 0)))


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, deadline: float) -> None:
        super().__init__(trust_env=False)  # no proxy from the environment: we connect ourselves
        # httpx offers no way to hand its connection pool a network backend, so the pool it
        # built is replaced by the same pool with ours (the only difference).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), network_backend=GuardedBackend(deadline),
        )


def guarded_transport(*, deadline: float) -> httpx.HTTPTransport:
    """An httpx transport for one webhook delivery: vetted addresses only, and every byte
    exchanged before `deadline` (time.monotonic())."""
    return _GuardedTransport(deadline)
