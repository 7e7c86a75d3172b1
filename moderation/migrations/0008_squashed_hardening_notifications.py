"""Squashed migration (docs/operations.md, "Squashed migrations"): each client's webhook circuit.

Replaces 0004_hardening_notifications and the merge 0008_merge_20261130_0958, operations
unchanged. A database that applied both records this one as applied and runs nothing; one that
applied neither (its last moderation migration is 0007_merge_20261130_0939, as main left it at
a2898fa) runs the operations below; one that applied only 0004_hardening_notifications must
first migrate with a checkout that has the old files (moderation/checks.py refuses it, E009).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [
        ('moderation', '0004_hardening_notifications'),
        ('moderation', '0008_merge_20261130_0958'),
    ]

    dependencies = [
        ('moderation', '0007_squashed_moderator_workplace'),
    ]

    operations = [
        migrations.CreateModel(
            name='WebhookCircuit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('state', models.CharField(choices=[('closed', 'Closed (calls flow)'), ('open', 'Open (calls paused)'), ('half_open', 'Half-open (one trial call)')], default='closed', max_length=16)),
                ('failures', models.PositiveIntegerField(default=0, help_text='Failed attempts in a row.')),
                ('opened_at', models.DateTimeField(blank=True, null=True)),
                ('changed_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddIndex(
            model_name='decisionnotification',
            index=models.Index(condition=models.Q(('locked_until__isnull', False), ('status', 'pending')), fields=['client', 'locked_until'], name='notification_in_flight_idx'),
        ),
        migrations.AddField(
            model_name='webhookcircuit',
            name='client',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='webhook_circuit', to='moderation.apiclient'),
        ),
    ]
