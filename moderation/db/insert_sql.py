"""A row's INSERT, its values prepared as `save()` prepares them and its SQL compiled once per
shape (docs/design.md, "Hot paths"). OneStatement (moderation/db/one_statement.py) chains
these; the job broker (moderation/jobs.py) runs one alone (`insert_row`).

The SQL of a row's INSERT depends on its model, the columns written and the database, not on
the values: Django's compiler builds it the first time a shape is written, and every later row
of that shape only has its values prepared (each field's get_db_prep_save, what the compiler
calls), so no request compiles a statement its process has compiled before. A reference to
another row of a OneStatement (`key_of`, SQL without parameters) is part of the shape; a row
holding any other expression (a value left to the database) or a field with a placeholder of its
own is compiled each time.
"""

from __future__ import annotations

from django.db import connections, models
from django.db.models import sql
from django.db.models.expressions import DatabaseDefault, RawSQL

_INSERT_SQL: dict[tuple, str] = {}


def insert_sql_forget() -> None:
    """Forget every compiled INSERT (moderation/db/compiled.py, `compiled_forget`)."""
    _INSERT_SQL.clear()


def insert_statement(obj: models.Model, using: str, connection) -> tuple[str, list]:
    """The INSERT of unsaved `obj`, returning its primary key. Its field values are prepared
    now (`auto_now_add`, defaults), as `save()` would, so they can be read before it runs."""
    meta = obj._meta
    if obj.pk is None:
        obj.pk = meta.pk.get_pk_value_on_save(obj)
    fields = [
        field for field in meta.local_concrete_fields
        if not field.generated and not (obj.pk is None and field is meta.auto_field)
    ]
    for field in fields:
        current = getattr(obj, field.attname)
        if isinstance(current, RawSQL):
            continue
        if isinstance(current, DatabaseDefault) and field.has_default():
            # Left to the database, save() reads the value back (RETURNING); here the
            # field's Python default, which the models keep equal to it.
            current = field.get_default()
            setattr(obj, field.attname, current)
        value = field.pre_save(obj, add=True)
        if value is not current:  # (assigning a protected FSMField is refused, even unchanged)
            setattr(obj, field.attname, value)
    return insert_sql(obj, fields, using, connection)


def insert_row(obj: models.Model, using: str) -> None:
    """Insert unsaved `obj` alone, as `save()` would (no signal is sent): it gets its primary key
    and is marked saved. (Several rows in one statement: OneStatement.)"""
    connection = connections[using]
    statement, params = insert_statement(obj, using, connection)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        (obj.pk,) = cursor.fetchone()
    obj._state.adding, obj._state.db = False, using


def insert_sql(obj: models.Model, fields: list, using: str, connection) -> tuple[str, list]:
    """The INSERT of `obj`'s `fields` (values prepared, raw), returning its primary key."""
    values = [getattr(obj, field.attname) for field in fields]
    references = [_reference(value) for value in values]
    shape = insert_shape(obj, fields, using, values, references)
    cached = _INSERT_SQL.get(shape)
    plain = not any(hasattr(value, "resolve_expression") and not reference
                    for value, reference in zip(values, references, strict=True))
    if cached is not None and plain:
        return cached, [field.get_db_prep_save(value, connection=connection)
                        for field, value, reference in zip(fields, values, references, strict=True) if not reference]
    statement, params = compiled_insert(obj, fields, using, connection)
    if plain and not any(hasattr(field, "get_placeholder") for field in fields):
        _INSERT_SQL[shape] = statement
    return statement, params


def insert_shape(obj: models.Model, fields: list, using: str, values: list | None = None,
                 references: list[bool] | None = None) -> tuple:
    """What an INSERT's SQL depends on. A reference to another row of the statement
    (OneStatement.key_of: SQL, no parameters) is part of it; any other expression is compiled
    each time. (`values` and `references`: the caller's, read once.)"""
    values = values if values is not None else [getattr(obj, field.attname) for field in fields]
    references = references if references is not None else [_reference(value) for value in values]
    return (type(obj), tuple(field.attname for field in fields), using,
            tuple(value.sql if reference else None for value, reference in zip(values, references, strict=True)))


def _reference(value) -> bool:
    return type(value) is RawSQL and not value.params


def compiled_insert(obj: models.Model, fields: list, using: str, connection) -> tuple[str, list]:
    """The INSERT as Django's compiler builds it."""
    query = sql.InsertQuery(type(obj))
    query.insert_values(fields, [obj], raw=True)  # raw: the values prepared by the caller, as they are
    compiler = query.get_compiler(using=using, connection=connection)
    compiler.returning_fields = [obj._meta.pk]
    [(statement, params)] = compiler.as_sql()
    return statement, list(params)
