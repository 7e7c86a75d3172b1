"""Rows the platform relies on (the first policy, the sweepers' schedules, the roles), created
after every `migrate` (and every `flush`).

Django emits post_migrate after both, so a database that was emptied gets them back too;
a data migration would not.
"""

from __future__ import annotations

from datetime import timedelta

SWEEP = "moderation.sweep"
AUTHORS_SWEEP = "moderation.authors_sweep"
REPORTS_EXPIRE = "moderation.reports_expire"
PRUNE = "moderation.prune"
# A second schedule of the same sweeper, half a period later: django-q2 schedules in whole
# minutes, so two rows make a silent operation wait half as long to be noticed.
SWEEP_HALF = "moderation.sweep (half a period later)"


def ensure_defaults(**kwargs) -> None:
    from django.conf import settings
    from django.utils import timezone
    from django_q.models import Schedule

    from moderation.roles import ensure_roles
    from moderation.services.heartbeat import notifier_schedule_ensure
    from moderation.services.policy import policy_ensure_default

    policy_ensure_default()
    ensure_roles()
    every = {
        "func": "moderation.tasks.sweep",
        "schedule_type": Schedule.MINUTES,
        "minutes": settings.MODERATION_SWEEP_EVERY_MIN,
        "repeats": -1,
    }
    now = timezone.now()
    for name, offset in ((SWEEP, 0), (SWEEP_HALF, 30 * settings.MODERATION_SWEEP_EVERY_MIN)):
        Schedule.objects.update_or_create(
            name=name, defaults=every, create_defaults={**every, "next_run": now + timedelta(seconds=offset)}
        )
    # Suspensions end and strikes lapse at the sweeper's pace, on any cluster (moderation.tasks.authors_sweep).
    authors = {**every, "func": "moderation.tasks.authors_sweep"}
    Schedule.objects.update_or_create(name=AUTHORS_SWEEP, defaults=authors, create_defaults={**authors, "next_run": now})
    # User reports left open past the policy's report_expiry_days expire at the same pace, on any
    # cluster (moderation.tasks.reports_expire).
    reports = {**every, "func": "moderation.tasks.reports_expire"}
    Schedule.objects.update_or_create(name=REPORTS_EXPIRE, defaults=reports, create_defaults={**reports, "next_run": now})
    # The notification cluster's heartbeat: a schedule only that cluster runs (the sweeper's
    # proves the moderation cluster is up).
    notifier_schedule_ensure()
    # Retention (moderation/privacy/retention.py): daily, first run an hour after the first migrate.
    Schedule.objects.get_or_create(
        name=PRUNE,
        defaults={"func": "moderation.tasks.prune", "schedule_type": Schedule.DAILY, "repeats": -1,
                  "next_run": now + timedelta(hours=1)},
    )
