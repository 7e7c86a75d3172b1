from django.db import migrations

# The transition log is evidence: the database itself refuses to change or remove a row, so
# neither a bug nor a careless shell session can rewrite history. (TRUNCATE, used by test
# teardown and deliberate archiving, is a statement-level operation and stays possible.)
FORBID = """
CREATE OR REPLACE FUNCTION audit_forbid_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_reviewtransition is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_reviewtransition_append_only
    BEFORE UPDATE OR DELETE ON audit_reviewtransition
    FOR EACH ROW EXECUTE FUNCTION audit_forbid_change();
"""
ALLOW = """
DROP TRIGGER IF EXISTS audit_reviewtransition_append_only ON audit_reviewtransition;
DROP FUNCTION IF EXISTS audit_forbid_change();
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunSQL(FORBID, ALLOW)]
