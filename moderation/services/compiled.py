"""A SELECT of model rows compiled once, for the lookups every request makes (docs/design.md,
"Hot paths").

Django compiles a queryset's SQL each time it runs it: for the token lookup of every API request
that was about a third of the lookup's Python. `CompiledSelect` has Django's compiler build the
statement once per database, with a marker in place of each argument, and then only runs it:

    ACTIVE = CompiledSelect(lambda token_hash: ApiClient.objects.filter(token_hash=token_hash, is_active=True))
    client = ACTIVE.first(hash_token(token))      # an ApiClient, as the queryset's .first() gives, or None

What it takes: a queryset of whole rows of one model (no select_related, annotations, only() or
values()), whose columns need no conversion when read (the PostgreSQL backend converts none of
the usual fields), and arguments that reach the SQL as they are (strings and integers compared
to columns: Django passes them through). Anything else is refused when it is compiled, never
answered differently. tests/moderation/test_compiled.py compares it with the ORM.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections, models

_MARKER = "\x00compiled-argument-{}\x00"  # no real argument holds a NUL: the database refuses them


class CompiledSelect:
    def __init__(self, queryset_for: Callable[..., models.QuerySet], *, using: str = "default") -> None:
        self._queryset_for, self.using = queryset_for, using
        self._compiled: tuple | None = None

    def first(self, *args):
        """The first row (by primary key) the queryset gives for `args`, as a model instance, or None."""
        sql, params, positions, model, names = self._compiled or self._compile(len(args))
        values = list(params)
        for position, value in zip(positions, args, strict=True):
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise TypeError(f"CompiledSelect takes strings and integers, not {type(value).__name__}")
            values[position] = value
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, values)
            row = cursor.fetchone()
        return None if row is None else model.from_db(self.using, names, row)

    def _compile(self, arity: int) -> tuple:
        markers = [_MARKER.format(number) for number in range(arity)]
        queryset = self._queryset_for(*markers).order_by("pk")[:1]
        model = queryset.model
        compiler = queryset.query.get_compiler(using=self.using)
        sql, params = compiler.as_sql()
        if any(params.count(marker) != 1 for marker in markers):
            raise ValueError("each argument must reach the SQL once, as it is")
        positions = [params.index(marker) for marker in markers]
        columns = [column for column, _, _ in compiler.select]
        names = [field.attname for field in model._meta.concrete_fields]
        if [getattr(column, "target", None) for column in columns] != list(model._meta.concrete_fields) \
                or compiler.klass_info.get("related_klass_infos"):
            raise ValueError("CompiledSelect reads whole rows of one model")
        if compiler.get_converters(columns):
            raise ValueError(f"{model.__name__}'s columns need converting when read: use the queryset")
        self._compiled = (sql, tuple(params), positions, model, names)
        return self._compiled
