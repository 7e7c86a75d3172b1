"""Squashed migration (docs/operations.md, "Squashed migrations"): the moderator's workplace.

Replaces 0004_moderator_workplace and the merge 0007_merge_20261130_0939, operations unchanged.
A database that applied both records this one as applied and runs nothing; one that applied
neither (its last moderation migration is 0006_merge_20261130_0927, as main left it at 8279d7c)
runs the operations below; one that applied only 0004_moderator_workplace must first migrate
with a checkout that has the old files (moderation/checks.py refuses it, E009).

Nothing is elided, the data operation included: the queue backfill changes nothing on a fresh
database, but a database at 0006_merge_20261130_0927 may hold reviews waiting for a human, which
need a queue.
"""

import django.db.models.deletion
import moderation.models.core
from django.conf import settings
from django.db import migrations, models

# Notes are evidence like the transition log (audit migration 0002): the database refuses to
# change or remove one. TRUNCATE (test teardown, deliberate archiving) stays possible.
NOTES_APPEND_ONLY = """
CREATE OR REPLACE FUNCTION moderation_note_forbid_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER moderation_moderatornote_append_only
    BEFORE UPDATE OR DELETE ON moderation_moderatornote
    FOR EACH ROW EXECUTE FUNCTION moderation_note_forbid_change();
"""
NOTES_MUTABLE = """
DROP TRIGGER IF EXISTS moderation_moderatornote_append_only ON moderation_moderatornote;
DROP FUNCTION IF EXISTS moderation_note_forbid_change();
"""

# Reviews already waiting for a human join the queue their last transition's cause names, with
# the default weights (moderation.policy.priority): the model's score, then how long they waited.
BACKFILL_QUEUES = """
UPDATE moderation_contentreview r SET
    queue = CASE t.cause WHEN 'provider_failed' THEN 'provider_failures'
                         WHEN 'manual_escalation' THEN 'escalations'
                         WHEN 'user_reports' THEN 'reports'
                         WHEN 'appeal' THEN 'appeals'
                         ELSE 'low_confidence' END,
    priority = t.points,
    queued_at = t.created_at,
    queue_order_at = t.created_at - make_interval(secs => t.points / 10 * 3600)
FROM (SELECT DISTINCT ON (tr.review_id) tr.review_id, tr.cause, tr.created_at,
             100 * coalesce((SELECT d.score FROM moderation_decision d
                             JOIN moderation_contentreview cr ON cr.decision_id = d.id
                             WHERE cr.id = tr.review_id), 0) AS points
      FROM audit_reviewtransition tr
      WHERE tr.to_status = 'manual_review' ORDER BY tr.review_id, tr.id DESC) t
WHERE r.status = 'manual_review' AND t.review_id = r.id
"""



class Migration(migrations.Migration):

    replaces = [
        ('moderation', '0004_moderator_workplace'),
        ('moderation', '0007_merge_20261130_0939'),
    ]

    dependencies = [
        ('audit', '0002_transition_log_append_only'),
        ('callbacks', '0001_initial'),
        ('moderation', '0006_squashed_policy_rules_reports_appeals'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ModeratorNote',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField(max_length=5000)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['id'],
            },
        ),
        migrations.RemoveIndex(
            model_name='contentreview',
            name='review_queue_idx',
        ),
        migrations.AddField(
            model_name='contentreview',
            name='priority',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='contentreview',
            name='queue',
            field=models.CharField(blank=True, choices=[('low_confidence', 'Low-confidence model results'), ('reports', 'User reports'), ('appeals', 'Appeals'), ('provider_failures', 'Provider failures'), ('escalations', 'Escalated by a moderator')], db_default='', default='', max_length=24),
        ),
        migrations.AddField(
            model_name='contentreview',
            name='queue_order_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='contentreview',
            name='queued_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='categories',
            field=models.JSONField(blank=True, default=moderation.models.core.default_categories, help_text='The violation categories a moderator chooses from (a rejection names one).'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='priority_age_points_per_hour',
            field=models.FloatField(default=10, help_text='Points a review earns for each hour it waits (above 0).'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='priority_appeal_weight',
            field=models.FloatField(default=40, help_text='Points for an appeal.'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='priority_report_weight',
            field=models.FloatField(default=15, help_text='Points for each user report.'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='priority_score_weight',
            field=models.FloatField(default=100, help_text='Points for a top category score of 1.0.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='categories',
            field=models.JSONField(blank=True, default=moderation.models.core.default_categories, help_text='The violation categories a moderator chooses from (a rejection names one).'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='priority_age_points_per_hour',
            field=models.FloatField(default=10, help_text='Points a review earns for each hour it waits (above 0).'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='priority_appeal_weight',
            field=models.FloatField(default=40, help_text='Points for an appeal.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='priority_report_weight',
            field=models.FloatField(default=15, help_text='Points for each user report.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='priority_score_weight',
            field=models.FloatField(default=100, help_text='Points for a top category score of 1.0.'),
        ),
        migrations.AddIndex(
            model_name='contentreview',
            index=models.Index(fields=['created_at', 'id'], name='review_created_idx'),
        ),
        migrations.AddIndex(
            model_name='contentreview',
            index=models.Index(condition=models.Q(('status', 'manual_review')), fields=['queue', 'queue_order_at', 'id'], include=('queued_at', 'claim_expires_at'), name='review_queue_order_idx'),
        ),
        migrations.AddIndex(
            model_name='contentreview',
            index=models.Index(condition=models.Q(('status', 'manual_review')), fields=['queue_order_at', 'id'], name='review_any_queue_order_idx'),
        ),
        migrations.AddIndex(
            model_name='decision',
            index=models.Index(condition=models.Q(('source', 'moderator')), fields=['created_at'], name='decision_moderator_idx'),
        ),
        migrations.AddField(
            model_name='moderatornote',
            name='author',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='moderatornote',
            name='decision',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='moderation.decision'),
        ),
        migrations.AddField(
            model_name='moderatornote',
            name='review',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='notes', to='moderation.contentreview'),
        ),
        migrations.AddIndex(
            model_name='moderatornote',
            index=models.Index(fields=['review', 'id'], name='note_review_idx'),
        ),
        migrations.RunSQL(NOTES_APPEND_ONLY, NOTES_MUTABLE),
        migrations.RunSQL(BACKFILL_QUEUES, migrations.RunSQL.noop),
    ]
