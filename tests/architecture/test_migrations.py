"""The squashed migrations (docs/operations.md, "Squashed migrations") break no database: one
migrated by the old files, or left by main at any commit before a squash, migrates on with the
new ones to the schema a fresh database gets, and a database partly through a squash is refused
before anything runs.

Each case is a real `manage.py migrate` against a PostgreSQL database of its own, the old
migrations taken from git (`git show <commit>:<app>/migrations/...`) into a package that
MIGRATION_MODULES points at.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
APPS = ("moderation", "audit", "callbacks")

# main just before the squash: the last commit with the replaced migration files.
OLD_LINE = "10f402b7c53d99317b802165a7c53f91502661a9"
# Commits of main that left a database between two squashes (one leaf per app): each must
# still migrate on. (The commits between them had two leaves, which `migrate` refuses.) The
# first, before every squash, is migrated with rows in its own test below.
BEFORE_EVERY_SQUASH = "f5f10f6350daeb1c16fa2cf72736f9049e8e12f8"  # moderation at 0004_erasure_and_trace_context
MAIN_BEFORE_A_SQUASH = {
    "8279d7c075965c3ec9fc16a591dc34e103774121": "moderation at 0006_merge_20261130_0927",
    "a2898fa52244f9369583212ac3aa1f0c2552e344": "moderation at 0007_merge_20261130_0939",
    "b991b8db0dba731c73e1c2af0b39b348094eb504": "moderation at 0011_attempt_item_error",
}
SQUASHES = {
    "moderation": ["0006_squashed_policy_rules_reports_appeals", "0007_squashed_moderator_workplace",
                   "0008_squashed_hardening_notifications", "0012_squashed_notify_client_pace"],
    "audit": ["0005_squashed_transition_left_queue_index"],
}

# Runs `migrate` without the defaults written after it: they are today's models, whose columns a
# database stopped at an old commit does not have yet. `--at app:name ...` migrates each app
# named to that migration and every other app to its end.
MIGRATE_WITHOUT_DEFAULTS = """
import sys

import django

django.setup()
from django.apps import apps
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader
from django.db.models.signals import post_migrate

post_migrate.disconnect(sender=apps.get_app_config("moderation"), dispatch_uid="moderation.ensure_defaults")
if sys.argv[1:2] == ["--at"]:
    targets = dict(arg.split(":") for arg in sys.argv[2:])
    for app, name in targets.items():
        call_command("migrate", app, name, verbosity=0)
    for app in sorted(MigrationLoader(None).migrated_apps - set(targets)):
        call_command("migrate", app, verbosity=0)
else:
    call_command("migrate", *sys.argv[1:], verbosity=0)
"""
# The old line's last migrations, by their names in the tree.
AT_OLD_LINE = {"moderation": "0012_squashed_notify_client_pace", "audit": "0006_i17_lean_heartbeat",
               "callbacks": "0002_wrong_provider_outcome"}

# The schema as PostgreSQL holds it: columns (type, null, default), constraints, indexes,
# triggers and functions. Not the columns' order: that follows the order a database's
# migrations ran in, which differed between databases before the squash already (a fresh
# migrate added the policy rules' columns before the erasure's, main's own history after).
SCHEMA = """
SELECT 'column', table_name, column_name || ' ' || data_type || coalesce('(' || character_maximum_length || ')', '')
       || ' ' || is_nullable || ' ' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'constraint', cl.relname, con.conname || ' ' || pg_get_constraintdef(con.oid)
  FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.conrelid
  JOIN pg_namespace ns ON ns.oid = cl.relnamespace WHERE ns.nspname = 'public'
UNION ALL
SELECT 'index', tablename, indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'trigger', tgrelid::regclass::text, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'function', proname, prosrc FROM pg_proc p JOIN pg_namespace ns ON ns.oid = p.pronamespace
 WHERE ns.nspname = 'public'
ORDER BY 1, 2, 3
"""


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def old_commits_at_hand():
    if _git("cat-file", "-e", f"{OLD_LINE}^{{commit}}").returncode != 0:
        pytest.skip("needs the git history (the old migration files are read from it)")


# Modules that migrations import and that have moved since (into packages, issue 46): an old
# migration file is read with its imports pointed at where the module lives now, as the same
# file in the tree was edited when the module moved.
MOVED = {"moderation.ids": "moderation.db.ids"}


def _moved_since(source: str) -> str:
    for old, new in MOVED.items():
        source = re.sub(rf"\b{re.escape(old)}\b", new, source)
    return source


@pytest.fixture(scope="module")
def lines(tmp_path_factory, old_commits_at_hand):
    """`lines(commit)` -> a settings module whose MIGRATION_MODULES are the commit's migrations."""
    root = tmp_path_factory.mktemp("old-migrations")
    (root / "migrate_without_defaults.py").write_text(MIGRATE_WITHOUT_DEFAULTS)

    def at(commit: str) -> str:
        package = root / f"line_{commit[:12]}"
        if not package.exists():
            for app in APPS:
                (package / app).mkdir(parents=True)
                for path in _git("ls-tree", "--name-only", commit, f"{app}/migrations/").stdout.split():
                    source = _git("show", f"{commit}:{path}").stdout
                    (package / app / Path(path).name).write_text(_moved_since(source))
            (package / "__init__.py").write_text("")
            modules = {app: f"{package.name}.{app}" for app in APPS}
            (package / "settings.py").write_text(
                f"from config.settings import *  # noqa: F403\nMIGRATION_MODULES = {modules!r}\n")
        return f"{package.name}.settings"

    at.root = root
    return at


