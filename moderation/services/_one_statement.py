"""Writing several new rows in one statement: one round trip instead of one per row.

`INSERT ... VALUES` of each row, chained as data-modifying CTEs (PostgreSQL). The SQL of each
insert is Django's own (its compiler, so defaults, `auto_now_add` and field conversions are the
ORM's); only the chaining is ours. The rows are not `save()`d: no pre_save/post_save signals.
"""

from __future__ import annotations

from django.db import connections, models
from django.db.models import sql


def insert_in_one_statement(*objs: models.Model, using: str = "default") -> None:
    """INSERT each unsaved instance, all in one statement; each gets its primary key.

    The inserts commit or fail together (one statement), and constraints are checked as for
    separate inserts: a foreign key between them is checked at the end of the statement.
    """
    connection = connections[using]
    ctes, params = [], []
    for number, obj in enumerate(objs):
        insert_sql, insert_params = _insert(obj, connection, using)
        ctes.append(f"i{number} AS ({insert_sql})")
        params.extend(insert_params)
    keys = ", ".join(
        f"(SELECT {connection.ops.quote_name(obj._meta.pk.column)} FROM i{number})" for number, obj in enumerate(objs)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT {keys}", params)
        row = cursor.fetchone()
    for obj, key in zip(objs, row, strict=True):
        obj.pk = key
        obj._state.adding, obj._state.db = False, using


def _insert(obj: models.Model, connection, using: str) -> tuple[str, tuple]:
    """Django's INSERT for `obj`, RETURNING its primary key (as Model._save_table builds it)."""
    meta = obj._meta
    if obj.pk is None:
        obj.pk = meta.pk.get_pk_value_on_save(obj)
    fields = [
        field for field in meta.local_concrete_fields
        if not field.generated and not (obj.pk is None and field is meta.auto_field)
    ]
    query = sql.InsertQuery(type(obj))
    query.insert_values(fields, [obj])
    compiler = query.get_compiler(using=using, connection=connection)
    compiler.returning_fields = [meta.pk]
    [(insert_sql, insert_params)] = compiler.as_sql()
    return insert_sql, insert_params
