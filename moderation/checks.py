"""System checks (`manage.py check`): refuse job settings that could run a task twice at once,
and a migrate that a squashed migration could not finish.

django-q2 only prints a warning for some of these; here they fail the check, and so `make
test`, CI and a deploy that runs `check --deploy`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from moderation.netguard import address_refusal, is_address_literal
from moderation.retry_budget import TASK_MARGIN_S, provider_worst_case_s


@register("moderation")
def check_job_settings(app_configs=None, **kwargs) -> list:
    q = settings.Q_CLUSTER
    timeout, retry = q.get("timeout"), q.get("retry", 60)
    workers = q.get("workers", 1)
    errors = []
    if not timeout:
        errors.append(Error("Q_CLUSTER['timeout'] must be set: a hung task would hold its worker for ever.", id="moderation.E001"))
    else:
        if retry < 2 * timeout:
            errors.append(Error(
                f"Q_CLUSTER['retry'] ({retry}s) is shorter than twice the task timeout ({timeout}s).",
                hint="retry is a lease counted from dequeue: a task still running when it ends is handed to a second worker.",
                id="moderation.E002",
            ))
        if provider_worst_case_s() + TASK_MARGIN_S > timeout:
            errors.append(Error(
                f"A provider attempt may take {provider_worst_case_s():g}s (PROVIDER_TIMEOUT_S with HTTP retries), "
                f"which does not fit in the task timeout ({timeout}s) with {TASK_MARGIN_S}s to spare.",
                hint="Raise Q_TASK_TIMEOUT_S or lower PROVIDER_TIMEOUT_S: a killed task is delivered again while its request may still be in flight.",
                id="moderation.E003",
            ))
        if settings.MODERATION_STUCK_AFTER_S <= provider_worst_case_s():
            # (Not the task lease: reconcile asks the provider before superseding, and an
            # operation whose attempt is in flight is only dispatched again, which dispatch
            # skips while that attempt's lease runs.)
            errors.append(Error(
                f"MODERATION_STUCK_AFTER_S ({settings.MODERATION_STUCK_AFTER_S:g}s) must exceed one provider "
                f"attempt ({provider_worst_case_s():g}s).",
                hint="Otherwise every attempt still waiting for its answer is looked at as silent. "
                "Set PROVIDER_EXPECTED_LATENCY_S (the deadline is derived from it) or MODERATION_STUCK_AFTER_S.",
                id="moderation.E004",
            ))
    if q.get("max_attempts", 0) != 1:
        errors.append(Error(
            "Q_CLUSTER['max_attempts'] must be 1: retries belong to our attempt records (bounded, with backoff), "
            "not to broker redelivery of failed tasks.",
            id="moderation.E005",
        ))
    if q.get("ack_failures") is not True:
        errors.append(Error("Q_CLUSTER['ack_failures'] must be True: a failed task must not come back by itself.", id="moderation.E006"))
    if q.get("bulk", 1) != 1:
        errors.append(Error("Q_CLUSTER['bulk'] must be 1: prefetched tasks burn their retry lease while they wait.", id="moderation.E007"))
    if q.get("queue_limit", workers**2) > 2 * workers:
        errors.append(Warning(
            f"Q_CLUSTER['queue_limit'] ({q.get('queue_limit', workers**2)}) is far above the worker count ({workers}).",
            hint="Tasks waiting in a cluster's local job queue burn their retry lease.",
            id="moderation.W001",
        ))
    if q.get("save_limit", 250) > 0:  # django-q2's default is 250
        errors.append(Warning(
            f"Q_CLUSTER['save_limit'] ({q.get('save_limit', 250)}) stores successful task results.",
            hint="Every finished task then locks and loads up to that many stored results (django_q.monitor.save_task), "
            "serialised by the lock: set it to -1 (failures are still stored).",
            id="moderation.W003",
        ))
    # (moderation.W002, "REDIS_URL is not set: rate limits are counted per process", is gone: they
    # are counted in PostgreSQL, moderation/web/throttles.py.)
    from moderation.providers import get_provider

    try:
        get_provider(settings.MODERATION_PROVIDER)
    except LookupError as exc:
        errors.append(Error(str(exc), hint="Set MODERATION_PROVIDER to an available provider.", id="moderation.E008"))
    return errors


@register("moderation")
def check_provider_key_in_clear(app_configs=None, **kwargs) -> list:
    """A remote provider's key sent over plain http travels in clear, unless the server is on
    this machine or a private network (a local model server: docs/providers.md). Only an
    address written as such is known to be one; a name is not looked up."""
    url = urlsplit(settings.PROVIDER_URL)
    if settings.MODERATION_PROVIDER not in ("openai", "webhook", "llm") or not settings.PROVIDER_API_KEY \
            or url.scheme != "http" or url.hostname is None:
        return []
    host = url.hostname
    if host == "localhost" or (is_address_literal(host) and address_refusal(host)):
        return []  # loopback or a private address: the key stays off the internet
    return [Warning(
        f"PROVIDER_API_KEY is sent over plain http to {host}: anyone on the way can read it.",
        hint="Use an https PROVIDER_URL, or leave PROVIDER_API_KEY empty for a local model server that needs none.",
        id="moderation.W004",
    )]


@register(Tags.database)
def check_squashed_migrations(app_configs=None, databases=None, **kwargs) -> list:
    """A database that applied some but not all of the migrations a squashed one replaces, whose
    files are gone, cannot be migrated: Django can run neither the squash (part of it is applied)
    nor the rest of the old migrations (no files). Left alone, `migrate` then fails on a
    "conflict" and suggests `makemigrations --merge`, which would write a wrong migration.

    A database check: `manage.py migrate` and `manage.py check --database default` run it
    before they touch the database (docs/operations.md, "Squashed migrations")."""
    errors = []
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for alias in databases or ():
        recorder = MigrationRecorder(connections[alias])
        if not recorder.has_table():
            continue
        applied = set(recorder.applied_migrations())
        for (app, name), migration in sorted(loader.replacements.items()):
            replaced = [tuple(key) for key in migration.replaces]
            done = [key for key in replaced if key in applied]
            if not done or len(done) == len(replaced) or all(key in loader.disk_migrations for key in replaced):
                continue  # Django runs all of it, none of it, or the rest of the old files
            missing = ", ".join(f"{a}.{n}" for a, n in replaced if (a, n) not in applied)
            errors.append(Error(
                f"Database '{alias}' applied {', '.join(f'{a}.{n}' for a, n in done)} but not {missing}, "
                f"all replaced by the squashed migration {app}.{name}, and their files are gone.",
                hint="Migrate this database first with a checkout that still has them "
                '(docs/operations.md, "Squashed migrations", names the commit), then with this one.',
                id="moderation.E009",
            ))
    return errors
