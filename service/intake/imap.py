"""IMAP intake, one pass: each new message of the folder is stored through the intake, then recorded as taken.

Exactly once across restarts and crashes: ``imap_folders`` keeps the folder's UIDVALIDITY and the highest UID
stored. A message is recorded only after ``receive_email`` has committed it; a crash in between fetches it again
on the next pass, and the intake's dedupe (Message-ID, else content hash) drops the second copy. Messages are read
with ``BODY.PEEK[]`` (reading never marks them \\Seen), then moved to IMAP_PROCESSED_FOLDER, or flagged \\Seen
when that is unset. A changed UIDVALIDITY (a rebuilt or restored mailbox) restarts the folder from UID 1 under
the same dedupe. A message that raises is retried on the next passes, then left in the mailbox with a keyword.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import sqlalchemy as sa
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientError
from imapclient.imapclient import SEEN
from sqlalchemy.dialects.postgresql import insert

from service.config import Settings
from service.db.models import ImapFolder
from service.intake.receive import receive_email
from service.links import ticket_link
from service.mail.transport import tls_context
from service.runtime import Runtime

log = logging.getLogger(__name__)
IMPLICIT_TLS_PORT = 993  # IMAPS; any other port with IMAP_TLS on upgrades with STARTTLS
TIMEOUT_SECONDS = 30.0
MAX_ATTEMPTS = 5  # passes a message may fail before it is left in the mailbox, flagged FAILED_KEYWORD
FAILED_KEYWORD = "$SupportragFailed"
GIVEN_UP = "left_in_mailbox"  # the outcome of a message that failed MAX_ATTEMPTS passes
# The database is unavailable: not the message's fault, so the pass ends and the poller backs off.
DATABASE_OUTAGES = (sa.exc.OperationalError, sa.exc.InterfaceError)


@dataclass(frozen=True)
class FolderPlace:
    """Where the poller is in a folder: the highest UID taken, and the \\Seen policy's baseline."""

    uidvalidity: int
    last_uid: int
    baseline_uid: int
    reset: bool  # the UIDVALIDITY changed since the last pass: the folder is scanned again from UID 1


@dataclass(frozen=True)
class FetchReport:
    """One pass: messages read from the server, what the intake did with them, and those that raised."""

    folder: str
    uidvalidity: int
    fetched: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    reset: bool = False

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"folder": self.folder, "uidvalidity": self.uidvalidity, "fetched": self.fetched,
                "outcomes": dict(self.outcomes), "failed": self.failed, "reset": self.reset}


def account_key(settings: Settings) -> str:
    """The mailbox account a folder's progress belongs to: ``user@host:port``."""
    return f"{settings.imap_username}@{settings.imap_host}:{settings.imap_port}"


def ticket_link_for(settings: Settings) -> Callable[[int, str], str]:
    """The customer's page of a new ticket, for its acknowledgement (SUPPORTRAG_PUBLIC_URL, else host:port)."""
    return lambda ticket_id, _secret: ticket_link(settings, ticket_id)


def connect_mailbox(settings: Settings, *, timeout: float = TIMEOUT_SECONDS) -> IMAPClient:
    """Log in: implicit TLS on port 993, STARTTLS on another port, plain only with IMAP_TLS off."""
    implicit = settings.imap_tls and settings.imap_port == IMPLICIT_TLS_PORT
    context = tls_context(settings)  # certificate and host name checked; SMTP_CA_FILE for a private CA
    client = IMAPClient(settings.imap_host, port=settings.imap_port, ssl=implicit, ssl_context=context,
                        timeout=timeout)
    try:
        if settings.imap_tls and not implicit:
            client.starttls(context)
        client.login(settings.imap_username, settings.imap_password or "")
    except BaseException:
        close_mailbox(client)
        raise
    return client


def close_mailbox(client: IMAPClient) -> None:
    """Log out, or just drop the connection when the server is gone."""
    try:
        client.logout()
    except Exception:  # the connection is already broken: nothing left to close politely
        try:
            client.shutdown()
        except Exception:
            pass


