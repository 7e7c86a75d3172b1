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
from tests.helpers import decided

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


@pytest.mark.django_db(transaction=True)
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


@pytest.mark.django_db(transaction=True)
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