@pytest.fixture(scope="module")
def databases():
    """`databases()` -> the URL of a new, empty database; all are dropped after the module."""
    server = urlsplit(os.environ["DATABASE_URL"])
    created = []

    def admin(statement: str) -> None:
        with psycopg.connect(server._replace(path="/postgres").geturl(), autocommit=True) as conn:
            conn.execute(statement)

    def create() -> str:
        name = f"migrations_{uuid.uuid4().hex[:12]}"
        admin(f'CREATE DATABASE "{name}"')
        created.append(name)
        return server._replace(path=f"/{name}").geturl()

    yield create
    for name in created:
        admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(url: str, *args: str, settings: str = "config.settings", script: str | None = None,
           pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """`manage.py <args>` (or `script <args>`) against `url` in a process of its own."""
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": settings,
           "PYTHONPATH": os.pathsep.join(str(p) for p in (pythonpath, ROOT) if p)}
    command = [sys.executable, script or "manage.py", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)


def migrate_old(lines, url: str, commit: str | None, *target: str) -> None:
    """Migrate `url` the way `commit` did (None: the tree), up to `target` if given."""
    settings = lines(commit) if commit else "config.settings"
    run = manage(url, *target, settings=settings, script=str(lines.root / "migrate_without_defaults.py"),
                 pythonpath=lines.root)
    assert run.returncode == 0, run.stderr


def migrate_new(url: str) -> subprocess.CompletedProcess:
    run = manage(url, "migrate", "--no-input")
    assert run.returncode == 0, run.stderr
    return run


