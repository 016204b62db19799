"""One snapshot for a read made of several statements that must agree (house style: REPEATABLE READ READ ONLY)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.orm import Session

from service.db.engine import READ_REPLICA

# One for the connection the searches' marked statements run on (the read replica, if any), one for the primary
# (synonyms, lexemes): with no replica both are the same connection, and it is set once.
PRIMARY_SNAPSHOT_SQL = text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
SNAPSHOT_SQL = PRIMARY_SNAPSHOT_SQL.execution_options(**{READ_REPLICA: True})


@contextmanager
def read_snapshot(session: Session) -> Iterator[bool]:
    """Run the block in one REPEATABLE READ READ ONLY transaction, ended when the block ends; yields whether it did.

    An isolation level can only be chosen before a transaction's first statement, so a session already in a
    transaction (a ticket being answered, an outer transaction's savepoint as in the tests) keeps its own.
    """
    if session.in_transaction():
        yield False
        return
    with session.begin():
        fresh = not session.connection(bind_arguments={"clause": SNAPSHOT_SQL}).in_nested_transaction()
        if fresh:
            session.execute(SNAPSHOT_SQL)
            if session.get_bind(clause=SNAPSHOT_SQL) is not session.get_bind(clause=PRIMARY_SNAPSHOT_SQL):
                session.execute(PRIMARY_SNAPSHOT_SQL)
        yield fresh
