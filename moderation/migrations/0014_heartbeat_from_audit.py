# The Heartbeat model, moved from the audit app (audit 0007): state only. The table audit 0006
# created keeps its name and its rows.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0013_review_lease_names'),
        ('audit', '0007_heartbeat_to_moderation'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Heartbeat',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=64, unique=True)),
                        ('beat_at', models.DateTimeField()),
                        ('detail', models.CharField(blank=True, max_length=300)),
                    ],
                    options={'db_table': 'audit_heartbeat'},
                ),
            ],
        ),
    ]
