"""Bad configuration fails loudly at start-up (each case starts a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings


def start(**env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x"), **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=environ,
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PROVIDER_TIMEOUT_S": "soon"}, "PROVIDER_TIMEOUT_S must be a number"),
        ({"PROVIDER_TIMEOUT_S": "-1"}, "PROVIDER_TIMEOUT_S must be a positive number"),
        ({"MODERATION_PROVIDER": "magic"}, "MODERATION_PROVIDER must be one of"),
        ({"MODERATION_PROVIDER": "webhook", "PROVIDER_URL": ""}, "PROVIDER_URL is required"),
        ({"MODERATION_PROVIDER": "llm", "PROVIDER_URL": ""}, "PROVIDER_URL is required"),
        ({"MODERATION_PROVIDER": "llm", "PROVIDER_URL": "http://127.0.0.1:11434", "PROVIDER_MODEL": ""},
         "PROVIDER_MODEL is required with MODERATION_PROVIDER=llm"),
        ({"DEBUG": "0", "ALLOWED_HOSTS": "example.com"}, "SECRET_KEY must be set"),
        ({"DEBUG": "0", "SECRET_KEY": "x" * 60, "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS must be set"),
        ({"DATABASE_URL": "sqlite:///db.sqlite3"}, "DATABASE_URL must point at PostgreSQL"),
        ({"PUBLIC_BASE_URL": "example.com"}, "PUBLIC_BASE_URL must be an http(s) URL"),
        ({"CALLBACK_RETENTION_DAYS": "3"}, "CALLBACK_RETENTION_DAYS must be at least 7"),
        ({"PROVIDER_KINDS": "text,audio"}, "PROVIDER_KINDS may list only text, metadata, image"),
        ({"DB_POOL_MODE": "session"}, "DB_POOL_MODE must be empty"),
        ({"DB_PREPARE_THRESHOLD": "often"}, "DB_PREPARE_THRESHOLD must be a whole number from 1, or off"),
        ({"DB_PREPARE_THRESHOLD": "0"}, "DB_PREPARE_THRESHOLD must be a whole number from 1, or off"),
        ({"DB_PREPARE_THRESHOLD": "5", "DB_POOL_MODE": "transaction"}, "must stay unset behind PgBouncer"),
        ({"MODERATION_PROVIDER": "webhook", "PROVIDER_URL": "http://127.0.0.1:9", "PROVIDER_WEBHOOK_SECRET": ""},
         "needs PROVIDER_WEBHOOK_SECRET, the secret the provider signs callbacks with. Make one with"),
        ({"Q_CLUSTER_NAME": "lab-old"}, "Q_CLUSTER_NAME selects a cluster"),
        ({"MODERATION_BATCH_SIZE": "0"}, "MODERATION_BATCH_SIZE must be a whole number from 1 to 256, got 0"),
        ({"MODERATION_BATCH_SIZE": "257"}, "MODERATION_BATCH_SIZE must be a whole number from 1 to 256, got 257"),
        ({"MODERATION_BATCH_SIZE": "lots"}, "MODERATION_BATCH_SIZE must be a whole number from 1 to 256, got 'lots'"),
        ({"NOTIFY_SLOW_SHARE": "1.5"}, "NOTIFY_SLOW_SHARE is a share of NOTIFY_WORKERS: at most 1"),
        ({"NOTIFY_SLOW_SHARE": "0"}, "NOTIFY_SLOW_SHARE must be a positive number"),
        ({"NOTIFY_SLOW_AFTER_S": "15"}, "NOTIFY_SLOW_AFTER_S must be below NOTIFY_DEADLINE_S"),
        ({"REQUEST_HEADER_TIMEOUT_S": "61"}, "REQUEST_HEADER_TIMEOUT_S must be at most 60 seconds, got 61"),
        ({"REQUEST_BODY_TIMEOUT_S": "0"}, "REQUEST_BODY_TIMEOUT_S must be a positive number"),
    ],
)
def test_an_unsafe_or_malformed_setting_refuses_to_start(env, message):
    process = start(**env)
    assert process.returncode != 0
    assert "ImproperlyConfigured" in process.stderr and message in process.stderr


def test_production_settings_start_when_configured():
    process = start(DEBUG="0", SECRET_KEY="s" * 60, ALLOWED_HOSTS="moderation.example.com")
    assert process.returncode == 0, process.stderr


def check_deploy(**env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "DEBUG": "0", "SECRET_KEY": "s3cr3t-" * 10, "ALLOWED_HOSTS": "moderation.example.com",
               "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@127.0.0.1/x"), **env}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          env=environ, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)


def test_production_settings_pass_check_deploy_with_no_warnings():
    run = check_deploy(REDIS_URL="redis://127.0.0.1:6379/0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no issues" in run.stdout


def test_production_without_redis_passes_too_its_rate_limits_are_shared_in_postgresql():
    run = check_deploy(REDIS_URL="")
    assert run.returncode == 0 and "no issues" in run.stdout, run.stdout + run.stderr


def test_the_callback_address_follows_the_port_served_unless_set():
    show = "import django; django.setup(); from django.conf import settings as s; print(s.PUBLIC_BASE_URL)"
    env = {k: v for k, v in os.environ.items() if k != "PUBLIC_BASE_URL"}
    process = subprocess.run([sys.executable, "-c", show], env={**env, "PORT": "8011"}, capture_output=True, text=True,
                             cwd=settings.BASE_DIR, timeout=60)
    assert process.stdout.strip() == "http://127.0.0.1:8011", process.stderr


@pytest.mark.parametrize(("redis_url", "broker"), [("", "orm"), ("redis://127.0.0.1:6379/3", "redis")])
def test_the_broker_is_the_database_unless_redis_url_is_set(redis_url, broker):
    process = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings as s; "
         "print(sorted(k for k in ('orm', 'redis') if k in s.Q_CLUSTER))"],
        env={**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@h/x")},
        capture_output=True, text=True, cwd=settings.BASE_DIR, timeout=60,
    )
    assert process.stdout.strip() == str([broker]), process.stderr


@pytest.mark.parametrize(("env", "options"), [
    ({}, "5 True"),  # direct connections: prepared after five runs, parameters bound server-side
    ({"DB_PREPARE_THRESHOLD": "2"}, "2 True"),
    ({"DB_PREPARE_THRESHOLD": "off"}, "None None"),
    ({"DB_POOL_MODE": "transaction"}, "None None"),  # PgBouncer: a prepared statement is one server's
])
def test_statements_are_prepared_on_direct_connections_unless_turned_off(env, options):
    show = ("import django; django.setup(); from django.conf import settings as s; "
            "o = s.DATABASES['default']['OPTIONS']; print(o.get('prepare_threshold'), o.get('server_side_binding'))")
    environ = {k: v for k, v in os.environ.items() if k not in ("DB_PREPARE_THRESHOLD", "DB_POOL_MODE")}
    process = subprocess.run(
        [sys.executable, "-c", show],
        env={**environ, "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://x@h/x"), **env},
        capture_output=True, text=True, cwd=settings.BASE_DIR, timeout=60,
    )
    assert process.stdout.strip() == options, process.stderr
