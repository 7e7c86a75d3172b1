"""Deadlines (docs/design.md, "Deadlines"): each queue's target time to decision in the policy,
a review's due time, and the visits the deadline figures count. Reviews already waiting get a
due time from the newest published policy's targets and an open visit, so they are counted
from their anchor (when they entered their queue) like the reviews that enter after."""

import django.db.models.deletion
import moderation.models.core
from django.conf import settings
from django.db import migrations, models


# The targets of moderation.review_queues.deadline_for, in SQL: the urgent queue's minutes, a
# listed queue's hours, else the default hours, of the newest published policy.
BACKFILL = """
WITH policy AS (
    SELECT deadline_hours, deadline_default_hours, urgent_deadline_minutes FROM moderation_moderationpolicy
    WHERE NOT is_draft ORDER BY version DESC LIMIT 1
), waiting AS (
    UPDATE moderation_contentreview r SET due_at = r.queued_at + CASE
        WHEN r.queue = 'urgent' THEN make_interval(mins => p.urgent_deadline_minutes)
        ELSE interval '1 hour' * coalesce((p.deadline_hours ->> r.queue)::float8, p.deadline_default_hours) END
    FROM policy p
    WHERE r.status = 'manual_review' AND r.queue <> '' AND r.queued_at IS NOT NULL AND r.due_at IS NULL
    RETURNING r.id, r.queue, r.notice_kind, r.queued_at, r.due_at
)
INSERT INTO moderation_queuevisit (review_id, queue, cause, notice_kind, anchor_at, due_at, decided)
SELECT id, queue, '', notice_kind, queued_at, due_at, false FROM waiting
"""


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0043_decision_undo'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='QueueVisit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=24)),
                ('cause', models.CharField(max_length=32)),
                ('notice_kind', models.CharField(blank=True, default='', max_length=16)),
                ('anchor_at', models.DateTimeField()),
                ('due_at', models.DateTimeField()),
                ('left_at', models.DateTimeField(blank=True, null=True)),
                ('decided', models.BooleanField(default=False)),
            ],
        ),
        migrations.AddField(
            model_name='contentreview',
            name='due_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='historicalcontentreview',
            name='due_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='deadline_default_hours',
            field=models.PositiveIntegerField(db_default=48, default=48, help_text='Hours to a decision in a queue deadline_hours does not list.'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='deadline_hours',
            field=models.JSONField(blank=True, db_default={'appeals': 168, 'notices': 24, 'reports': 72}, default=moderation.models.core.default_deadline_hours, help_text='Hours to a decision per review queue, e.g. {"notices": 24, "appeals": 168, "reports": 72}.'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='deadline_near_share',
            field=models.FloatField(db_default=0.2, default=0.2, help_text="Share (above 0, below 1) of a deadline's window at its end in which a review is marked near its deadline."),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='deadline_default_hours',
            field=models.PositiveIntegerField(db_default=48, default=48, help_text='Hours to a decision in a queue deadline_hours does not list.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='deadline_hours',
            field=models.JSONField(blank=True, db_default={'appeals': 168, 'notices': 24, 'reports': 72}, default=moderation.models.core.default_deadline_hours, help_text='Hours to a decision per review queue, e.g. {"notices": 24, "appeals": 168, "reports": 72}.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='deadline_near_share',
            field=models.FloatField(db_default=0.2, default=0.2, help_text="Share (above 0, below 1) of a deadline's window at its end in which a review is marked near its deadline."),
        ),
        migrations.AddIndex(
            model_name='contentreview',
            index=models.Index(condition=models.Q(('status', 'manual_review')), fields=['queue', 'due_at', 'id'], name='review_queue_due_idx'),
        ),
        migrations.AddField(
            model_name='queuevisit',
            name='review',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='moderation.contentreview'),
        ),
        migrations.AddIndex(
            model_name='queuevisit',
            index=models.Index(condition=models.Q(('decided', True)), fields=['left_at'], include=('queue', 'anchor_at', 'due_at', 'cause', 'notice_kind'), name='queue_visit_decided_idx'),
        ),
        migrations.AddConstraint(
            model_name='queuevisit',
            constraint=models.UniqueConstraint(condition=models.Q(('left_at__isnull', True)), fields=('review',), name='queue_visit_one_open'),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
