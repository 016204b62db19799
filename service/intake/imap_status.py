"""The IMAP poller's health per folder, kept in ``imap_folders`` (migration 0034) so that /admin/mail shows it
whichever process polls: the last failed pass (a refused login, a certificate that does not verify …) until one
succeeds. A failure is only ever retried as it was: TLS is never downgraded to get past it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from service.db.models import ImapFolder
from service.runtime import Runtime

ERROR_MAX_CHARS = 500


@dataclass(frozen=True)
class PollProblem:
    """A folder whose last pass failed: what was raised, since when, how many passes in a row, the next try."""

    account: str
    folder: str
    error: str
    failures: int
    since: datetime
    retry_at: datetime | None

    @property
    def summary(self) -> str:
        """``IMAP: <error>, retrying`` — what /admin/mail shows."""
        return f"IMAP: {self.error}, retrying"


def record_poll_failure(runtime: Runtime, *, account: str, folder: str, error: str,
                        retry_in: float | None) -> None:
    """Keep the pass's error on the folder's row (made with no UIDVALIDITY when it was never selected), one more
    failed pass in a row. ``retry_in`` None: no next pass is planned by this process (``mail fetch --once``)."""
    retry_at = None if retry_in is None else sa.func.now() + timedelta(seconds=retry_in)
    values = {"poll_error": error[:ERROR_MAX_CHARS], "poll_retry_at": retry_at, "updated_at": sa.func.now()}
    statement = insert(ImapFolder).values(account=account, folder=folder, poll_failures=1,
                                          poll_error_since=sa.func.now(), **values)
    counted = {"poll_failures": ImapFolder.poll_failures + 1,
               "poll_error_since": sa.func.coalesce(ImapFolder.poll_error_since, statement.excluded.poll_error_since)}
    with runtime.session() as session:
        session.execute(statement.on_conflict_do_update(index_elements=["account", "folder"],
                                                        set_={**values, **counted}))


def clear_poll_failure(runtime: Runtime, *, account: str, folder: str) -> None:
    """A pass succeeded: the folder is healthy again."""
    with runtime.session() as session:
        session.execute(sa.update(ImapFolder).where(
            ImapFolder.account == account, ImapFolder.folder == folder, ImapFolder.poll_error.is_not(None))
            .values(poll_error=None, poll_failures=0, poll_error_since=None, poll_retry_at=None))


def poll_problems(session: Session) -> list[PollProblem]:
    """Every folder whose last pass failed, oldest problem first."""
    rows = session.execute(sa.select(ImapFolder).where(ImapFolder.poll_error.is_not(None))
                           .order_by(ImapFolder.poll_error_since)).scalars()
    return [PollProblem(account=row.account, folder=row.folder, error=row.poll_error, failures=row.poll_failures,
                        since=row.poll_error_since, retry_at=row.poll_retry_at) for row in rows]
