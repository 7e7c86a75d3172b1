"""A SELECT of model rows compiled once, for the lookups every request makes (docs/design.md,
"Hot paths").

Django compiles a queryset's SQL each time it runs it: for the token lookup of every API request
that was about a third of the lookup's Python, and about a millisecond for each of a callback's
locking reads. `CompiledSelect` has Django's compiler build the statement once per database and
shape of its arguments, with a marker in place of each argument, and then only runs it; the rows
become model instances as the queryset's own iterable makes them (`select_related` objects,
annotations and the columns' converters included):

    ACTIVE = CompiledSelect(lambda token_hash: ApiClient.objects.filter(token_hash=token_hash, is_active=True))
    client = ACTIVE.first(hash_token(token))      # the first ApiClient by primary key, or None

    LOCK = CompiledSelect(lambda ids: Author.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    authors = LOCK.all([3, 5, 8])                 # the list the queryset gives

What it takes: a queryset of model instances (not values(), only() or prefetch_related()), and
arguments that reach the SQL as they are: strings, integers and UUIDs compared to columns of
their type (a string for an integer column is refused, not converted as the ORM would), or
lists of one of them (`__in`; each length is a shape of its own, compiled once, up to
MAX_SHAPES a statement and MAX_LIST items; past that, or for an empty list, the queryset runs as
it is). Anything else is refused when it is compiled, never answered differently.
tests/moderation/test_compiled.py compares it with the ORM.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections, models
from django.db.models import Value, sql
from django.core.exceptions import EmptyResultSet
from django.db.models.query import ModelIterable, get_related_populators
from django.db.transaction import TransactionManagementError

from moderation.db.insert_sql import insert_sql_forget

MAX_SHAPES = 64  # list lengths compiled per statement: a batch's sizes, bounded
MAX_LIST = 1_000  # arguments in a statement's lists

# Markers no real argument holds, one per type: the database refuses strings with a NUL, and the
# integers and UUIDs are reserved values; each must reach the compiled parameters once, as it is.
_MARKERS: dict[type, Callable[[int], object]] = {
    str: "\x00compiled-argument-{}\x00".format,
    int: lambda number: 2_147_480_000 + number,
    uuid.UUID: lambda number: uuid.UUID(int=0xC0A1_0000_0000_0000_0000_0000_0000_0000 + number),
}


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    positions: list[int]
    model: type[models.Model]
    init_list: list[str]
    fields_start: int
    fields_end: int
    converters: list
    related: list
    annotations: dict[str, int]
    locks: bool


_EVERY: weakref.WeakSet = weakref.WeakSet()


def compiled_forget() -> None:
    """Forget every compiled statement (these and the INSERTs of moderation/db/insert_sql.py): each
    is compiled again when next run. For tests that replace what a queryset is built from (a
    manager's method, a guard taken out) and put it back: a statement compiled meanwhile must not
    outlive the replacement (tests/conftest.py)."""
    for each in list(_EVERY):
        each._shapes.clear()
    insert_sql_forget()


class _Shapes:
    """What is compiled, once per shape of the arguments (their types, a list's length)."""

    def __init__(self, queryset_for: Callable[..., models.QuerySet], *, using: str = "default") -> None:
        self._queryset_for, self.using = queryset_for, using
        self._shapes: dict[tuple, object] = {}
        _EVERY.add(self)

    def _compiled_for(self, shape: tuple, compile_: Callable[[list], object]):
        """The shape's compiled statement (`compile_(markers)` the first time), or None where the
        bounds say to run the queryset as it is."""
        compiled = self._shapes.get(shape)
        if compiled is None:
            lengths = [kind[2] for kind in shape[1:] if kind[0] == "list"]
            if len(self._shapes) >= MAX_SHAPES or 0 in lengths or sum(lengths) > MAX_LIST:
                # An empty list is Django's to answer without a statement; beyond the bounds, the
                # queryset as it is.
                return None
            counter = iter(range(1 << 20))
            try:
                compiled = compile_([_markers(kind, counter) for kind in shape[1:]])
            except EmptyResultSet:
                # Django answers this shape without a statement (a WHERE it knows is empty, a
                # marker past a small integer column's range): the queryset as it is, each time.
                return None
            self._shapes[shape] = compiled
        return compiled


class CompiledSelect(_Shapes):

    def first(self, *args):
        """The first row (by primary key) the queryset gives for `args`, as a model instance, or None."""
        rows = self._run(args, first=True)
        return rows[0] if rows else None

    def all(self, *args) -> list:
        """Every row the queryset gives for `args`, in its order, as model instances."""
        return self._run(args, first=False)

    def _queryset(self, args, *, first: bool) -> models.QuerySet:
        queryset = self._queryset_for(*args)
        return queryset.order_by("pk")[:1] if first else queryset

    def _run(self, args: tuple, *, first: bool) -> list:
        compiled = self._compiled_for((first, *map(_shape_of, args)),
                                      lambda markers: self._compile(markers, first=first))
        if compiled is None:
            return list(self._queryset(args, first=first).using(self.using))
        connection = connections[self.using]
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        values = list(compiled.params)
        for position, value in zip(compiled.positions, _flattened(args), strict=True):
            values[position] = value
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, values)
            rows = cursor.fetchall()
        return [self._instance(compiled, row, connection) for row in rows]

    def _instance(self, compiled: _Compiled, row, connection) -> models.Model:
        if compiled.converters:
            row = list(row)
            for position, (converters, expression) in compiled.converters:
                value = row[position]
                for converter in converters:
                    value = converter(value, expression, connection)
                row[position] = value
        instance = compiled.model.from_db(self.using, compiled.init_list,
                                          row[compiled.fields_start:compiled.fields_end])
        for populator in compiled.related:
            populator.populate(row, instance)
        for name, position in compiled.annotations.items():
            setattr(instance, name, row[position])
        return instance

    def _compile(self, markers_for: list, *, first: bool) -> _Compiled:
        queryset = self._queryset(markers_for, first=first)
        query = queryset.query
        if queryset._iterable_class is not ModelIterable or queryset._prefetch_related_lookups \
                or queryset._known_related_objects or query.deferred_loading != (frozenset(), True):
            raise ValueError("CompiledSelect reads whole rows of a model (no values(), only() or prefetch_related())")
        compiler = query.get_compiler(using=self.using)
        sql, params = compiler.as_sql()
        if compiler.has_extra_select or compiler.has_composite_fields([s[0] for s in compiler.select]):
            raise ValueError("CompiledSelect cannot read this statement's rows as the queryset does")
        positions = _positions(list(_flattened(markers_for)), params)
        select, klass_info = compiler.select, compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        columns = [s[0] for s in select[:compiler.col_count]]
        return _Compiled(
            sql=sql, params=tuple(params), positions=positions, model=klass_info["model"],
            init_list=[column[0].target.attname for column in select[start:end]],
            fields_start=start, fields_end=end,
            converters=list(compiler.get_converters(columns).items()),
            related=get_related_populators(klass_info, select, self.using),
            annotations=dict(compiler.annotation_col_map or {}),
            locks=bool(query.select_for_update),
        )


class CompiledUpdate(_Shapes):
    """`queryset.update(**values)` of the `fields` named, compiled once per shape of the
    queryset's arguments; `fixed`: expressions written as they are (`F("version") + 1`).

        PROCESSED = CompiledUpdate(lambda pk: ProviderCallback.objects.filter(pk=pk), ("outcome", "processed_at"))
        PROCESSED.run(callback.pk, outcome="applied", processed_at=now)     # the rows it changed

    Each value is prepared as the ORM's UPDATE prepares it (the field's get_db_prep_save, placed
    with "%s"); a value that is an expression is compiled with the queryset each time, as
    `update()` would. Like `update()`, no signal is sent and `auto_now` is not applied.
    """

    def __init__(self, queryset_for: Callable[..., models.QuerySet], fields: tuple[str, ...], *,
                 fixed: dict | None = None, using: str = "default") -> None:
        super().__init__(queryset_for, using=using)
        self.fixed = dict(fixed or {})
        self._fields = tuple(fields)

    def run(self, *args, **values) -> int:
        """Run the UPDATE; the number of rows it changed (0, with no statement, where Django
        knows the WHERE is empty: an empty list)."""
        try:
            statement, params = self.statement(*args, **values)
        except EmptyResultSet:
            return 0
        with connections[self.using].cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.rowcount

    def statement(self, *args, **values) -> tuple[str, list]:
        """The UPDATE's SQL and parameters, for OneStatement (moderation/db/one_statement.py).
        Raises EmptyResultSet, as Django's compiler does, where the WHERE is known to be empty."""
        if set(values) != set(self._fields):
            raise TypeError(f"CompiledUpdate writes {sorted(self._fields)}, given {sorted(values)}")
        connection = connections[self.using]
        compiled = None
        if not any(hasattr(value, "resolve_expression") for value in values.values()):
            compiled = self._compiled_for(("update", *map(_shape_of, args)), self._compile)
        if compiled is None:
            return self._as_sql(self._queryset_for(*args), values, connection)
        statement, params, positions, fields = compiled
        params = list(params)
        for position, value in zip(positions, _flattened(args), strict=True):
            params[position] = value
        for name, (position, field) in fields.items():
            params[position] = field.get_db_prep_save(values[name], connection=connection)
        return statement, params

    def _compile(self, markers_for: list):
        meta = self._queryset_for(*markers_for).model._meta
        fields = {name: meta.get_field(name) for name in self._fields}
        if any(hasattr(field, "get_placeholder") for field in fields.values()):
            raise ValueError("CompiledUpdate cannot write a field with a placeholder of its own")
        value_markers = {name: _MARKERS[str](f"value-{number}") for number, name in enumerate(self._fields)}
        statement, params = self._as_sql(self._queryset_for(*markers_for),
                                         {name: Value(marker) for name, marker in value_markers.items()},
                                         connections[self.using])
        where = _positions(list(_flattened(markers_for)), params)
        placed = _positions(list(value_markers.values()), params)
        return statement, tuple(params), where, {
            name: (position, fields[name]) for name, position in zip(value_markers, placed, strict=True)
        }

    def _as_sql(self, queryset: models.QuerySet, values: dict, connection) -> tuple[str, list]:
        query = queryset.query.chain(sql.UpdateQuery)
        query.add_update_values({**self.fixed, **values})
        if query.related_updates:
            raise ValueError("CompiledUpdate writes one table")
        statement, params = query.get_compiler(using=self.using, connection=connection).as_sql()
        return statement, list(params)


def _positions(markers: list, params) -> list[int]:
    """Where each marker is in the compiled parameters: once each, as it is, or refused."""
    positions = []
    for marker in markers:
        found = [i for i, param in enumerate(params) if type(param) is type(marker) and param == marker]
        if len(found) != 1:
            raise ValueError("each argument must reach the SQL once, as it is")
        positions.append(found[0])
    return positions


def _shape_of(value) -> tuple:
    if isinstance(value, list | tuple):
        kinds = {_kind_of(each) for each in value}
        if len(kinds) > 1:
            raise TypeError("a compiled statement takes lists of one type")
        return ("list", kinds.pop() if kinds else str, len(value))
    return ("one", _kind_of(value))


def _kind_of(value) -> type:
    """The argument's marker type. A choice (a str or int enum) passes as the ORM passes it; a
    bool is not an integer here."""
    if not isinstance(value, bool):
        for kind in _MARKERS:
            if isinstance(value, kind):
                return kind
    raise TypeError(f"a compiled statement takes strings, integers and UUIDs, not {type(value).__name__}")


def _markers(shape: tuple, counter):
    make = _MARKERS[shape[1]]
    if shape[0] == "list":
        return [make(next(counter)) for _ in range(shape[2])]
    return make(next(counter))


def _flattened(args):
    for arg in args:
        if isinstance(arg, list | tuple):
            yield from arg
        else:
            yield arg
