"""Webhook URLs cannot reach the platform's own network (server-side request forgery), when
they are set and at every delivery, against the address actually connected to.

No test here connects beyond loopback: the resolver (`socket.getaddrinfo`) is patched, and a
connection to anything but loopback fails the test before it is attempted.
"""

from __future__ import annotations

import socket

import httpcore
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lab.simulator import WebhookReceiver
from moderation import services
from moderation.models import ApiClient, DecisionNotification, NotificationAttempt
from tests.helpers import examples, decided

PUBLIC = "93.184.216.34"  # never connected to: the resolver is patched, connects are guarded


@pytest.fixture
def guarded(settings, monkeypatch):
    """Production rules (no escape hatch), a fake resolver, and no connection but to loopback."""
    settings.WEBHOOK_ALLOW_PRIVATE = False
    answers: dict[str, list[str]] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host in ("127.0.0.1", "::1"):  # the socket module resolving a literal it connects to
            answers.setdefault(host, [host])
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        family = lambda a: socket.AF_INET6 if ":" in a else socket.AF_INET  # noqa: E731
        return [(family(a), socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    real_connect = httpcore.SyncBackend.connect_tcp

    def loopback_only(self, host, port, *args, **kwargs):
        assert host in ("127.0.0.1", "::1"), f"a test tried to connect to {host}"
        return real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", loopback_only)
    return answers


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.9.9.9", "::1", "10.0.0.5", "172.16.3.4", "192.168.1.1", "169.254.169.254", "fe80::1%eth0",
    "224.0.0.1", "ff02::1", "0.0.0.0", "::", "240.0.0.1", "100.64.0.1", "::ffff:127.0.0.1", "fc00::1",
])
def test_loopback_private_link_local_multicast_and_reserved_addresses_are_refused(address):
    from moderation.netguard import address_refusal

    assert address_refusal(address)


@pytest.mark.parametrize("address", [PUBLIC, "2606:2800:220:1:248:1893:25c8:1946"])
def test_public_addresses_are_allowed(address):
    from moderation.netguard import address_refusal

    assert address_refusal(address) == ""


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:5432/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:8000/hook",
    "http://internal.example/hook",  # resolves to a private address
    "http://mixed.example/hook",  # one public and one private answer
])
@pytest.mark.django_db
def test_create_api_client_refuses_urls_that_reach_the_platforms_network(guarded, url, settings):
    settings.DEBUG = True  # plain http allowed: the address is what is refused
    guarded.update({"127.0.0.1": ["127.0.0.1"], "169.254.169.254": ["169.254.169.254"], "::1": ["::1"],
                    "internal.example": ["10.1.2.3"], "mixed.example": [PUBLIC, "192.168.0.10"]})

    with pytest.raises(CommandError, match="webhook URL refused"):
        call_command("create_api_client", "probe", "--webhook-url", url)
    assert not ApiClient.objects.filter(name="probe").exists()


@pytest.mark.django_db
def test_a_public_https_url_is_accepted_and_plain_http_needs_debug(guarded, settings):
    from moderation.errors import UnsafeWebhookUrl
    from moderation.netguard import webhook_url_check

    guarded["hooks.example"] = [PUBLIC]
    settings.DEBUG = False

    webhook_url_check("https://hooks.example/moderation")  # resolved, never connected
    with pytest.raises(UnsafeWebhookUrl, match="https"):
        webhook_url_check("http://hooks.example/moderation")
    settings.DEBUG = True
    webhook_url_check("http://hooks.example/moderation")


@pytest.mark.django_db
def test_the_escape_hatch_allows_loopback_for_development(guarded, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    client, _ = services.api_client_create(name="dev", webhook_url="http://127.0.0.1:9000/hook")
    assert client.webhook_url == "http://127.0.0.1:9000/hook"


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_a_name_that_rebinds_to_a_private_address_is_refused_at_send_time_without_connecting(guarded, api_client):
    guarded["hooks.example"] = [PUBLIC]
    services.api_client_create(name="rebinder", webhook_url="https://hooks.example/moderation")
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url="https://hooks.example/moderation")
    decided(api_client, "approved")
    guarded["hooks.example"] = ["10.0.0.7"]  # DNS rebinding: now it points inside

    outcome = services.notification_deliver(notification_id=DecisionNotification.objects.get().pk)

    assert outcome == "retry_scheduled"
    attempt = NotificationAttempt.objects.get()
    assert attempt.status_code is None and "private" in attempt.error, attempt.error


@pytest.mark.usefixtures("on_commit_callbacks_run")
def test_delivery_connects_to_the_vetted_address_and_keeps_the_host_header(guarded, api_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    receiver = WebhookReceiver()
    port = receiver.server.server_address[1]
    guarded["hooks.example"] = ["127.0.0.1"]
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=f"http://hooks.example:{port}/moderation")
    decided(api_client, "approved")
    try:
        outcome = services.notification_deliver(notification_id=DecisionNotification.objects.get().pk)
    finally:
        receiver.stop()

    assert outcome == "delivered", NotificationAttempt.objects.values_list("error", flat=True)[0]
    headers, _ = receiver.received[0]
    assert headers["host"] == f"hooks.example:{port}"


@pytest.mark.django_db
def test_the_admin_refuses_a_webhook_url_that_reaches_the_platforms_network(guarded, admin_client):
    guarded["metadata.internal"] = ["169.254.169.254"]
    client, _ = services.api_client_create(name="acme-admin")

    response = admin_client.post(f"/admin/moderation/apiclient/{client.pk}/change/",
                                 {"name": "acme-admin", "webhook_url": "https://metadata.internal/latest"})

    assert response.status_code == 200 and "link-local" in response.content.decode()
    client.refresh_from_db()
    assert client.webhook_url == ""


