"""Legal holds and preservation snapshots (issue 50; docs/legal-holds.md).

The hold's log, the snapshots' viewing log, the reports to authorities and the hand-overs
are append-only like the transition log (the same
function, audit migration 0002). A snapshot refuses every UPDATE, and a DELETE while it is not yet
past its expiry: only retention removes one, once its period is over (moderation/privacy/retention.py).
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


APPEND_ONLY = """
CREATE TRIGGER moderation_legalholdevent_append_only
    BEFORE UPDATE OR DELETE ON moderation_legalholdevent
    FOR EACH ROW EXECUTE FUNCTION audit_forbid_change();
CREATE TRIGGER moderation_snapshotview_append_only
    BEFORE UPDATE OR DELETE ON moderation_snapshotview
    FOR EACH ROW EXECUTE FUNCTION audit_forbid_change();
CREATE TRIGGER moderation_authorityreport_append_only
    BEFORE UPDATE OR DELETE ON moderation_authorityreport
    FOR EACH ROW EXECUTE FUNCTION audit_forbid_change();
CREATE TRIGGER moderation_handover_append_only
    BEFORE UPDATE OR DELETE ON moderation_handover
    FOR EACH ROW EXECUTE FUNCTION audit_forbid_change();
CREATE OR REPLACE FUNCTION moderation_snapshot_keep() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND OLD.expires_at <= now() THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'moderation_preservationsnapshot is append-only until it expires (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER moderation_preservationsnapshot_keep
    BEFORE UPDATE OR DELETE ON moderation_preservationsnapshot
    FOR EACH ROW EXECUTE FUNCTION moderation_snapshot_keep();
