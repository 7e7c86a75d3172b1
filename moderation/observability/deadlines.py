"""Deadlines (docs/design.md, "Deadlines"): how each review queue keeps its target time to
decision. Per queue and week, the decisions, their median and 95th percentile time from anchor
to decision, and the breaches (moderation.selectors.decision_times, the one computation); per
queue now, the reviews waiting, near their deadline and past it. The deadline page and /metrics
read these; the transparency report reads the same computation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db.models import Count, DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import TruncWeek
from django.utils import timezone

from moderation.models import ContentReview, ModerationPolicy, ReviewStatus
from moderation.selectors import decision_times, decisions_between
from moderation.services.routing import QueueInfo

WEEKS_MAX = 53
TZ_NAME_MAX = 64


def week_zone(name: str | None) -> ZoneInfo:
    """The time zone whose Mondays start the weeks (`name`, an IANA name; None or "": the
    installation's TIME_ZONE). ValueError, saying why, for a name that is none."""
    name = (name or settings.TIME_ZONE).strip()
    if not name or len(name) > TZ_NAME_MAX or "\x00" in name:
        raise ValueError(f"a time zone is an IANA name of 1 to {TZ_NAME_MAX} characters, e.g. Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"there is no time zone {name!r} (an IANA name, e.g. Europe/Berlin)") from exc


def week_start(moment: datetime, zone: ZoneInfo) -> datetime:
    """The Monday 00:00 in `zone` that starts the week of `moment`."""
    local = moment.astimezone(zone)
    monday = local.date() - timedelta(days=local.weekday())
    return datetime(monday.year, monday.month, monday.day, tzinfo=zone)


@dataclass(frozen=True)
class WeekFigures:
    queue: str
    label: str
    week: date  # its Monday, in the zone asked
    decided: int
    median_s: float | None
    p95_s: float | None
    breached: int


def weekly_figures(*, weeks: int = 8, now: datetime | None = None, zone: ZoneInfo | None = None,
                   queues: list[QueueInfo], hidden_queues=()) -> list[WeekFigures]:
    """Per queue of `queues` and week (Monday to Monday in `zone`, this week and the `weeks` - 1
    before it, newest first): the decisions made in it, their median and p95 seconds from anchor
    to decision, and how many came after their due time. Visits of `hidden_queues` (queues the
    viewer may not open) are left out; a queue with no decision in a week has no row."""
    if not 1 <= weeks <= WEEKS_MAX:
        raise ValueError(f"weeks is a whole number from 1 to {WEEKS_MAX}")
    now, zone = now or timezone.now(), zone or week_zone(None)
    first = week_start(now, zone)
    since = (first.replace(tzinfo=None) - timedelta(weeks=weeks - 1)).replace(tzinfo=zone)
    visits = decisions_between(since, now + timedelta(microseconds=1)).exclude(queue__in=sorted(hidden_queues))
    rows = decision_times(visits.annotate(week=TruncWeek("left_at", tzinfo=zone)), "queue", "week")
    labels = {q.slug: q.label for q in queues}
    figures = [WeekFigures(row["queue"], labels.get(row["queue"], row["queue"]), row["week"].astimezone(zone).date(),
                           row["decided"], row["median_s"], row["p95_s"], row["breached"])
               for row in rows if row["queue"] in labels]
    return sorted(figures, key=lambda f: (-f.week.toordinal(), f.queue))


@dataclass(frozen=True)
class OpenFigures:
    queue: str
    label: str
    waiting: int
    near: int  # in the last part of their window (the policy's deadline_near_share), not past it
    breached: int  # past their due time, still waiting


def open_figures(policy: ModerationPolicy, *, now: datetime | None = None, queues: list[QueueInfo]) -> list[OpenFigures]:
    """Per queue of `queues`: the reviews waiting, those near their deadline and those past it
    (review_queue_due_idx), one grouped query."""
    now = now or timezone.now()
    near_from = ExpressionWrapper(F("due_at") - (F("due_at") - F("queued_at")) * policy.deadline_near_share,
                                  output_field=DateTimeField())
    rows = {row["queue"]: row for row in (
        ContentReview.objects.filter(status=ReviewStatus.MANUAL_REVIEW).exclude(queue="")
        .annotate(near_from=near_from).values("queue").order_by()
        .annotate(waiting=Count("pk"), breached=Count("pk", filter=Q(due_at__lt=now)),
                  near=Count("pk", filter=Q(due_at__gte=now, near_from__lte=now))))}
    return [OpenFigures(q.slug, q.label, rows.get(q.slug, {}).get("waiting", 0), rows.get(q.slug, {}).get("near", 0),
                        rows.get(q.slug, {}).get("breached", 0)) for q in queues]
