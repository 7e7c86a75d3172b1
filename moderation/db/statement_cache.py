"""psycopg's cache of converted statements, wide enough for the platform's own (docs/design.md,
"Hot paths").

Before it sends a statement, psycopg turns its `%s` placeholders into PostgreSQL's `$n`
(`_split_query`, a scan of the whole text in Python) and caches the result in an LRU of 128
entries, but only for statements of at most 4,096 bytes and 50 parameters: its guard against
ORMs' multi-row INSERTs, whose text changes with every row count (psycopg/_queries.py). The
platform's one-statement writes are longer: a submission's (content, review, history row and
event) has about 100 parameters and a decision's more, so each was scanned again on every
request. They come in a handful of shapes, so the limits are raised to let them in. A bulk
write of many rows still stays out, and the LRU's 128 entries bound the memory either way.
"""

from __future__ import annotations

from psycopg import _queries

# A submission's one statement: about 2,500 bytes and 100 parameters. The bounds keep an entry
# small (the LRU's worst case a few MiB per process) and a multi-row write of many rows out.
MAX_LENGTH = 16 * 1024
MAX_PARAMS = 256


def widen() -> None:
    """Raise psycopg's limits (never lower them). psycopg is pinned (requirements.txt): a
    version that renames them fails tests/moderation/test_fast_paths.py, not silently."""
    _queries.MAX_CACHED_STATEMENT_LENGTH = max(_queries.MAX_CACHED_STATEMENT_LENGTH, MAX_LENGTH)
    _queries.MAX_CACHED_STATEMENT_PARAMS = max(_queries.MAX_CACHED_STATEMENT_PARAMS, MAX_PARAMS)
