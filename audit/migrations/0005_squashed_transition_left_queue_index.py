"""Squashed migration (docs/operations.md, "Squashed migrations"): the index of reviews that
left the manual-review queue.

Replaces 0004_transition_left_queue_index and the merge 0005_merge_20261130_0939, operation
unchanged. A database that applied both records this one as applied and runs nothing; one that
applied neither (its last audit migration is 0004_webhook_actor_pruned_tally_erasure_path, as
main left it at f5f10f6) runs the operation below; one that applied only
0004_transition_left_queue_index must first migrate with a checkout that has the old files
(moderation/checks.py refuses it, E009).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [
        ('audit', '0004_transition_left_queue_index'),
        ('audit', '0005_merge_20261130_0939'),
    ]

    dependencies = [
        ('audit', '0004_webhook_actor_pruned_tally_erasure_path'),
        ('moderation', '0007_squashed_moderator_workplace'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='reviewtransition',
            index=models.Index(condition=models.Q(('from_status', 'manual_review')), fields=['created_at'], name='transition_left_queue_idx'),
        ),
    ]
