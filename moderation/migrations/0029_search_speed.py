"""The "reported as" filter served by an index on reports (kind, review): without it, the
filter read every report (docs/benchmarks.md, "Content search at 1M reviews")."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("moderation", "0028_bulk_jobs"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="report",
            index=models.Index(fields=["kind", "review"], name="report_kind_review_idx"),
        ),
    ]
