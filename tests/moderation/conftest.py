"""Fixtures shared by the moderation tests."""

import pytest
from tests.helpers import staff_browser


@pytest.fixture
def local(settings):
    """The local model, in batches of 16 (a module that means the local model alone defines its own)."""
    settings.MODERATION_PROVIDER = "local"
    settings.MODERATION_BATCH_SIZE = 16


@pytest.fixture
def webhook_receiver(api_client):
    """A loopback webhook receiver that `api_client`'s notifications are delivered to."""
    from lab.simulator import WebhookReceiver
    from moderation.models import ApiClient

    server = WebhookReceiver()
    ApiClient.objects.filter(pk=api_client.pk).update(webhook_url=server.url)
    api_client.refresh_from_db()
    yield server
    server.stop()


# Two staff users many workplace tests share: mia a moderator, sam a supervisor (a module that needs
# other roles defines its own).
@pytest.fixture
def mia(django_user_model):
    return staff_browser(django_user_model, "mia", "moderator")


@pytest.fixture
def sam(django_user_model):
    return staff_browser(django_user_model, "sam", "supervisor")
