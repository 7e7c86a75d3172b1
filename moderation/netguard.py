"""Where the platform may send a client's webhook: refusing server-side request forgery.

A webhook URL is the client's, so it must not reach the platform's own network: loopback
(the database, /metrics), private ranges, link-local (cloud metadata at 169.254.169.254),
multicast, and every other special-purpose block of IANA's registries are refused, and so is an
IPv6 address that carries one of them (6to4, Teredo, NAT64, IPv4-mapped or -compatible: a packet
to 2002:7f00:1:: reaches 127.0.0.1 through a relay). Checked twice:

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
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

from moderation.errors import UnsafeWebhookUrl
from moderation.http_deadline import DeadlineBackend, DeadlineTransport


# The IANA IPv4 and IPv6 Special-Purpose Address Registries (every entry, as of 2025), with
# multicast and the deprecated site-local prefix. Every block is refused, whatever the registry's
# "globally reachable" column says of it: no webhook receiver lives at a protocol's anycast
# address or in a documentation prefix, and Python's own table (`is_global`) depends on the
# interpreter's patch release (3.11.7 calls 192.0.0.8 and 2002::/16 global).
SPECIAL_PURPOSE = {ipaddress.ip_network(block): name for block, name in {
    "0.0.0.0/8": "this network", "0.0.0.0/32": "this host", "10.0.0.0/8": "private-use",
    "100.64.0.0/10": "shared address space", "127.0.0.0/8": "loopback", "169.254.0.0/16": "link-local",
    "172.16.0.0/12": "private-use", "192.0.0.0/24": "IETF protocol assignments",
    "192.0.0.0/29": "IPv4 service continuity prefix", "192.0.0.8/32": "IPv4 dummy address",
    "192.0.0.9/32": "port control protocol anycast", "192.0.0.10/32": "TURN anycast",
    "192.0.0.170/32": "NAT64/DNS64 discovery", "192.0.0.171/32": "NAT64/DNS64 discovery",
    "192.0.2.0/24": "documentation", "192.31.196.0/24": "AS112", "192.52.193.0/24": "AMT",
    "192.88.99.0/24": "deprecated 6to4 relay anycast", "192.168.0.0/16": "private-use",
    "192.175.48.0/24": "AS112 direct delegation", "198.18.0.0/15": "benchmarking", "198.51.100.0/24": "documentation",
    "203.0.113.0/24": "documentation", "224.0.0.0/4": "multicast", "240.0.0.0/4": "reserved",
    "255.255.255.255/32": "limited broadcast",
    "::/128": "unspecified", "::1/128": "loopback", "::ffff:0:0/96": "IPv4-mapped",
    "::/96": "IPv4-compatible (deprecated)",
    "::ffff:0:0:0/96": "IPv4-translated", "64:ff9b:1::/48": "local-use IPv4/IPv6 translation",
    "100::/64": "discard-only", "100:0:0:1::/64": "dummy IPv6 prefix", "2001::/23": "IETF protocol assignments",
    "2001::/32": "Teredo", "2001:1::1/128": "port control protocol anycast", "2001:1::2/128": "TURN anycast",
    "2001:1::3/128": "DNS-SD service registration anycast", "2001:2::/48": "benchmarking", "2001:3::/32": "AMT",
    "2001:4:112::/48": "AS112", "2001:10::/28": "deprecated ORCHID", "2001:20::/28": "ORCHIDv2",
    "2001:30::/28": "drone remote ID", "2001:db8::/32": "documentation", "2002::/16": "6to4",
    "2620:4f:8000::/48": "AS112 direct delegation", "3fff::/20": "documentation", "5f00::/16": "SRv6 SIDs",
    "fc00::/7": "unique-local", "fe80::/10": "link-local", "fec0::/10": "deprecated site-local",
    "ff00::/8": "multicast",
}.items()}
# The NAT64 well-known prefix stands for the IPv4 address it carries (RFC 6052): DNS64 answers
# with it for every IPv4-only name on an IPv6-only host, so it is allowed when that address is.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# IPv6 forms that carry an IPv4 address at their /96 position (RFC 6052 for the local-use prefix,
# its most common length): what they carry is named when refused.
_CARRIES_LOW_32 = {
    ipaddress.ip_network("::/96"): "IPv4-compatible", ipaddress.ip_network("::ffff:0:0:0/96"): "IPv4-translated",
    ipaddress.ip_network("64:ff9b:1::/48"): "local-use NAT64",
}


# Said with every refusal of a URL, so that someone trying the platform on one machine knows the way.
LOCAL_TRIALS = ("for a local trial, run the platform and create_api_client with WEBHOOK_ALLOW_PRIVATE=1, which lets"
                " webhooks reach loopback and private addresses over plain http (never in production)")


def carried_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """(form, address) for each IPv4 address `ip` carries: a packet to `ip` may reach it."""
    carried = []
    if ip.ipv4_mapped:
        carried.append(("IPv4-mapped", ip.ipv4_mapped))
    if ip in _NAT64:
        carried.append(("NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)))
    carried += [(form, ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)) for net, form in _CARRIES_LOW_32.items()
                if ip in net and int(ip) > 1]  # (:: and ::1 carry nothing: they are themselves)
    if ip.sixtofour:
        carried.append(("6to4", ip.sixtofour))
    if ip.teredo:
        server, client = ip.teredo
        carried += [("Teredo server", server), ("Teredo client", client)]
    return carried


def address_refusal(address: str) -> str:
    """Why `address` (an IP literal) may not receive webhooks ("127.0.0.1 is in 127.0.0.0/8
    (loopback)"); "" when it may."""
    why = _refusal(address)
    return f"{address} {why}" if why else ""


def _refusal(address: str) -> str:
    """What makes `address` unfit, as a predicate ("is in 127.0.0.0/8 (loopback)"); "" if nothing.

    An IPv6 address that carries an IPv4 address (mapped, compatible, translated, 6to4, Teredo,
    NAT64) is refused when what it carries is; then every special-purpose block is refused
    (SPECIAL_PURPOSE, the most specific block named), and anything else Python does not call
    global. Only the NAT64 well-known prefix is judged by its IPv4 address alone."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # a scope id (fe80::1%eth0) says nothing
    if ip.version == 6:
        carried = carried_ipv4(ip)
        for form, inner in carried:
            if why := _refusal(str(inner)):
                return f"carries {inner} ({form}), which {why}"
        if ip in _NAT64:
            return ""  # it stands for that IPv4 address, which is public
    blocks = [net for net in SPECIAL_PURPOSE if ip in net]
    if blocks:
        block = max(blocks, key=lambda net: net.prefixlen)
        return f"is in {block} ({SPECIAL_PURPOSE[block]})"
    for kind in ("loopback", "link_local", "multicast", "private", "reserved", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            return f"is a {kind.replace('_', '-')} address"
    if not ip.is_global:
        return "is not a public address"
    return ""


def is_address_literal(host: str) -> bool:
    """Whether `host` is an IP address as written (no name to resolve)."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


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
        if why := _refusal(address):
            said = f"{host} {why}" if is_address_literal(host) else f"{host} resolves to {address}, which {why}"
            raise UnsafeWebhookUrl(said)
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


class GuardedBackend(DeadlineBackend):
    """httpcore's network backend for webhook deliveries: connects only to vetted addresses
    (see the module docstring), and bounds the whole exchange by `deadline` (time.monotonic)."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        try:
            addresses = resolve_public(host, port)
        except UnsafeWebhookUrl as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        # The first vetted address: the socket is opened to this IP, never to the name again.
        return super().connect_tcp(addresses[0], port, timeout, local_address, socket_options)


def guarded_transport(*, deadline: float) -> httpx.HTTPTransport:
    """An httpx transport for one webhook delivery: vetted addresses only, and every byte
    exchanged before `deadline` (time.monotonic())."""
    return DeadlineTransport(GuardedBackend(deadline))