def open_folder(runtime: Runtime, *, account: str, folder: str, uidvalidity: int, uidnext: int) -> FolderPlace:
    """The folder's stored place; a new folder or a changed UIDVALIDITY starts again from UID 1."""
    with runtime.session() as session:
        session.execute(insert(ImapFolder).values(account=account, folder=folder, uidvalidity=uidvalidity,
                                                  last_uid=0, baseline_uid=uidnext - 1)
                        .on_conflict_do_nothing(index_elements=["account", "folder"]))
        row = session.get(ImapFolder, (account, folder), with_for_update=True, populate_existing=True)
        if row.uidvalidity is None:  # only a failed pass's poll_error was recorded: a new folder after all
            row.uidvalidity, row.last_uid, row.baseline_uid = uidvalidity, 0, uidnext - 1
        reset = row.uidvalidity != uidvalidity
        if reset:
            log.warning("IMAP folder %s of %s: UIDVALIDITY changed from %s to %s; scanning it again from UID 1 "
                        "(the intake's dedupe drops what was already taken)", folder, account, row.uidvalidity,
                        uidvalidity)
            row.uidvalidity, row.last_uid, row.baseline_uid = uidvalidity, 0, uidnext - 1
            row.failed_uid, row.failed_attempts, row.last_error = None, 0, None
        return FolderPlace(uidvalidity=uidvalidity, last_uid=row.last_uid, baseline_uid=row.baseline_uid,
                           reset=reset)


def _this_folder(account: str, folder: str, uidvalidity: int):
    return sa.update(ImapFolder).where(ImapFolder.account == account, ImapFolder.folder == folder,
                                       ImapFolder.uidvalidity == uidvalidity)


def record_taken(runtime: Runtime, *, account: str, folder: str, uidvalidity: int, uid: int) -> None:
    """Remember that ``uid`` is stored (never moves backwards; a changed UIDVALIDITY matches no row)."""
    with runtime.session() as session:
        session.execute(_this_folder(account, folder, uidvalidity).values(
            last_uid=sa.func.greatest(ImapFolder.last_uid, uid), failed_uid=None, failed_attempts=0,
            last_error=None, updated_at=sa.func.now()))


def record_failure(runtime: Runtime, *, account: str, folder: str, uidvalidity: int, uid: int,
                   error: str) -> int:
    """Count one more failed attempt at ``uid``; returns how many in a row."""
    with runtime.session() as session:
        attempts = session.scalar(_this_folder(account, folder, uidvalidity).values(
            failed_attempts=sa.case((ImapFolder.failed_uid == uid, ImapFolder.failed_attempts + 1), else_=1),
            failed_uid=uid, last_error=error[:500], updated_at=sa.func.now()).returning(ImapFolder.failed_attempts))
    return attempts or 1


def pending_uids(client: IMAPClient, place: FolderPlace, *, seen_policy: bool) -> list[int]:
    """UIDs still to take, oldest first: above ``last_uid``; under the \\Seen policy, mail already read (or given
    up on) when the folder was first seen or reset (at or below the baseline) is not taken."""
    newer = [uid for uid in client.search(["UID", f"{place.last_uid + 1}:*"]) if uid > place.last_uid]
    if seen_policy and place.last_uid < place.baseline_uid:
        unread = client.search(["UNSEEN", "UNKEYWORD", FAILED_KEYWORD, "UID",
                                f"{place.last_uid + 1}:{place.baseline_uid}"])
        newer = [uid for uid in newer if uid > place.baseline_uid] + list(unread)
    return sorted(set(newer))


def file_away(client: IMAPClient, uids: list[int], processed_folder: str | None) -> None:
    """Apply the policy to taken messages: move them to the processed folder, else flag them \\Seen."""
    if not uids:
        return
    if processed_folder is None:
        client.add_flags(uids, [SEEN])
    elif client.has_capability("MOVE"):
        client.move(uids, processed_folder)
    else:  # RFC 3501 only: copy, then expunge just these (UID EXPUNGE needs UIDPLUS)
        client.copy(uids, processed_folder)
        client.delete_messages(uids)
        client.expunge(uids if client.has_capability("UIDPLUS") else None)


