"""A real SMTP server on 127.0.0.1 (aiosmtpd's Controller) that keeps every message it accepts."""

from __future__ import annotations

import email
import email.policy
import time
from email.message import EmailMessage

from aiosmtpd.controller import Controller

from .test_serve import free_port


class _Keep:
    def __init__(self, inbox: list[EmailMessage], refused: frozenset[str]) -> None:
        self.inbox, self.refused = inbox, refused

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802 (aiosmtpd's hook)
        if address.lower() in self.refused:  # a mailbox that does not exist: a permanent failure
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.inbox.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"


class SmtpSink:
    """Start and stop an SMTP server on a fixed loopback port; ``inbox`` survives restarts.

    ``refused``: recipient addresses answered ``550`` (user unknown), as a real server does for a missing mailbox.
    """

    def __init__(self, port: int | None = None, refused: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.refused = frozenset(a.lower() for a in refused)
        self.inbox: list[EmailMessage] = []
        self._controller: Controller | None = None

    def start(self) -> "SmtpSink":
        """Listen (again)."""
        self._controller = Controller(_Keep(self.inbox, self.refused), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stop listening: connections are refused, as with a mail server that is down."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def wait_for(self, count: int, timeout: float = 10.0) -> list[EmailMessage]:
        """The inbox once it holds ``count`` messages (or whatever it holds at the timeout)."""
        deadline = time.monotonic() + timeout
        while len(self.inbox) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.inbox

    def __enter__(self) -> "SmtpSink":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def sending_env(sink: SmtpSink, base_url: str) -> dict[str, str]:
    """The settings under which a served service sends its mail to ``sink``, replies plus-addressed to it, and
    links to ``base_url``."""
    return {"SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(sink.port), "MAIL_FROM": "Support <support@example.com>",
            "MAIL_REPLY_TO": "support+{token}@example.com", "SUPPORTRAG_PUBLIC_URL": base_url}
