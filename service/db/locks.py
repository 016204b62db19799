"""Advisory locks for work that must not interleave before there is a row to lock (issue 36)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import Session

# Class 36 keeps these apart from any other advisory lock; the address is hashed in lower case.
ADDRESS_LOCK_SQL = sa.text("SELECT pg_advisory_xact_lock(36, hashtext(lower(:email)))")


def lock_customer_address(session: Session, email: str | None) -> None:
    """Hold the address's lock until the transaction ends: an erasure and an e-mail from it never interleave."""
    if email:
        session.execute(ADDRESS_LOCK_SQL, {"email": email})
