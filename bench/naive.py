"""The naive variant, for the cost-of-safety benchmark only: never a setting, never shipped.

`python -m bench.naive -m gunicorn ...` or `python -m bench.naive manage.py qcluster` runs the
command with the pipeline's concurrency guards replaced by what a first version would do:

- no row locks: `select_for_update()` (with or without SKIP LOCKED) on the project's own models
  reads without locking (django-q2's broker keeps its locks: it is not what is measured);
- unconditional saves: a review's save is `UPDATE ... WHERE id = %s`, not django-fsm's
  `... AND status = <status read>` (ConcurrentTransitionMixin).

Everything else (the transactions, the inbox's unique index, the active-key check) stays: those
are not what a naive version leaves out to go faster. Under collisions this variant loses
results and double-applies them; it exists to measure what the guards cost when nothing collides.
"""

from __future__ import annotations

import runpy
import sys

from django.db import models
from django.db.models.query import QuerySet


OWN_APPS = ("moderation", "callbacks", "audit")


def unguard(patch=setattr) -> None:
    """Remove the guards for this process (`patch`: a reversible setattr, for tests)."""
    from django_fsm import ConcurrentTransitionMixin

    locking = QuerySet.select_for_update

    def select_for_update(self, *args, **kwargs):
        if self.model._meta.app_label in OWN_APPS:
            return self
        return locking(self, *args, **kwargs)

    patch(QuerySet, "select_for_update", select_for_update)
    patch(ConcurrentTransitionMixin, "_do_update", models.Model._do_update)


if __name__ == "__main__":
    unguard()
    args = sys.argv[1:]
    if args[:1] == ["-m"]:
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        runpy.run_path(args[0], run_name="__main__")
