"""Squashed migration (docs/operations.md, "Squashed migrations"): each client's notification pace.

Replaces 0011_notify_client_pace and the merge
0012_merge_0011_attempt_item_error_0011_notify_client_pace, operation unchanged. A database that
applied both records this one as applied and runs nothing; one that applied neither (its last
moderation migration is 0011_attempt_item_error, as main left it at b991b8d) runs the operation
below; one that applied only 0011_notify_client_pace must first migrate with a checkout that has
the old files (moderation/checks.py refuses it, E009).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [
        ('moderation', '0011_notify_client_pace'),
        ('moderation', '0012_merge_0011_attempt_item_error_0011_notify_client_pace'),
    ]

    dependencies = [
        ('moderation', '0011_attempt_item_error'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookcircuit',
            name='fast',
            field=models.BooleanField(default=False, help_text='Its last attempt ended within NOTIFY_SLOW_AFTER_S: it may use every notification worker. Otherwise (slow, or no attempt yet) it shares NOTIFY_SLOW_SHARE of them with the other slow clients.'),
        ),
    ]
