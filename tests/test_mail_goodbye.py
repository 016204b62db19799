"""Issue 33 item 7: once the server accepted an e-mail, an error on QUIT does not fail (and so repeat) the send;
on shutdown the mail worker finishes the send it holds and claims no other."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from email.message import EmailMessage

import pytest
import sqlalchemy as sa

from service.db.models import MailOutbox
from service.mail.transport import SmtpTransport
from service.mail.worker import MailWorker


class RudeSmtpServer:
    """A minimal SMTP server on loopback that accepts every message, then answers QUIT with a 554 or hangs up."""

    def __init__(self, goodbye: bytes | None) -> None:
        self.goodbye, self.messages = goodbye, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.sock.accept()
        with connection, connection.makefile("rb") as lines:
            connection.sendall(b"220 rude ESMTP\r\n")
            while line := lines.readline():
                verb = line[:4].upper()
                if verb == b"DATA":
                    connection.sendall(b"354 go on\r\n")
                    data = b"".join(iter(lambda: lines.readline(), b".\r\n"))
                    self.messages.append(data)
                    connection.sendall(b"250 accepted\r\n")
                elif verb == b"QUIT":
                    if self.goodbye:
                        connection.sendall(self.goodbye)
                    return
                else:
                    connection.sendall(b"250 ok\r\n")

    def close(self) -> None:
        self.sock.close()


def message() -> EmailMessage:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = "support@example.com", "maria@example.com", "Hello"
    mail.set_content("Your reply.")
    return mail


@pytest.mark.parametrize("goodbye", [b"554 no goodbye for you\r\n", None], ids=["554 on QUIT", "hang up"])
def test_an_error_on_quit_after_the_message_was_accepted_is_not_a_failed_send(settings, goodbye):
    server = RudeSmtpServer(goodbye)
    try:
        SmtpTransport(dataclasses.replace(settings, smtp_host="127.0.0.1", smtp_port=server.port),
                      timeout=5).send(message())
        server.thread.join(5)
        assert len(server.messages) == 1
    finally:
        server.close()


class SlowTransport:
    """Takes a while per e-mail, and says when it has started one."""

    def __init__(self) -> None:
        self.started, self.sent = threading.Event(), []

    def send(self, mail: EmailMessage) -> None:
        self.started.set()
        time.sleep(0.5)
        self.sent.append(mail["Message-ID"])


def test_stopping_the_worker_mid_send_finishes_that_send_and_claims_no_other(runtime, session):
    session.add_all(MailOutbox(to_address=f"c{n}@example.com", subject="s", body="b",
                               message_id=f"<stop{n}@example.com>") for n in range(3))
    session.flush()
    transport = SlowTransport()
    worker = MailWorker(runtime, transport, interval=0.1).start()
    assert transport.started.wait(10)
    worker.stop()  # as gunicorn's worker_exit does on SIGTERM
    rows = session.execute(sa.select(MailOutbox.message_id, MailOutbox.sent_at, MailOutbox.locked_until)
                           .where(MailOutbox.message_id.like("<stop%"))
                           .execution_options(populate_existing=True)).all()
    sent = [r.message_id for r in rows if r.sent_at is not None]
    assert sent == transport.sent == ["<stop0@example.com>"]
    assert all(r.locked_until is None for r in rows if r.sent_at is None)  # nothing held: a restart sends them once