"""
APPEND_ONLY_REVERSE = """
DROP TRIGGER IF EXISTS moderation_legalholdevent_append_only ON moderation_legalholdevent;
DROP TRIGGER IF EXISTS moderation_snapshotview_append_only ON moderation_snapshotview;
DROP TRIGGER IF EXISTS moderation_authorityreport_append_only ON moderation_authorityreport;
DROP TRIGGER IF EXISTS moderation_handover_append_only ON moderation_handover;
DROP TRIGGER IF EXISTS moderation_preservationsnapshot_keep ON moderation_preservationsnapshot;
DROP FUNCTION IF EXISTS moderation_snapshot_keep();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0038_bulk_job_reasons'),
        ('audit', '0002_transition_log_append_only'),
    ]

    operations = [
        migrations.CreateModel(
            name='LawEnforcementRequest',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('agency', models.CharField(max_length=200)),
                ('reference', models.CharField(max_length=200)),
                ('asked', models.TextField(max_length=2000)),
                ('received_at', models.DateTimeField()),
                ('registered_by', models.CharField(max_length=150)),
                ('registered_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'ordering': ['-received_at'],
                'permissions': [('register_request', 'Can register law-enforcement requests and hand items over')],
            },
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='reportable_categories',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Categories whose decisions freeze a preservation snapshot, e.g. ["child_safety", "threat_to_life"].'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='snapshot_retention_days',
            field=models.PositiveIntegerField(db_default=365, default=365, help_text='Days a preservation snapshot is kept (US REPORT Act: one year).'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='urgent_categories',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Categories that threaten life or safety: the urgent queue, e.g. ["threat_to_life"].'),
        ),
        migrations.AddField(
            model_name='historicalmoderationpolicy',
            name='urgent_deadline_minutes',
            field=models.PositiveIntegerField(db_default=60, default=60, help_text='Minutes within which an urgent review is to be acted on.'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='reportable_categories',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Categories whose decisions freeze a preservation snapshot, e.g. ["child_safety", "threat_to_life"].'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='snapshot_retention_days',
            field=models.PositiveIntegerField(db_default=365, default=365, help_text='Days a preservation snapshot is kept (US REPORT Act: one year).'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='urgent_categories',
            field=models.JSONField(blank=True, db_default=[], default=list, help_text='Categories that threaten life or safety: the urgent queue, e.g. ["threat_to_life"].'),
        ),
        migrations.AddField(
            model_name='moderationpolicy',
            name='urgent_deadline_minutes',
            field=models.PositiveIntegerField(db_default=60, default=60, help_text='Minutes within which an urgent review is to be acted on.'),
        ),
        migrations.CreateModel(
            name='Handover',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('handed_by', models.CharField(max_length=150)),
                ('handed_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('manifest', models.JSONField()),
                ('sha256', models.CharField(max_length=64)),
                ('request', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='handovers', to='moderation.lawenforcementrequest')),
            ],
            options={
                'ordering': ['-handed_at'],
            },
        ),
        migrations.CreateModel(
            name='LegalHold',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scope', models.CharField(choices=[('reviews', 'Named reviews'), ('author', 'Every content of an author'), ('query', "An author's content in a date range")], max_length=8)),
                ('created_from', models.DateTimeField(blank=True, null=True)),
                ('created_before', models.DateTimeField(blank=True, null=True)),
                ('reason', models.TextField(max_length=2000)),
                ('reference', models.CharField(help_text='A case or request number.', max_length=200)),
                ('placed_by', models.CharField(max_length=150)),
                ('placed_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField(blank=True, help_text='Empty: until lifted.', null=True)),
                ('lifted_at', models.DateTimeField(blank=True, null=True)),
                ('lifted_by', models.CharField(blank=True, max_length=150)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='legal_holds', to='moderation.author')),
                ('reviews', models.ManyToManyField(blank=True, related_name='legal_holds', to='moderation.contentreview')),
            ],
            options={
                'ordering': ['-placed_at'],
                'permissions': [('place_legal_hold', 'Can place, extend and lift legal holds')],
            },
        ),
        migrations.AddField(
            model_name='lawenforcementrequest',
            name='hold',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='request', to='moderation.legalhold'),
        ),
        migrations.CreateModel(
            name='LegalHoldEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('action', models.CharField(choices=[('placed', 'Placed'), ('extended', 'Extended'), ('lifted', 'Lifted')], max_length=8)),
                ('actor_id', models.CharField(max_length=150)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField(blank=True, help_text="The hold's expiry after this event.", null=True)),
                ('note', models.TextField(blank=True)),
                ('hold', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='events', to='moderation.legalhold')),
            ],
            options={
                'ordering': ['at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='PreservationSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('category', models.CharField(max_length=64)),
                ('body', models.JSONField()),
                ('sha256', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField()),
                ('decision', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='snapshot', to='moderation.decision')),
                ('review', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='snapshots', to='moderation.contentreview')),
            ],
            options={
                'ordering': ['-created_at'],
                'permissions': [('view_snapshot_content', "Can open a preservation snapshot's content (logged)")],
            },
        ),
        migrations.CreateModel(
            name='AuthorityReport',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('recipient', models.CharField(help_text='The authority informed.', max_length=200)),
                ('sent_by', models.CharField(max_length=150)),
                ('sent_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('body', models.JSONField()),
                ('sha256', models.CharField(max_length=64)),
                ('review', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='authority_reports', to='moderation.contentreview')),
                ('hold', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='moderation.legalhold')),
                ('snapshot', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='moderation.preservationsnapshot')),
            ],
            options={
                'ordering': ['-sent_at'],
            },
        ),
        migrations.CreateModel(
            name='SnapshotView',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('viewer', models.CharField(max_length=150)),
                ('why', models.TextField()),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('snapshot', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='views', to='moderation.preservationsnapshot')),
            ],
            options={
                'ordering': ['-at'],
            },
        ),
        migrations.CreateModel(
            name='DeferredErasure',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('actor', models.CharField(max_length=16)),
                ('actor_id', models.CharField(blank=True, max_length=150)),
                ('reason', models.TextField()),
                ('requested_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('done_at', models.DateTimeField(blank=True, null=True)),
                ('review', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deferred_erasures', to='moderation.contentreview')),
            ],
            options={
                'ordering': ['requested_at', 'id'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('done_at__isnull', True)), fields=('review',), name='deferred_erasure_one_pending')],
            },
        ),
        migrations.AddConstraint(
            model_name='legalhold',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('author__isnull', True), ('created_before__isnull', True), ('created_from__isnull', True), ('scope', 'reviews')), models.Q(('author__isnull', False), ('created_before__isnull', True), ('created_from__isnull', True), ('scope', 'author')), models.Q(('author__isnull', False), ('scope', 'query'), models.Q(('created_from__isnull', False), ('created_before__isnull', False), _connector='OR')), _connector='OR'), name='legal_hold_scope_fields'),
        ),
        migrations.RunSQL(APPEND_ONLY, APPEND_ONLY_REVERSE),
    ]
