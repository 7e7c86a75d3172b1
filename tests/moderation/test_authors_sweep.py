"""The authors' schedule (moderation.tasks.authors_sweep): suspensions end and strikes lapse
every minute, on any cluster, draining a backlog in bounded batches."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from django_q.models import Schedule

from moderation import services, tasks
from moderation.models import AccountAction, Author, DecisionNotification, Standing, Strike
from tests.moderation.test_authors import authored

pytestmark = pytest.mark.django_db


@pytest.fixture
def moderator(db):
    return get_user_model().objects.create_user("mod-a", is_staff=True)


def suspended_until_past(client, moderator, author_id: str) -> Author:
    """An author suspended by a moderator, whose suspension ended a minute ago."""
    services.author_ensure(client, author_id=author_id)
    author = Author.objects.get(client=client, author_id=author_id)
    action = services.author_act(author_pk=author.pk, moderator=moderator, action="suspend", days=1, reason="r")
    past = timezone.now() - timedelta(minutes=1)
    AccountAction.objects.filter(pk=action.pk).update(until=past)
    Author.objects.filter(pk=author.pk).update(restricted_until=past)
    return author


def test_the_schedule_runs_the_task_that_ends_a_suspension(api_client, moderator):
    schedule = Schedule.objects.get(name="moderation.authors_sweep")
    assert (schedule.func, schedule.schedule_type, schedule.repeats) == ("moderation.tasks.authors_sweep",
                                                                         Schedule.MINUTES, -1)
    author = suspended_until_past(api_client, moderator, "u1")

    assert tasks.authors_sweep() == "1 suspensions ended, 0 strikes lapsed"
    assert tasks.authors_sweep() == "0 suspensions ended, 0 strikes lapsed"

    author = Author.objects.get(pk=author.pk)
    assert (author.standing, author.restriction_id, author.restricted_until) == (Standing.WARNED, None, None)
    restored = DecisionNotification.objects.filter(client=api_client, review=None, kind="author.restored")
    assert restored.count() == 1 and '"why": "expired"' in restored.get().payload


def test_a_backlog_drains_in_batches_up_to_their_bounds_and_the_next_run_takes_the_rest(api_client, moderator):
    authors = [suspended_until_past(api_client, moderator, f"u{i}") for i in range(5)]
    for i in range(3):
        authored(api_client, f"s{i}", "rejected")
    later = timezone.now() + timedelta(days=91)  # the strikes' window passed too

    assert services.authors_sweep(now=later, limit=2, deadline=time.monotonic() - 1) == {"restored": 0, "lapsed": 0}
    assert services.authors_sweep(now=later, limit=2, batches=2) == {"restored": 4, "lapsed": 3}
    assert services.authors_sweep(now=later, limit=2, batches=2) == {"restored": 1, "lapsed": 0}
    assert services.authors_sweep(now=later, limit=2, batches=2) == {"restored": 0, "lapsed": 0}

    assert set(Author.objects.filter(pk__in=[a.pk for a in authors]).values_list("standing", flat=True)) == {
        Standing.WARNED}
    assert not Strike.objects.filter(ended_at__isnull=True).exists()
    assert set(Author.objects.filter(author_id__startswith="s").values_list("strike_points", flat=True)) == {0}