# The IANA IPv4 and IPv6 Special-Purpose Address Registries (every entry, as of 2025), with
# multicast and the deprecated site-local prefix: no webhook receiver lives in any of them, and
# some (loopback, private, link-local metadata) are the platform's own network. Written out
# here from the registries, not imported from the code under test.
IPV4_SPECIAL = [
    "0.0.0.0/8", "0.0.0.0/32", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32", "192.0.0.170/32",
    "192.0.0.171/32", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
    "224.0.0.0/4",
]
IPV6_SPECIAL = [
    "::1/128", "::/128", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64", "2001::/23", "2001::/32",
    "2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:2::/48", "2001:3::/32", "2001:4:112::/48",
    "2001:10::/28", "2001:20::/28", "2001:30::/28", "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20",
    "5f00::/16", "fc00::/7", "fe80::/10", "ff00::/8", "fec0::/10", "::/96",
]


def _first_middle_last(block: str) -> list[str]:
    import ipaddress

    net = ipaddress.ip_network(block)
    return list(dict.fromkeys(str(a) for a in (net[0], net[net.num_addresses // 2], net[-1])))


@pytest.mark.parametrize("address", [a for block in IPV4_SPECIAL + IPV6_SPECIAL for a in _first_middle_last(block)])
def test_every_special_purpose_address_is_refused_as_the_answer_of_a_name(guarded, address):
    from moderation.errors import UnsafeWebhookUrl
    from moderation.netguard import webhook_url_check

    guarded["hooks.example"] = [address]

    with pytest.raises(UnsafeWebhookUrl, match="resolves to"):
        webhook_url_check("https://hooks.example/moderation")


# An IPv6 address that carries an IPv4 one reaches that IPv4 address: judged by what it carries.
CARRIED = {
    "127.0.0.1": "loopback", "169.254.169.254": "link-local", "10.1.2.3": "private", "192.0.0.8": "dummy",
    "100.64.0.1": "shared", "0.1.2.3": "this network", "198.18.0.1": "benchmarking",
}


def _carriers(v4: str) -> dict[str, str]:
    """`v4` in every IPv6 form that carries an IPv4 address."""
    import ipaddress

    n = int(ipaddress.IPv4Address(v4))
    public = int(ipaddress.IPv4Address(PUBLIC))
    return {
        "IPv4-mapped": str(ipaddress.IPv6Address((0xFFFF << 32) | n)),
        "IPv4-compatible": str(ipaddress.IPv6Address(n)),
        "IPv4-translated": str(ipaddress.IPv6Address((0xFFFF << 48) | n)),
        "6to4": str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)),
        "Teredo server": str(ipaddress.IPv6Address((0x20010000 << 96) | (n << 64) | (public ^ 0xFFFFFFFF))),
        "Teredo client": str(ipaddress.IPv6Address((0x20010000 << 96) | (public << 64) | (n ^ 0xFFFFFFFF))),
        "NAT64": str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),
        "local-use NAT64": str(ipaddress.IPv6Address((0x64FF9B0001 << 80) | n)),
    }


@pytest.mark.parametrize("v4", CARRIED)
@pytest.mark.parametrize("form", list(_carriers(PUBLIC)))
def test_an_ipv6_address_carrying_a_refused_ipv4_address_is_refused_and_says_which(guarded, v4, form):
    from moderation.errors import UnsafeWebhookUrl
    from moderation.netguard import address_refusal, webhook_url_check

    address = _carriers(v4)[form]
    guarded["hooks.example"] = [address]

    assert v4 in address_refusal(address) and CARRIED[v4] in address_refusal(address), address_refusal(address)
    with pytest.raises(UnsafeWebhookUrl, match="resolves to"):
        webhook_url_check("https://hooks.example/moderation")
    with pytest.raises(UnsafeWebhookUrl):
        webhook_url_check(f"https://[{address}]/moderation")


@pytest.mark.parametrize("address", ["2002:7f00:1::1", "2002:a9fe:a9fe::1", "192.0.0.8", "64:ff9b::a9fe:a9fe",
                                     "::ffff:169.254.169.254", "64:ff9b:1::7f00:1"])
def test_the_reported_bypasses_are_refused(address):
    from moderation.netguard import address_refusal

    assert address_refusal(address)


def test_a_public_ipv4_address_reached_through_nat64_is_allowed():
    """An IPv6-only host with DNS64 gets 64:ff9b::/96 answers for every IPv4-only name."""
    from moderation.netguard import address_refusal

    assert address_refusal(f"64:ff9b::{PUBLIC}") == ""


@pytest.mark.parametrize("form", ["6to4", "Teredo server", "IPv4-compatible", "IPv4-mapped", "local-use NAT64"])
def test_deprecated_and_local_tunnelling_forms_are_refused_even_carrying_a_public_address(form):
    from moderation.netguard import address_refusal

    assert address_refusal(_carriers(PUBLIC)[form])


def test_any_ipv4_address_is_judged_the_same_through_nat64_and_every_other_carrier_is_refused():
    import ipaddress

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from moderation.netguard import address_refusal

    @settings(max_examples=examples(500), deadline=None)
    @given(st.integers(min_value=0, max_value=2**32 - 1))
    def check(n):
        v4 = str(ipaddress.IPv4Address(n))
        assert (address_refusal(_carriers(v4)["NAT64"]) == "") == (address_refusal(v4) == "")
        for form, address in _carriers(v4).items():
            if form != "NAT64":
                assert address_refusal(address), (form, address)

    check()
