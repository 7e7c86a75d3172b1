"""Whether the code runs inside a transaction of its own program, as production would see it.

`connection.in_atomic_block` is also true inside the transaction a test case wraps each test in
(Django's `TestCase`, which pytest-django's `db` fixture uses): there a guard asking it cannot
tell the test's transaction from a caller's. Django's own durable check (`atomic(durable=True)`)
skips the blocks a test case opened (`Atomic._from_testcase`, set by `TestCase._enter_atomics`);
this does the same for the guard that decides by whether the program holds a transaction: the
provider call refuses to run inside one (docs/design.md, invariant 6; `services/dispatch.py`,
`services/batch.py`).

The other places that ask `in_atomic_block` ask what the database will do, which a test's
transaction changes as much as a caller's, and keep asking it: the submission's savepoint around
a lost race (without it an IntegrityError aborts whatever transaction is open),
the finalize's second look after a concurrent transition (no savepoint to look again from), and
the transparency report's snapshot (an isolation level is set only by a transaction's first
statement).
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, connections


def in_transaction(using: str | None = None) -> bool:
    """True when an atomic block is open on the connection `using` (the default database when
    None) other than the ones a test case wraps the test in: the code then runs inside a caller's
    transaction, as it would in production. Outside every test it is `in_atomic_block`."""
    connection = connections[using or DEFAULT_DB_ALIAS]
    if not connection.in_atomic_block:
        return False
    return any(not block._from_testcase for block in connection.atomic_blocks)
