from django.db import migrations


def publish_first_policy(apps, schema_editor):
    ModerationPolicy = apps.get_model("moderation", "ModerationPolicy")
    if not ModerationPolicy.objects.exists():
        ModerationPolicy.objects.create(
            version=1,
            reject_threshold=0.9,
            review_threshold=0.5,
            category_thresholds={},
            flagged_label="manual_review",
            notes="Initial policy: reject at 0.9, a human looks from 0.5.",
        )


class Migration(migrations.Migration):
    dependencies = [("moderation", "0001_initial")]

    operations = [migrations.RunPython(publish_first_policy, migrations.RunPython.noop)]
