"""The browser tests that take the docs' screenshots (those using the `shots` fixture,
tests/browser/test_moderator_flow.py) carry the `screenshots` marker: `make screenshots` runs
only them, with UPDATE_SCREENSHOTS=1, so every picture in the README and docs/ is made again."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "shots" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.screenshots)
