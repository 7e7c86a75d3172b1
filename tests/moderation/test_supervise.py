"""The supervisor `run_platform` becomes (moderation/management/supervise.py): a child that exits
on its own is started again, and one that keeps exiting stops everything."""

from __future__ import annotations

import json
import subprocess
import sys

from django.conf import settings

from moderation.management.supervise import RESTART_LIMIT


def test_a_child_that_keeps_exiting_is_started_again_up_to_the_limit_then_everything_stops(tmp_path):
    starts = tmp_path / "starts"
    quitter = f"open({str(starts)!r}, 'a').write('started\\n')"
    spec = {"banner": "up", "children": [
        {"name": "quitter", "argv": [sys.executable, "-c", quitter], "env": {}},
        {"name": "sleeper", "argv": [sys.executable, "-c", "import time; time.sleep(60)"], "env": {}},
    ]}

    done = subprocess.run([sys.executable, "-m", "moderation.management.supervise", json.dumps(spec)],
                          cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=60)

    assert starts.read_text().count("started") == RESTART_LIMIT + 1  # the first start and each restart
    assert done.stderr.count("quitter exited (0); starting it again") == RESTART_LIMIT
    assert f"quitter exited {RESTART_LIMIT + 1} times within" in done.stderr
    assert done.returncode == 1 and "Stopped (quitter exit 0, sleeper exit -15)" in done.stdout
