"""Drop the single-column indexes Django makes for these foreign keys: each is the leading
column of a composite or unique index already, so the extra index only costs every insert (at a
million reviews, the random-UUID ones made a claim ~30% slower: bench/growth.py).

Only the indexes go, concurrently (no write lock); the foreign-key constraints stay untouched,
where Django's AlterField would drop and re-validate them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0001_initial'),
    ]

    atomic = False  # CREATE/DROP INDEX CONCURRENTLY cannot run in a transaction

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='content',
                    name='client',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='contents', to='moderation.apiclient'),
                ),
                migrations.AlterField(
                    model_name='contentreview',
                    name='client',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='reviews', to='moderation.apiclient'),
                ),
                migrations.AlterField(
                    model_name='idempotencyrecord',
                    name='client',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='moderation.apiclient'),
                ),
                migrations.AlterField(
                    model_name='moderationrequest',
                    name='review',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='requests', to='moderation.contentreview'),
                ),
                migrations.AlterField(
                    model_name='notificationattempt',
                    name='notification',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='attempt_log', to='moderation.decisionnotification'),
                ),
                migrations.AlterField(
                    model_name='providerattempt',
                    name='request',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='attempts', to='moderation.moderationrequest'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_content_client_id_713f6b58"',
                    'CREATE INDEX CONCURRENTLY "moderation_content_client_id_713f6b58" ON "moderation_content" ("client_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_contentreview_client_id_c8f3f0b9"',
                    'CREATE INDEX CONCURRENTLY "moderation_contentreview_client_id_c8f3f0b9" ON "moderation_contentreview" ("client_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_idempotencyrecord_client_id_df4b6c4a"',
                    'CREATE INDEX CONCURRENTLY "moderation_idempotencyrecord_client_id_df4b6c4a" ON "moderation_idempotencyrecord" ("client_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_moderationrequest_review_id_86bd7919"',
                    'CREATE INDEX CONCURRENTLY "moderation_moderationrequest_review_id_86bd7919" ON "moderation_moderationrequest" ("review_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_notificationattempt_notification_id_06b2abc2"',
                    'CREATE INDEX CONCURRENTLY "moderation_notificationattempt_notification_id_06b2abc2" ON "moderation_notificationattempt" ("notification_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX CONCURRENTLY "moderation_providerattempt_request_id_522e4a10"',
                    'CREATE INDEX CONCURRENTLY "moderation_providerattempt_request_id_522e4a10" ON "moderation_providerattempt" ("request_id")',
                ),
            ],
        ),
    ]
