"""What ships in deploy/: alert rules that promtool accepts and whose unit tests pass, a dashboard
and alerts that use only metrics /metrics exports, systemd units that systemd accepts, and an
nginx configuration that nginx accepts and that docs/operations.md describes as it is."""

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


NGINX_SITE = DEPLOY / "nginx" / "moderation.conf"


@pytest.fixture(scope="module")
def nginx(tmp_path_factory) -> str:
    """nginx, or Debian's package unpacked in a temporary directory when it is missing: installing
    it would start a server on port 80."""
    if shutil.which("nginx"):
        return shutil.which("nginx")
    where = tmp_path_factory.mktemp("nginx-package")
    binary = where / "root" / "usr" / "sbin" / "nginx"
    if shutil.which("apt-get") and shutil.which("dpkg-deb"):
        for command in (["apt-get", "download", "nginx"], ["apt-get", "update", "-q"], ["apt-get", "download", "nginx"]):
            if list(where.glob("nginx_*.deb")):
                break
            subprocess.run(command, cwd=where, capture_output=True, timeout=900, check=False)
        for package in where.glob("nginx_*.deb"):
            subprocess.run(["dpkg-deb", "-x", str(package), str(where / "root")], capture_output=True, check=False)
    if not binary.exists():
        pytest.skip("nginx is missing and Debian's nginx package could not be unpacked")
    return str(binary)


def _nginx_test(nginx: str, site: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`nginx -t` on the site as installed in /etc/nginx/conf.d, with a certificate made here."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                   capture_output=True, check=True)
    site = re.sub(r"/etc/letsencrypt/live/[^/]+/fullchain\.pem", str(tmp_path / "cert.pem"), site)
    site = re.sub(r"/etc/letsencrypt/live/[^/]+/privkey\.pem", str(tmp_path / "key.pem"), site)
    (tmp_path / "site.conf").write_text(site)
    temp = "\n".join(f"    {kind}_temp_path {tmp_path}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp_path / "nginx.conf").write_text(
        f"events {{}}\nhttp {{\n    access_log off;\n{temp}\n    include {tmp_path}/site.conf;\n}}\n")
    return subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                           "-e", str(tmp_path / "error.log")], capture_output=True, text=True, check=False)


def test_the_nginx_config_is_valid(nginx, tmp_path):
    run = _nginx_test(nginx, NGINX_SITE.read_text(), tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def test_nginx_refuses_a_broken_config(nginx, tmp_path):
    """(So the test above can fail.)"""
    broken = NGINX_SITE.read_text().replace("client_header_timeout 10s;", "client_header_timeout 10s 5;")
    run = _nginx_test(nginx, broken, tmp_path)
    assert run.returncode != 0 and "client_header_timeout" in run.stderr


def _seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def test_the_operations_guide_states_the_proxy_limits_the_config_sets():
    guide = (Path(settings.BASE_DIR) / "docs" / "operations.md").read_text()
    section = guide.split("\n## Slow clients\n", 1)[1].split("\n## ", 1)[0]
    # Every `directive value` the section quotes (nginx's names all have an underscore).
    stated = {name: value for name, value in re.findall(r"`([a-z_]+) ([^`]+)`", section) if "_" in name}
    configured = dict(re.findall(r"^\s*([a-z_]+) ([^;#]+);", NGINX_SITE.read_text(), re.M))

    assert {"client_header_timeout", "client_body_timeout", "client_max_body_size", "proxy_request_buffering",
            "keepalive_timeout", "keepalive_requests"} <= stated.keys()
    assert {name: configured.get(name) for name in stated} == stated
    # The proxy lets through what the web tier accepts, and waits for a head no longer than it.
    assert int(configured["client_max_body_size"].removesuffix("m")) * 1024 * 1024 >= settings.REQUEST_MAX_BODY_BYTES
    assert _seconds(configured["client_header_timeout"]) <= settings.REQUEST_HEADER_TIMEOUT_S
    assert configured["proxy_request_buffering"] == "on"
