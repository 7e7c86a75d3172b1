"""A moderator's hold on a review is a lease, a worker's is a claim (docs/design.md, "Names"):
the fields `claimed_by` / `claim_expires_at` become `leased_to` / `lease_expires_at`.

The fields only: their columns keep their names (`db_column` on the model), so this migration
changes nothing in the database. Migrations run while the old code still serves
(docs/operations.md, "A new release"), and a renamed column would fail every query the old code
makes on reviews until it stops. The index that includes the lease's expiry is restated for the
migration state only: RenameField leaves an index's INCLUDE naming the old field.
"""

from django.conf import settings
from django.db import migrations, models
import django.db.models.deletion


def queue_order_index(lease_field: str) -> models.Index:
    return models.Index(
        condition=models.Q(("status", "manual_review")), fields=["queue", "queue_order_at", "id"],
        include=("queued_at", lease_field), name="review_queue_order_idx",
    )


class Migration(migrations.Migration):

    dependencies = [
        ("moderation", "0012_squashed_notify_client_pace"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RenameField(model_name="contentreview", old_name="claimed_by", new_name="leased_to"),
            migrations.AlterField(
                model_name="contentreview", name="leased_to",
                field=models.ForeignKey(
                    blank=True, db_column="claimed_by_id", null=True, on_delete=django.db.models.deletion.SET_NULL,
                    related_name="+", to=settings.AUTH_USER_MODEL,
                ),
            ),
            migrations.RenameField(model_name="contentreview", old_name="claim_expires_at", new_name="lease_expires_at"),
            migrations.AlterField(
                model_name="contentreview", name="lease_expires_at",
                field=models.DateTimeField(blank=True, db_column="claim_expires_at", null=True),
            ),
            migrations.RemoveIndex(model_name="contentreview", name="review_queue_order_idx"),
            migrations.AddIndex(model_name="contentreview", index=queue_order_index("lease_expires_at")),
        ]),
    ]
