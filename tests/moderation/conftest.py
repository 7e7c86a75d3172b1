"""Fixtures shared by the moderation tests."""

import pytest


@pytest.fixture
def local(settings):
    """The local model, in batches of 16 (a module that means the local model alone defines its own)."""
    settings.MODERATION_PROVIDER = "local"
    settings.MODERATION_BATCH_SIZE = 16
