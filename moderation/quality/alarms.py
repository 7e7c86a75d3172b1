"""The anomaly alarms' counts (docs/quality.md, "Anomaly alarms"): a scheduled task counts the
automatic decisions per hour, by label and by the rules that matched them (`decisions_roll_up`,
into `DecisionRollup`), a minute behind the live path and never in it. What they are compared
with, and when that is an anomaly: moderation/observability/anomalies.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from moderation.models import Decision, DecisionRollup, QualityCursor

ROLLUP = "rollup"
ROLLUP_BATCH = 50_000


def settled_before(now: datetime) -> datetime:
    """A decision is read once it is QUALITY_SETTLE_S old: ids are taken at insert, so a decision
    committed after a higher id's would otherwise be passed by the cursor. No finalize transaction
    runs that long."""
    return now - timedelta(seconds=settings.QUALITY_SETTLE_S)


def decisions_roll_up(*, now: datetime | None = None) -> int:
    """Count the settled provider decisions after the cursor into their hours, and move the
    cursor, in one transaction holding the cursor's row (a second run at once skips). Returns the
    decisions counted."""
    now = now or timezone.now()
    decision, rollup = Decision._meta.db_table, DecisionRollup._meta.db_table
    with transaction.atomic():
        QualityCursor.objects.get_or_create(name=ROLLUP)
        cursor = QualityCursor.objects.select_for_update(skip_locked=True).filter(name=ROLLUP).first()
        if cursor is None:
            return 0
        with connection.cursor() as db:
            db.execute(f"""
                WITH d AS (
                    SELECT id, label, rule_matches, date_trunc('hour', created_at) AS hour FROM {decision}
                    WHERE source = 'provider' AND id > %(after)s AND created_at < %(settled)s
                    ORDER BY id LIMIT %(batch)s
                ), keys AS (
                    SELECT hour, 'label:' || label AS key FROM d
                    UNION ALL
                    (SELECT DISTINCT ON (d.id, m->>'rule') d.hour, 'rule:' || (m->>'rule') FROM d, jsonb_array_elements(
                        CASE WHEN jsonb_typeof(d.rule_matches) = 'array' THEN d.rule_matches ELSE '[]' END) AS m
                     WHERE m->>'action' IS DISTINCT FROM 'allow' AND m->>'rule' IS NOT NULL)
                ), counted AS (
                    INSERT INTO {rollup} (hour, key, count)
                    SELECT hour, left(key, 300), count(*) FROM keys GROUP BY 1, 2
                    ON CONFLICT (hour, key) DO UPDATE SET count = {rollup}.count + EXCLUDED.count
                )
                SELECT count(*), max(id) FROM d""",
                {"after": cursor.last_id, "settled": settled_before(now), "batch": ROLLUP_BATCH})
            counted, last = db.fetchone()
        if last is not None:
            QualityCursor.objects.filter(name=ROLLUP).update(last_id=last)
    return counted
