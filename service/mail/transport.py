"""Handing an e-mail to a mail server (SMTP), and telling a permanent failure from a temporary one."""

from __future__ import annotations

import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

from service.config import Settings
from service.mail.compose import InvalidAddress

SMTP_TIMEOUT_SECONDS = 15.0


class Transport(Protocol):
    """Something that hands an e-mail to a mail server, or raises."""

    def send(self, message: EmailMessage) -> None:
        """Send or raise."""


class _GoodbyeCannotFail:
    """An SMTP connection whose goodbye cannot fail a send: once the server accepted the message (DATA answered
    250), an error on QUIT (a server that hangs up, a 4xx) only closes the connection. Raising then would retry a
    delivered e-mail, and the customer would get it twice."""

    def __exit__(self, *args) -> None:
        try:
            super().__exit__(*args)  # QUIT, then close
        except (smtplib.SMTPException, OSError):
            self.close()


class _AcceptedSmtp(_GoodbyeCannotFail, smtplib.SMTP):
    """Plain SMTP (STARTTLS upgrades it), its goodbye unable to fail a send."""


class _AcceptedSmtpSsl(_GoodbyeCannotFail, smtplib.SMTP_SSL):
    """SMTP over implicit TLS, its goodbye unable to fail a send."""


class TlsUnavailable(smtplib.SMTPException):
    """SMTP_TLS=starttls and the server offers no STARTTLS: nothing is sent in the clear (retried)."""


def tls_context(settings: Settings) -> ssl.SSLContext:
    """Certificate and host name checked, against the system's CAs and SMTP_CA_FILE when set."""
    context = ssl.create_default_context()
    if settings.smtp_ca_file:
        context.load_verify_locations(cafile=settings.smtp_ca_file)
    return context


class SmtpTransport:
    """SMTP with the SMTP_* settings: SMTP_TLS (STARTTLS or implicit TLS, verified) and login when configured."""

    def __init__(self, settings: Settings, timeout: float = SMTP_TIMEOUT_SECONDS) -> None:
        self.settings, self.timeout = settings, timeout

    def _connect(self) -> smtplib.SMTP:
        s = self.settings
        if s.smtp_tls == "implicit":
            return _AcceptedSmtpSsl(s.smtp_host, s.smtp_port, timeout=self.timeout, context=tls_context(s))
        return _AcceptedSmtp(s.smtp_host, s.smtp_port, timeout=self.timeout)

    def send(self, message: EmailMessage) -> None:
        """Open a connection (TLS as SMTP_TLS says, never downgraded), log in, send, close."""
        s = self.settings
        with self._connect() as smtp:
            if s.smtp_tls == "starttls":
                smtp.ehlo()
                if not smtp.has_extn("starttls"):
                    raise TlsUnavailable("the server offers no STARTTLS, and SMTP_TLS=starttls never sends in the "
                                         "clear")
                smtp.starttls(context=tls_context(s))
            if s.smtp_username:
                smtp.login(s.smtp_username, s.smtp_password or "")
            smtp.send_message(message)


@dataclass(frozen=True)
class Failure:
    """Why a send failed, and whether trying again could ever help."""

    permanent: bool
    reason: str


def _reply_text(code: int, text: bytes | str) -> str:
    shown = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return f"{code} {shown}".strip()


def classify_failure(exc: BaseException) -> Failure:
    """A 5xx for the recipient or the content, or an invalid address, is permanent; anything else is retried.

    A 5xx to MAIL FROM or to the login is about this server's settings, not this e-mail: it is retried (bounded)
    so that one wrong password does not fail every queued e-mail at once.
    """
    name = type(exc).__name__
    if isinstance(exc, InvalidAddress):
        return Failure(True, f"{name}: {exc}")
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        replies = list(exc.recipients.values())
        reason = "; ".join(f"{address}: {_reply_text(*reply)}" for address, reply in exc.recipients.items())
        return Failure(bool(replies) and all(code >= 500 for code, _ in replies), f"recipient refused: {reason}")
    if isinstance(exc, (smtplib.SMTPSenderRefused, smtplib.SMTPAuthenticationError)):
        return Failure(False, f"{name}: {_reply_text(exc.smtp_code, exc.smtp_error)}")
    if isinstance(exc, smtplib.SMTPResponseException):
        return Failure(exc.smtp_code >= 500, f"{name}: {_reply_text(exc.smtp_code, exc.smtp_error)}")
    if isinstance(exc, ssl.SSLCertVerificationError):  # the settings or the server, not this e-mail: retried
        return Failure(False, f"TLS certificate not trusted ({exc.verify_message}); nothing was sent. Set "
                              "SMTP_CA_FILE for a private CA")
    if isinstance(exc, smtplib.SMTPNotSupportedError):  # e.g. a non-ASCII address and no SMTPUTF8
        return Failure(True, f"{name}: {exc}")
    return Failure(False, f"{name}: {exc}")
