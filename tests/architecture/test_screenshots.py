"""Every screenshot the README and docs/ show is taken by a browser test (with the `shots`
fixture, so `make screenshots` makes it again), and docs/screenshots/ holds no picture that no
test takes or no page shows: re-running the tests renews every picture, and only those."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOWN = re.compile(r"\]\((?:docs/)?screenshots/([\w.-]+\.png)\)")
TAKEN = re.compile(r"""shots / ["']([\w.-]+\.png)["']""")


def shown() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {name for page in pages for name in SHOWN.findall(page.read_text())}


def taken() -> set[str]:
    return {name for test in sorted((ROOT / "tests" / "browser").glob("test_*.py"))
            for name in TAKEN.findall(test.read_text())}


def test_every_screenshot_the_docs_show_is_taken_by_a_browser_test():
    assert len(shown()) >= 10 and len(taken()) >= 10  # the patterns found the pictures
    assert sorted(shown() - taken()) == [], "shown in the docs, taken by no test (make screenshots keeps it stale)"


def test_every_picture_in_docs_screenshots_is_taken_and_shown():
    stored = {path.name for path in (ROOT / "docs" / "screenshots").glob("*.png")}
    assert sorted(stored - taken()) == [], "in docs/screenshots/, taken by no test"
    assert sorted(stored - shown()) == [], "in docs/screenshots/, shown by no page"
    assert sorted(taken() - stored) == [], "taken by a test, never stored: run make screenshots"
