"""Issue 32 leftovers: an acknowledgement quotes the customer once the address opened a signed link we e-mailed it
(not only once it wrote to us), through the HTTP API and the help page, with a real SMTP server on loopback."""

from __future__ import annotations

from urllib.parse import urlsplit

import sqlalchemy as sa

from service.db.models import Ticket

from .admin_helpers import csrf_from
from .test_mail_hostile import HANDED_OFF, deliver, mailing, smtp  # noqa: F401  (fixtures)

ADDRESS = "dana@example.com"


def _ticket(client, subject: str, email: str = ADDRESS) -> int:
    created = client.post("/api/tickets", json={"subject": subject, "body": HANDED_OFF, "email": email})
    assert created.status_code == 201, created.get_json()
    return created.get_json()["ticket"]["id"]


def _acknowledgement(runtime, smtp, ticket_id: int):
    """The acknowledgement of ``ticket_id`` as the SMTP server received it."""
    deliver(runtime)
    inbox = smtp.wait_for(len(smtp.inbox) + 1, timeout=2)
    return next(m for m in reversed(inbox) if f"T-{ticket_id}" in str(m["Subject"]))


def _signed_path(message) -> str:
    """The ticket page's signed link in an e-mail, as a path and query for the test client."""
    link = next(w for w in message.get_body().get_content().split() if "/help/tickets/" in w and "link=" in w)
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def _quotes(message, words: str) -> bool:
    return words in str(message["Subject"]) + message.get_body().get_content()


def test_an_address_that_opened_a_signed_link_is_quoted_and_one_that_did_not_is_not(mailing, smtp, client,
                                                                                     anonymous_client, session):
    first = _ticket(client, "Parrot food to Mars")
    ack = _acknowledgement(mailing, smtp, first)
    assert not _quotes(ack, "Parrot")  # the address never wrote to us: nothing the submitter typed
    tampered = _signed_path(ack)[:-2] + "xx"
    assert anonymous_client.get(tampered).status_code == 404  # a forged link opens nothing and verifies nothing
    second = _ticket(client, "Parrot seeds to Venus")
    assert not _quotes(_acknowledgement(mailing, smtp, second), "Parrot")

    opened = anonymous_client.get(_signed_path(ack))
    assert opened.status_code == 200 and HANDED_OFF in opened.get_data(as_text=True)
    assert session.scalar(sa.select(Ticket.link_verified_at).where(Ticket.id == first)) is not None

    third = _ticket(client, "Parrot cages for Jupiter", email=ADDRESS.upper())  # the address, case folded
    ack = _acknowledgement(mailing, smtp, third)
    assert str(ack["Subject"]) == f"[T-{third}] Parrot cages for Jupiter"
    assert _quotes(ack, "We received your question (Parrot cages for Jupiter)")
    other = _ticket(client, "Parrot perches", email="erin@example.com")  # someone else's trust is not shared
    assert not _quotes(_acknowledgement(mailing, smtp, other), "Parrot")


def test_a_signed_link_vouches_for_the_address_it_was_sent_to_not_one_typed_in_later(mailing, smtp, client,
                                                                                       anonymous_client, session):
    first = _ticket(client, "Parrot food to Mars")
    path = _signed_path(_acknowledgement(mailing, smtp, first))
    page = anonymous_client.get(path).get_data(as_text=True)  # opened by dana: her address is vouched for
    assert session.scalar(sa.select(Ticket.link_verified_at).where(Ticket.id == first)) is not None
    moved = anonymous_client.post(path.replace("?", "/escalate?", 1),
                                  data={"csrf_token": csrf_from(page), "email": "victim@example.com"})
    assert moved.status_code in (200, 303)
    assert session.scalar(sa.select(Ticket.customer_email).where(Ticket.id == first)) == "victim@example.com"
    assert session.scalar(sa.select(Ticket.link_verified_at).where(Ticket.id == first)) is None
    for address in ("victim@example.com", ADDRESS):
        later = _ticket(client, "Parrot phishing", email=address)
        assert not _quotes(_acknowledgement(mailing, smtp, later), "Parrot")
