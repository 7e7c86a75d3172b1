"""The race_lab command refuses bad input before it starts any process."""

import pytest
from django.core.management import CommandError, call_command
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_lab_starts(monkeypatch):
    """A refusal must come before any process starts: a lab that starts fails the test at once."""

    def started(config):
        raise AssertionError("the lab started")

    monkeypatch.setattr("lab.management.commands.race_lab.RaceLab", started)


def test_an_unmigrated_database_is_refused_with_the_step_that_fixes_it(monkeypatch):
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("moderation", "0001")])
    with pytest.raises(CommandError, match=r"is not migrated: run `python manage.py migrate`"):
        call_command("race_lab", "--reviews", "1")


@pytest.mark.parametrize("args", [["--reviews", "0"], ["--batch-size", "300"], ["--report-rate", "1.5"],
                                  ["--hostile-rate", "-0.1"], ["--decision-bound-s", "0"], ["--authors", "-1"],
                                  ["--stale-rate", "1.5"], ["--account-appeal-rate", "-0.1"], ["--lapse-rate", "2"],
                                  ["--moderator-rate", "0"], ["--sweep-ahead-days", "-1"], ["--notice-rate", "1.5"],
                                  ["--notice-decide-rate", "-0.1"], ["--notice-reprocess-rate", "2"]])
def test_out_of_range_arguments_are_refused(args):
    with pytest.raises(CommandError):
        call_command("race_lab", *args)
