"""The notification cluster's schedules are bound once per deployment, even when every cluster's
sweep binds them at the same moment (a new Q_NAME): one row a name, and a pair made before is
merged, so no later sweep fails on it (moderation/services/heartbeat.py)."""

from __future__ import annotations

import pytest
from django_q.models import Schedule

from moderation import services
from moderation.services.heartbeat import quality_schedule
from tests.helpers import collide, reads_wait_for_each_other

NAMES = ("notifier_heartbeat", "statements_submit", "quality_minute")


def rows() -> dict[str, int]:
    return {func: Schedule.objects.filter(func=f"moderation.tasks.{func}").count() for func in NAMES}


@pytest.mark.django_db(transaction=True)
def test_sweeps_binding_a_new_deployments_schedules_at_once_make_one_row_each(settings, monkeypatch):
    """The guard: the advisory lock. Without it both sweeps read no row and each creates one."""
    settings.NOTIFY_CLUSTER = "fresh-deployment-notify"
    Schedule.objects.filter(func__in=[f"moderation.tasks.{f}" for f in NAMES]).delete()
    reads_wait_for_each_other(monkeypatch, Schedule, 2)

    collide(2, lambda i: services.notifier_schedule_ensure())

    assert rows() == {func: 1 for func in NAMES}
    assert set(Schedule.objects.filter(func__in=[f"moderation.tasks.{f}" for f in NAMES])
               .values_list("cluster", flat=True)) == {"fresh-deployment-notify"}


@pytest.mark.django_db
def test_a_pair_made_before_is_merged_and_the_sweep_goes_on(settings):
    settings.NOTIFY_CLUSTER = "old-deployment-notify"
    services.notifier_schedule_ensure()
    twin = Schedule.objects.get(name=quality_schedule())
    twin.pk = None
    twin.save()  # what an unguarded race left: before the lock, every later sweep failed on it

    services.notifier_schedule_ensure()

    assert Schedule.objects.filter(name=quality_schedule()).count() == 1
