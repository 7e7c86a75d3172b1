"""Drop the single-column indexes Django makes for these foreign keys: each is the leading
column of a composite or unique index already, so the extra index only costs every insert (at a
million reviews, the random-UUID ones made a claim ~30% slower: bench/growth.py).

Only the indexes go, concurrently (no write lock); the foreign-key constraints stay untouched,
where Django's AlterField would drop and re-validate them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0002_transition_log_append_only'),
        ('moderation', '0002_drop_redundant_fk_indexes'),
    ]

    atomic = False  # CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='pipelineevent',
                    name='review',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='moderation.contentreview'),
                ),
                migrations.AlterField(
                    model_name='reviewtransition',
                    name='review',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='transitions', to='moderation.contentreview'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "audit_pipelineevent_review_id_e292ffd4"',
                    'CREATE INDEX CONCURRENTLY "audit_pipelineevent_review_id_e292ffd4" ON "audit_pipelineevent" ("review_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "audit_reviewtransition_review_id_bbe3f81c"',
                    'CREATE INDEX CONCURRENTLY "audit_reviewtransition_review_id_bbe3f81c" ON "audit_reviewtransition" ("review_id")',
                ),
            ],
        ),
    ]