def _move_leftovers(client: IMAPClient, last_uid: int, processed_folder: str) -> None:
    """Messages already taken that are still in the folder (a crash before the move) go now; given-up ones stay."""
    if last_uid < 1:
        return
    left = [uid for uid in client.search(["UID", f"1:{last_uid}", "UNKEYWORD", FAILED_KEYWORD]) if uid <= last_uid]
    file_away(client, left, processed_folder)


def _read(client: IMAPClient, uid: int, cap: int) -> tuple[bytes | None, int]:
    """The raw message (its first ``cap + 1`` bytes at most) and its whole size, without setting \\Seen; None when
    it was expunged meanwhile."""
    data = client.fetch([uid], ["RFC822.SIZE", f"BODY.PEEK[]<0.{cap + 1}>"]).get(uid) or {}
    raw = next((value for key, value in data.items() if key.startswith(b"BODY[]")), None)
    over = raw is not None and len(raw) > cap  # only then is the server's size needed (it may count differently)
    return raw, int(data.get(b"RFC822.SIZE") or 0) if over else len(raw or b"")


def _flag_failed(client: IMAPClient, uid: int) -> None:
    """Mark a given-up message for people reading the mailbox (best effort: some servers refuse keywords)."""
    try:
        client.add_flags([uid], [FAILED_KEYWORD])
    except IMAPClientError as exc:
        log.warning("could not flag IMAP message UID %s as %s: %s", uid, FAILED_KEYWORD, exc)


def take_message(runtime: Runtime, client: IMAPClient, *, account: str, place: FolderPlace, uid: int) -> str | None:
    """Store one message through the intake, record it, file it away; its outcome, None to retry it later."""
    settings = runtime.settings
    where = {"account": account, "folder": settings.imap_folder, "uidvalidity": place.uidvalidity, "uid": uid}
    raw, size = _read(client, uid, settings.inbound_raw_max_bytes)
    if raw is None:
        record_taken(runtime, **where)
        return "gone"
    try:
        outcome = receive_email(runtime, raw, ticket_link=ticket_link_for(settings), size=size)
    except DATABASE_OUTAGES:
        raise
    except Exception as exc:  # this message's fault: the others must still come in
        attempts = record_failure(runtime, **where, error=f"{type(exc).__name__}: {exc}")
        log.exception("IMAP message UID %s in %s failed (attempt %s of %s)", uid, settings.imap_folder, attempts,
                      MAX_ATTEMPTS)
        if attempts < MAX_ATTEMPTS:
            return None
        _flag_failed(client, uid)
        record_taken(runtime, **where)
        log.error("IMAP message UID %s left in %s, flagged %s", uid, settings.imap_folder, FAILED_KEYWORD)
        return GIVEN_UP
    record_taken(runtime, **where)
    file_away(client, [uid], settings.imap_processed_folder)
    log.info("IMAP message UID %s in %s: %s %s", uid, settings.imap_folder, outcome.action, outcome.ticket_id or "")
    return outcome.action


def fetch_new_mail(runtime: Runtime, client: IMAPClient) -> FetchReport:
    """One pass over the configured folder with a logged-in ``client``; stops at a message that fails."""
    settings = runtime.settings
    account, folder, processed = account_key(settings), settings.imap_folder, settings.imap_processed_folder
    if processed is not None and not client.folder_exists(processed):
        client.create_folder(processed)
    selected = client.select_folder(folder)
    uidnext = int(selected.get(b"UIDNEXT") or max(client.search(["ALL"]) or [0]) + 1)
    place = open_folder(runtime, account=account, folder=folder, uidvalidity=int(selected[b"UIDVALIDITY"]),
                        uidnext=uidnext)
    if processed is not None:
        _move_leftovers(client, place.last_uid, processed)
    outcomes: Counter[str] = Counter()
    fetched = failed = 0
    for uid in pending_uids(client, place, seen_policy=processed is None):
        fetched += 1
        action = take_message(runtime, client, account=account, place=place, uid=uid)
        if action is None:
            failed += 1
            break  # retried on the next pass, in order, so that last_uid never skips it
        outcomes[action] += 1
    return FetchReport(folder=folder, uidvalidity=place.uidvalidity, fetched=fetched, outcomes=dict(outcomes),
                       failed=failed, reset=place.reset)
