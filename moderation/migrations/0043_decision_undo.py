"""Undone decisions stop counting in the figures (issue 49): a row per decision its moderator
undid. The undos made before this migration are read back from the audit log: each `undo`
transition took back its review's latest decision made before it (review_undo allows only the
decision in force)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0042_account_appeal_queue_second_look'),
        ('audit', '0009_statement_requeued_event'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='DecisionUndo',
            fields=[
                ('decision', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, primary_key=True, related_name='undo', serialize=False, to='moderation.decision')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('moderator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.RunSQL(
            """
            INSERT INTO moderation_decisionundo (decision_id, moderator_id, created_at)
            SELECT d.id, d.moderator_id, t.created_at
            FROM audit_reviewtransition t
            JOIN LATERAL (
                SELECT id, moderator_id, source FROM moderation_decision
                WHERE review_id = t.review_id AND created_at <= t.created_at ORDER BY id DESC LIMIT 1
            ) d ON d.source = 'moderator' AND d.moderator_id IS NOT NULL
            WHERE t.cause = 'undo'
            ON CONFLICT DO NOTHING
            """,
            migrations.RunSQL.noop,
        ),
    ]
