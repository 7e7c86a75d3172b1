"""Squashed migration (docs/operations.md, "Squashed migrations"): reports and appeals, policy rules.

Replaces 0004_reports_appeals, 0005_notification_review_required, 0004_policy_rules and the
merge 0006_merge_20261130_0927, their operations unchanged and in the order a fresh migrate ran
them before the squash. A database that applied all four records this one as applied and runs
nothing; one that applied none (its last moderation migration is 0004_erasure_and_trace_context,
as main left it at f5f10f6) runs the operations below; one that applied some but not all must
first migrate with a checkout that has the old files (moderation/checks.py refuses it, E009).

Nothing is elided, the data operation included: the UPDATE that gives each notification its
review changes nothing on a fresh database, but a database at 0004_erasure_and_trace_context
may hold notifications, which need their review before the column becomes required.
"""

import django.db.models.deletion
import moderation.models.core
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [
        ('moderation', '0004_reports_appeals'),
        ('moderation', '0005_notification_review_required'),
        ('moderation', '0004_policy_rules'),
        ('moderation', '0006_merge_20261130_0927'),
    ]

    dependencies = [
        ('audit', '0003_drop_redundant_fk_indexes'),
        ('moderation', '0004_erasure_and_trace_context'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # 0004_reports_appeals
        migrations.CreateModel(
            name='Appeal',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('appellant_id', models.CharField(max_length=255)),
                ('statement', models.TextField()),
                ('status', models.CharField(choices=[('open', 'Open'), ('upheld', 'Upheld (rejected again)'), ('overturned', 'Overturned (approved)')], default='open', max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('resolved_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Report',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('reporter_id', models.CharField(max_length=255)),
                ('reason', models.CharField(help_text='A policy category, or "other".', max_length=64)),
                ('detail', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='ReportEscalation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('report_count', models.PositiveIntegerField()),
                ('threshold', models.PositiveSmallIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['id'],
            },
        ),
        migrations.AddField(
            model_name='decisionnotification',
            name='kind',
            field=models.CharField(choices=[('review.decided', 'Review decided'), ('review.reported', 'Review reported (threshold reached)'), ('appeal.resolved', 'Appeal resolved')], default='review.decided', max_length=32),
        ),
        migrations.AddField(
            model_name='decisionnotification',
            name='review',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='notifications', to='moderation.contentreview'),
        ),
        # Every notification written so far announced a decision: its review is the decision's.
        migrations.RunSQL(
            "UPDATE moderation_decisionnotification n SET review_id = d.review_id"
            " FROM moderation_decision d WHERE d.id = n.decision_id",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='report_threshold',
            field=models.PositiveSmallIntegerField(db_default=3, default=3, help_text='Distinct users reporting an approved decision that send the review to a human.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='report_threshold',
            field=models.PositiveSmallIntegerField(db_default=3, default=3, help_text='Distinct users reporting an approved decision that send the review to a human.'),
        ),
        migrations.AlterField(
            model_name='decisionnotification',
            name='decision',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='notification', to='moderation.decision'),
        ),
        migrations.AddConstraint(
            model_name='moderationpolicy',
            constraint=models.CheckConstraint(condition=models.Q(('report_threshold__gte', 1)), name='policy_report_threshold_positive'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='decision',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='appeal', to='moderation.decision'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='resolution',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='resolved_appeal', to='moderation.decision'),
        ),
        migrations.AddField(
            model_name='appeal',
            name='review',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='appeals', to='moderation.contentreview'),
        ),
        migrations.AddField(
            model_name='report',
            name='decision',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='moderation.decision'),
        ),
        migrations.AddField(
            model_name='report',
            name='review',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='reports', to='moderation.contentreview'),
        ),
        migrations.AddField(
            model_name='reportescalation',
            name='decision',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='report_escalation', to='moderation.decision'),
        ),
        migrations.AddField(
            model_name='reportescalation',
            name='review',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='report_escalations', to='moderation.contentreview'),
        ),
        migrations.AddField(
            model_name='reportescalation',
            name='transition',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='audit.reviewtransition'),
        ),
        migrations.AddField(
            model_name='decisionnotification',
            name='escalation',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='notification', to='moderation.reportescalation'),
        ),
        migrations.AddConstraint(
            model_name='decisionnotification',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('decision__isnull', False), ('escalation__isnull', True)), models.Q(('decision__isnull', True), ('escalation__isnull', False)), _connector='OR'), name='notification_announces_one_thing'),
        ),
        migrations.AddIndex(
            model_name='appeal',
            index=models.Index(fields=['review', '-created_at'], name='appeal_review_idx'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'open'), ('resolution__isnull', True), ('resolved_at__isnull', True)), models.Q(models.Q(('status', 'open'), _negated=True), ('resolution__isnull', False), ('resolved_at__isnull', False)), _connector='OR'), name='appeal_resolved_with_a_decision'),
        ),
        migrations.AddConstraint(
            model_name='appeal',
            constraint=models.UniqueConstraint(condition=models.Q(('status', 'open')), fields=('review',), name='appeal_one_open_per_review'),
        ),
        migrations.AddIndex(
            model_name='report',
            index=models.Index(fields=['created_at'], name='report_created_idx'),
        ),
        migrations.AddConstraint(
            model_name='report',
            constraint=models.UniqueConstraint(fields=('review', 'reporter_id'), name='report_one_per_reporter'),
        ),
        # 0005_notification_review_required. A migration of its own before the squash; in the
        # same transaction as the UPDATE above it is still safe, because Django set the new
        # foreign key IMMEDIATE as it added the column, so the UPDATE left no deferred check
        # pending for this ALTER (tests/architecture/test_migrations.py migrates a database
        # holding a notification through it).
        migrations.AlterField(
            model_name='decisionnotification',
            name='review',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='notifications', to='moderation.contentreview'),
        ),
        # 0004_policy_rules
        migrations.AddField(
            model_name='content',
            name='language',
            field=models.CharField(blank=True, db_default='', default='', max_length=8),
        ),
        migrations.AddField(
            model_name='content',
            name='language_candidates',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='decision',
            name='model_used',
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='decision',
            name='rule_matches',
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='model_languages',
            field=models.JSONField(blank=True, db_default=['en'], default=moderation.models.core.default_model_languages, help_text='Languages the model may judge (ISO 639-1 codes); empty: every language.'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='term_lists',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Rules: [{"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh"]}].'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='unjudged_label',
            field=models.CharField(choices=[('manual_review', 'Manual review'), ('approved', 'Approve')], db_default='manual_review', default='manual_review', help_text='Decision for a text in a language the model cannot judge when no rule matched.', max_length=16),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='model_languages',
            field=models.JSONField(blank=True, db_default=['en'], default=moderation.models.core.default_model_languages, help_text='Languages the model may judge (ISO 639-1 codes); empty: every language.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='term_lists',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Rules: [{"category": "insult", "action": "reject", "language": "id", "terms": ["bodoh"]}].'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='unjudged_label',
            field=models.CharField(choices=[('manual_review', 'Manual review'), ('approved', 'Approve')], db_default='manual_review', default='manual_review', help_text='Decision for a text in a language the model cannot judge when no rule matched.', max_length=16),
        ),
    ]
