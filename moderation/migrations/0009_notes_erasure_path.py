# Moderators' notes stay append-only, with the transition log's one sanctioned exception
# (audit migration 0004): erasure (moderation/privacy/erasure.py) may redact a quote of the erased
# content from a note's `text`, inside a transaction that declared itself with
# `SET LOCAL moderation.erasure = 'on'`. Every other column stays as it was; DELETE stays refused.

from django.db import migrations

SANCTIONED = """
CREATE OR REPLACE FUNCTION moderation_note_forbid_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND current_setting('moderation.erasure', true) = 'on'
       AND to_jsonb(NEW) - 'text' = to_jsonb(OLD) - 'text' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""
STRICT = """
CREATE OR REPLACE FUNCTION moderation_note_forbid_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("moderation", "0008_squashed_hardening_notifications"),
    ]

    operations = [migrations.RunSQL(SANCTIONED, STRICT)]
