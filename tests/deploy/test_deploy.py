"""What ships in deploy/: alert rules that promtool accepts and whose unit tests pass, a dashboard
and alerts that use only metrics /metrics exports, and systemd units that systemd accepts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

DEPLOY = Path(settings.BASE_DIR) / "deploy"


def _installed(tool: str, package: str) -> str | None:
    """The tool, installed from Debian's package when missing (the test set-up does it, as root)."""
    if shutil.which(tool) or not (shutil.which("apt-get") and os.geteuid() == 0):
        return shutil.which(tool)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "install", "-y", "-q", package], ["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", package]):
        if shutil.which(tool):
            break
        subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
    return shutil.which(tool)


@pytest.fixture(scope="module")
def promtool() -> str:
    path = _installed("promtool", "prometheus")
    if path is None:
        pytest.skip("promtool is missing and Debian's prometheus package could not be installed")
    return path


def test_the_alert_rules_are_valid(promtool):
    run = subprocess.run([promtool, "check", "rules", "alerts.yml"], cwd=DEPLOY / "prometheus",
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_alerts_fire_on_the_series_that_should_fire_them(promtool):
    run = subprocess.run([promtool, "test", "rules", "alerts_test.yml"], cwd=DEPLOY / "prometheus",
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def _used_metrics() -> set[str]:
    rules = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    dashboard = json.loads((DEPLOY / "grafana" / "moderation-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    return set(re.findall(r"\bmoderation_[a-z_]+\b", rules + "\n".join(exprs)))


@pytest.mark.django_db
def test_the_alerts_and_the_dashboard_use_only_metrics_that_are_exported(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_CACHE_S = "scrape-me", 0
    from moderation.models import ProviderCircuit

    ProviderCircuit.objects.create(provider="webhook")  # (circuits appear once a provider has one)
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
    families = list(text_string_to_metric_families(body))
    exported = {s.name for family in families for s in family.samples}
    # (A family without samples yet is still declared, counters under their _total name.)
    exported |= {family.name + ("_total" if family.type == "counter" else "") for family in families}

    used = _used_metrics()

    assert len(used) >= 10 and used <= exported, sorted(used - exported)


def test_the_systemd_units_are_valid():
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    units = DEPLOY / "systemd"
    # The units name /srv/moderation; verify them as installed here (the executables must exist).
    rendered = Path(os.environ.get("TMPDIR", "/tmp")) / f"moderation-units-{os.getpid()}"
    rendered.mkdir(exist_ok=True)
    for unit in units.iterdir():
        text = unit.read_text().replace("/srv/moderation/.venv/bin/python", sys.executable)
        text = text.replace("/srv/moderation/.venv", sys.prefix).replace("/srv/moderation", str(settings.BASE_DIR))
        (rendered / unit.name).write_text(text)
    run = subprocess.run([analyze, "verify", "moderation-web.service", "moderation-cluster@1.service", "moderation-notify@1.service",
                          "moderation.target"], cwd=rendered, capture_output=True, text=True, check=False)
    shutil.rmtree(rendered)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_stopping_cluster_may_finish_its_running_task_before_systemd_kills_it():
    unit = (DEPLOY / "systemd" / "moderation-cluster@.service").read_text()
    timeout = int(re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M).group(1))
    # SIGTERM to the master only (its workers die at once on their own), the rest killed at the end.
    assert re.search(r"^KillMode=mixed$", unit, re.M)
    assert timeout >= settings.Q_TASK_TIMEOUT_S + 10
