"""The README's walkthrough runs as written (issue 49): every `sh` block but those that start the
platform (`make run`, `make test`) is run, in order, by bash against the platform as `make run`
starts it (tests/e2e/conftest.py), from a fresh directory holding only what a clone has beside
`var/demo-credentials.txt`. A request answered 4xx/5xx fails the run (curl --fail-with-body), and
what each step should have done is then checked in the database.

Two things differ from a person's run, and only these: the address (a free port, not 8000), and
how long `sleep N` waits. After a step that started a process in the background (the fake
Transparency Database) it waits 2 N seconds; after the others, until no review is pending or
processing, polling the API, and at most 5 N seconds, for a machine shared by other tests."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from django.conf import settings
from PIL import Image

from lab import example_image
from lab.race_lab import database_url
from moderation.models import (
    AccountAppeal,
    Appeal,
    Author,
    ContentReview,
    ModerationPolicy,
    Report,
    ReviewStatus,
    StatementStatus,
    TransparencyStatement,
)
from tests.e2e.conftest import run_platform

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(settings.BASE_DIR)
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
PRELUDE = r"""set -euo pipefail
curl() { command curl --fail-with-body "$@"; }
idle() { api 'reviews/?status=pending' | grep -Eq '"results": ?\[\]' && api 'reviews/?status=processing' | grep -Eq '"results": ?\[\]'; }
sleep() {
  if [ -n "$(jobs -p)" ]; then command sleep $(( $1 * 2 )); return; fi  # a process started in the background
  local tries=$(( $1 * 25 ))
  until idle || [ $tries -le 0 ]; do command sleep 0.2; tries=$(( tries - 1 )); done
}
"""


def walkthrough_blocks() -> tuple[list[str], list[str]]:
    """The README's sh blocks: (those the walkthrough runs, those that start the platform)."""
    blocks = BLOCK.findall((ROOT / "README.md").read_text())
    starts = [b for b in blocks if re.search(r"\bmake (run|test)\b", b)]
    return [b for b in blocks if b not in starts], starts


def _bash(script: str, cwd: Path) -> tuple[int, str]:
    """Run `script`; then end its process group, so a process it left in the background (the
    fake Transparency Database, when a step fails before `kill %1`) cannot outlive the test.
    Output to a file: a background process holding a pipe would keep a reader waiting."""
    with tempfile.TemporaryFile(mode="w+") as output:
        process = subprocess.Popen(["bash", "-c", script], cwd=cwd, stdout=output, stderr=subprocess.STDOUT, text=True,
                                   env={**os.environ, "DATABASE_URL": database_url()}, start_new_session=True)
        try:
            returncode = process.wait(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        output.seek(0)
        return returncode, output.read()


def test_the_example_image_is_the_one_the_lab_script_draws():
    shipped = Image.open(ROOT / "docs" / "examples" / "known-bad.png").convert("RGB")
    assert shipped.tobytes() == example_image.draw().tobytes()


def test_only_the_blocks_that_start_the_platform_are_left_out():
    runs, starts = walkthrough_blocks()
    assert len(starts) == 2 and all("make run" in b for b in starts), starts  # two commands; other providers
    assert len(runs) >= 5 and all("make " not in b for b in runs)


def test_the_readme_walkthrough_runs_as_written_on_a_fresh_clone(api_client, tmp_path):
    runs, _ = walkthrough_blocks()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "demo-credentials.txt").write_text(f"API token: {api_client.token}\n")
    for name in (".venv", "manage.py", "docs", "lab"):
        (tmp_path / name).symlink_to(ROOT / name)
    with run_platform() as (_, port):
        script = PRELUDE + "\n".join(runs).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        returncode, said = _bash(script, tmp_path)
    assert returncode == 0, said[-4000:]

    by_external = {r.content.external_id: r for r in ContentReview.objects.select_related("content", "decision")}
    first, other = by_external["comment-1"], by_external["comment-2"]
    assert first.status == ReviewStatus.MANUAL_REVIEW and Appeal.objects.filter(review=first).exists()
    assert other.status == ReviewStatus.MANUAL_REVIEW
    assert sorted(Report.objects.filter(review=other).values_list("kind", flat=True)) == ["dsa_notice", "user"]
    author = Author.objects.get(author_id="user-9")
    assert author.standing == "suspended" and AccountAppeal.objects.filter(author=author).exists()
    image = by_external["image-1"]
    assert image.status == ReviewStatus.REJECTED and "bank:known-bad" in str(image.decision.rule_matches), said
    rule = by_external["comment-3"]
    assert rule.status == ReviewStatus.REJECTED and "insult:reject:id" in str(rule.decision.rule_matches)
    sent = TransparencyStatement.objects.filter(status=StatementStatus.SUBMITTED).count()
    promised = re.search(r"^# -> (submitted \d+, rejected 0, pending 0)", "\n".join(runs), re.MULTILINE).group(1)
    assert promised == f"submitted {sent}, rejected 0, pending 0" and re.search(rf"^{promised}$", said, re.MULTILINE), said[-3000:]
    assert "section,key,value" in said
    # "--candidate 4" in "Before a policy change acts": the walkthrough published versions 2 and 3.
    assert ModerationPolicy.objects.order_by("-version").values_list("version", flat=True).first() == 3