def schema(url: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(SCHEMA).fetchall()


def applied(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return set(conn.execute("SELECT app, name FROM django_migrations").fetchall())


@pytest.fixture(scope="module")
def fresh_schema(databases):
    """The schema a fresh database gets from the migrations in the tree."""
    url = databases()
    migrate_new(url)
    return schema(url)


@pytest.fixture(scope="module")
def old_database(databases, lines):
    """A database migrated by the old files to their end, and its schema then."""
    url = databases()
    migrate_old(lines, url, OLD_LINE)
    return url, schema(url)


def test_each_app_migrates_along_one_line_without_merge_migrations():
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    for app in APPS:
        nodes = [key for key in graph.nodes if key[0] == app]
        for key in nodes:
            parents = [parent for parent in graph.node_map[key].parents if parent.key[0] == app]
            assert len(parents) <= 1, f"{app}.{key[1]} merges {sorted(p.key[1] for p in parents)}"
        assert len(graph.leaf_nodes(app)) == 1, f"{app} has several leaves: {graph.leaf_nodes(app)}"


def test_the_operations_doc_names_each_squashed_migration_and_what_it_replaces():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    in_code = {f"{app}.{name}": sorted(n for _, n in migration.replaces)
               for (app, name), migration in loader.replacements.items() if app in APPS}
    section = OPERATIONS.read_text().split("## Squashed migrations", 1)[1].split("\n## ", 1)[0]
    in_doc = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            squash, replaced = line.split("|")[1:3]
            in_doc[squash.strip(" `")] = sorted(re.findall(r"`([^`]+)`", replaced))
    assert in_doc == in_code


@pytest.mark.e2e
def test_a_fresh_database_gets_the_schema_the_old_files_built(old_database, databases, lines):
    """Up to the old line's end (later migrations left out)."""
    _, old_schema = old_database
    url = databases()
    migrate_old(lines, url, None, "--at", *(f"{app}:{name}" for app, name in AT_OLD_LINE.items()))
    assert schema(url) == old_schema


@pytest.mark.e2e
def test_a_database_migrated_by_the_old_files_runs_only_the_migrations_added_after_them(
        old_database, fresh_schema):
    url, _ = old_database
    old_line = applied(url)
    run = migrate_new(url)
    later = {key for key in MigrationLoader(None).disk_migrations if key[0] in APPS} - old_line
    later -= {(app, name) for app, names in SQUASHES.items() for name in names}
    assert set(re.findall(r"Applying (\w+)\.(\w+)\.\.\.", run.stdout)) == later
    assert schema(url) == fresh_schema
    shown = manage(url, "showmigrations", *APPS).stdout
    assert "[ ]" not in shown, shown
    assert manage(url, "migrate", "--check").returncode == 0
    # Django records the squashes as applied too: once every database has, `replaces` can go.
    assert {(app, name) for app, names in SQUASHES.items() for name in names} <= applied(url)


@pytest.mark.e2e
@pytest.mark.parametrize("commit", MAIN_BEFORE_A_SQUASH, ids=MAIN_BEFORE_A_SQUASH.values())
def test_a_database_where_main_stopped_before_a_squash_migrates_on_to_the_fresh_schema(
        commit, databases, lines, fresh_schema):
    url = databases()
    migrate_old(lines, url, commit)
    migrate_new(url)
    assert schema(url) == fresh_schema
    assert "[ ]" not in manage(url, "showmigrations", *APPS).stdout


# Rows as main left them at f5f10f6: a review waiting for a human after user reports, and the
# notification of its decision (written before notifications named their review).
ROWS_BEFORE_REPORTS = """
INSERT INTO moderation_apiclient (name, token_hash, token_prefix, webhook_url, webhook_secret, is_active, created_at)
VALUES ('acme', 'hash', 'prefix', '', '', true, now());
INSERT INTO moderation_content (id, external_id, kind, text, media_url, metadata, created_at, client_id)
VALUES ('00000000-0000-7000-8000-000000000001', 'e1', 'text', 'hello', '', '{}', now(),
        (SELECT id FROM moderation_apiclient));
INSERT INTO moderation_contentreview (id, status, version, worker_id, provider_request_id, created_at, updated_at,
                                      client_id, content_id)
VALUES ('00000000-0000-7000-8000-000000000002', 'manual_review', 1, '', '', now(), now(),
        (SELECT id FROM moderation_apiclient), '00000000-0000-7000-8000-000000000001');
INSERT INTO moderation_decision (label, source, score, categories, category_scores, model, explanation, reason,
                                 created_at, review_id, category)
VALUES ('manual_review', 'provider', 0.5, '{}', '{}', '', '', '', now(), '00000000-0000-7000-8000-000000000002', '');
UPDATE moderation_contentreview SET decision_id = (SELECT id FROM moderation_decision);
INSERT INTO moderation_decisionnotification (event_id, url, payload, status, attempts, last_error, created_at,
                                             client_id, decision_id)
VALUES ('event-1', '', '{}', 'pending', 0, '', now(), (SELECT id FROM moderation_apiclient),
        (SELECT id FROM moderation_decision));
INSERT INTO audit_reviewtransition (from_status, to_status, cause, actor, actor_id, job_id, reason, created_at,
                                    review_id)
VALUES ('processing', 'manual_review', 'user_reports', 'system', '', '', '', now(),
        '00000000-0000-7000-8000-000000000002');
"""


@pytest.mark.e2e
def test_rows_written_before_the_squashes_get_their_review_and_queue_from_them(databases, lines, fresh_schema):
    """Main at f5f10f6, before every squash, with rows: the squashes keep the old migrations'
    data operations, so a notification gets its review before the column is required, and a
    review waiting for a human gets the queue its last transition names."""
    url = databases()
    migrate_old(lines, url, BEFORE_EVERY_SQUASH)
    with psycopg.connect(url) as conn:
        conn.execute(ROWS_BEFORE_REPORTS)
    migrate_new(url)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT review_id::text FROM moderation_decisionnotification").fetchall() == [
            ("00000000-0000-7000-8000-000000000002",)]
        assert conn.execute("SELECT queue, priority FROM moderation_contentreview").fetchall() == [("reports", 50)]
    assert schema(url) == fresh_schema
    assert "[ ]" not in manage(url, "showmigrations", *APPS).stdout


@pytest.mark.e2e
def test_a_database_partly_through_a_squash_is_refused_before_anything_runs(databases, lines):
    """0004_policy_rules without the rest of what 0006_squashed_policy_rules_reports_appeals
    replaces (a database of the branch that wrote it): Django could run neither, and on its own
    says "conflicting migrations" and suggests makemigrations --merge."""
    url = databases()
    migrate_old(lines, url, OLD_LINE, "moderation", "0004_policy_rules")  # and what it depends on
    before = applied(url)
    run = manage(url, "migrate", "--no-input")
    assert run.returncode == 1
    assert "(moderation.E009) Database 'default' applied moderation.0004_policy_rules but not" in run.stderr
    assert "squashed migration moderation.0006_squashed_policy_rules_reports_appeals" in run.stderr
    assert 'docs/operations.md, "Squashed migrations"' in run.stderr
    assert applied(url) == before
