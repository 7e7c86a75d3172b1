# The review of every notification is filled in by 0004; required from here on. (A migration of
# its own: PostgreSQL refuses to ALTER a table with deferred constraint checks pending from the
# UPDATE in the same transaction.)

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('moderation', '0004_reports_appeals'),
    ]

    operations = [
        migrations.AlterField(
            model_name='decisionnotification',
            name='review',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='notifications', to='moderation.contentreview'),
        ),
    ]
