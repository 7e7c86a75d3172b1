"""Writing several rows in one statement: one round trip instead of one per row.

Each write is Django's own SQL (its compiler: field conversions, defaults, `auto_now_add` are the
ORM's), chained as data-modifying CTEs, `WITH w0 AS (INSERT ...), w1 AS (UPDATE ...) SELECT
<keys>`; only the chaining is ours. The writes commit or fail together: the statement is atomic
on its own, and inside the caller's transaction it is part of it.

    writes = OneStatement()
    writes.insert(decision)                                   # decision.created_at is now set
    notification.decision_id = writes.key_of(decision)        # its id, inside the statement
    writes.insert(notification)
    writes.update(ModerationRequest.objects.filter(pk=1), status="completed", updated_at=now)
    reported = writes.read("SELECT EXISTS (...)", params)     # a question asked in the same trip
    writes.execute()                                          # every inserted row has its pk,
                                                              # reported.value its answer

PostgreSQL's rule for a WITH query (its manual, "Data-Modifying Statements in WITH"): every
sub-statement runs with the same snapshot, the one the statement started with, so the writes
cannot see each other's effects on their tables; the only way one sees another is the other's
RETURNING (what `key_of` reads). The order in which they run is unspecified, and a row modified
twice in one statement is modified once, by one of them, which cannot be predicted. So a caller:

- relies on no order between its writes, except what `key_of` expresses (a row that needs
  another's key reads it from that INSERT's RETURNING);
- never reads its own writes: an UPDATE (or a subquery in a value) of this statement does not
  see the rows its other writes insert or change. A value another write needs is computed in
  Python first (`insert` prepares `created_at` at once, for the notification body that states
  it; decide.py);
- modifies each row at most once per statement, and never updates a row it inserts here: it
  merges the values into one `update` (pipeline.py completes the operation in one UPDATE).
  A write whose row count matters stays out (`update` reports none): transition_review
  (transitions.py) saves the review alone, first, because its conditional UPDATE (the state
  machine's guard, docs/design.md invariant 1) must raise when it matches no row.

Constraints are checked as for separate statements: a unique constraint at each row (a lost
submission race is an IntegrityError, submission.py), and the foreign keys, which Django creates
DEFERRABLE INITIALLY DEFERRED, at commit (at the end of the statement when it is its own
transaction), so one new row may refer to another.

What `save()` does and this does not, and how the callers make up for it:

- `insert` prepares the values as `save()` does (each field's pre_save: `auto_now`,
  `auto_now_add`, a primary key's default), but when it is called, not when the statement
  runs. A field left to its `db_default` (its value a `DatabaseDefault`) gets the field's
  Python default when it has one (the models keep the two equal); without one the database
  fills it in, and the object keeps the `DatabaseDefault`: nothing is read back as `save()`
  reads such a field (RETURNING). The object gets its primary key and the keys `key_of`
  stood for, and is marked saved.
- `update` is `QuerySet.update()` (`update_compiled` the same, compiled once): `auto_now`
  fields are not set (pre_save is not called). The caller passes them: pipeline.py's `updated_at=now` on the operation it completes.
- No signal is sent: no pre_save or post_save for any row. Of the models written here, only
  ContentReview has a receiver, simple-history's post_save that records its history. Its rows
  are inserted by the callers in the same statement, built by `review_history_row`
  (transitions.py, which sends simple-history's pre_create_historical_record): review_submit
  inserts the first (`+`) one with the review, and transition_review saves the review with
  `skip_history_when_saving` and inserts the change (`~`), then sends
  post_create_historical_record.

tests/moderation/testone_statement.py finds every model a real run writes through here,
compares each row with the one `save()` writes for the same values, and lists the receivers made
up for: a model added, or a receiver connected, shows up there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db import connections, models
from django.db.models import sql
from django.db.models.expressions import RawSQL

from moderation.db.insert_sql import insert_statement

if TYPE_CHECKING:
    from moderation.db.compiled import CompiledUpdate


@dataclass
class Read:
    """A value read by a OneStatement (`read`): None until the statement has run."""

    sql: str
    params: tuple
    value: object = None


class OneStatement:
    def __init__(self, using: str = "default") -> None:
        self.using = using
        self.connection = connections[using]
        self._writes: list[tuple[str, tuple]] = []
        self._inserted: list[tuple[models.Model, str]] = []
        self._references: list[tuple[RawSQL, models.Model]] = []
        self._executed: list = []
        self._reads: list[Read] = []

    def insert(self, obj: models.Model) -> None:
        """Add the INSERT of unsaved `obj`. Its field values are prepared now (`auto_now_add`,
        defaults), as `save()` would, so they can be read before the statement runs."""
        insert_sql, params = insert_statement(obj, self.using, self.connection)
        name = f"w{len(self._writes)}"
        self._writes.append((f"{name} AS ({insert_sql})", params))
        self._inserted.append((obj, name))

    def key_of(self, obj: models.Model) -> RawSQL:
        """The primary key `obj` gets from its INSERT (added before), for a later write's value."""
        name = next(name for inserted, name in self._inserted if inserted is obj)
        key = RawSQL(f"(SELECT {self.connection.ops.quote_name(obj._meta.pk.column)} FROM {name})", ())
        self._references.append((key, obj))
        return key

    def update(self, queryset: models.QuerySet, **values) -> None:
        """Add `queryset.update(**values)` (its row count is not reported)."""
        query = queryset.query.chain(sql.UpdateQuery)
        query.add_update_values(values)
        update_sql, params = query.get_compiler(using=self.using, connection=self.connection).as_sql()
        self._writes.append((f"w{len(self._writes)} AS ({update_sql})", params))

    def update_compiled(self, update: CompiledUpdate, *args, **values) -> None:
        """Add `update.run(*args, **values)`: the same UPDATE, its SQL compiled once
        (moderation/db/compiled.py)."""
        update_sql, params = update.statement(*args, **values)
        self._writes.append((f"w{len(self._writes)} AS ({update_sql})", params))

    def read(self, sql_: str, params=()) -> Read:
        """Add a scalar subquery to the statement's SELECT: what a caller would otherwise ask in a
        round trip of its own. It sees the snapshot the statement starts with (none of its
        writes); its `value` is set once the statement has run."""
        read = Read(sql_, tuple(params))
        self._reads.append(read)
        return read

    def on_executed(self, callback) -> None:
        """Call `callback()` once the statement has run (not if it raised)."""
        self._executed.append(callback)

    def execute(self) -> None:
        """Run every write, in one statement; each inserted row gets its primary key, and a
        value given by `key_of` becomes that key."""
        if not self._writes and self._reads:
            self._writes.append(("w0 AS (SELECT 1)", ()))  # reads alone: still one statement
        if not self._writes:
            self._executed, callbacks = [], self._executed
            for callback in callbacks:
                callback()
            return
        keys = ", ".join(
            f"(SELECT {self.connection.ops.quote_name(obj._meta.pk.column)} FROM {name})" for obj, name in self._inserted
        ) or "1"
        selected = ", ".join([keys, *(f"({read.sql})" for read in self._reads)])
        params = [param for _, write_params in self._writes for param in write_params]
        params += [param for read in self._reads for param in read.params]
        with self.connection.cursor() as cursor:
            cursor.execute(f"WITH {', '.join(sql_ for sql_, _ in self._writes)} SELECT {selected}", params)
            row = cursor.fetchone()
        for read, value in zip(self._reads, row[len(row) - len(self._reads):], strict=True):
            read.value = value
        for (obj, _), key in zip(self._inserted, row, strict=False):
            obj.pk = key
            obj._state.adding, obj._state.db = False, self.using
        for obj, _ in self._inserted:  # references to other rows of the statement, now known
            for field in obj._meta.concrete_fields:
                if field.generated:  # the database's to compute (reading it would load it: a query)
                    continue
                value = getattr(obj, field.attname)
                target = next((other for key, other in self._references if key is value), None)
                if target is not None:
                    setattr(obj, field.attname, target.pk)
        callbacks = self._executed
        self._writes, self._inserted, self._references, self._executed, self._reads = [], [], [], [], []
        for callback in callbacks:
            callback()
