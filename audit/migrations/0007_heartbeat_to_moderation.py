# The Heartbeat model moved to the moderation app (moderation 0014): state only, the table stays.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0006_i17_lean_heartbeat'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Heartbeat')],
        ),
    ]
