"""Issue 33 item 2: one builder of signed, expiring, absolute ticket links; e-mails never link to a request's Host."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest
import sqlalchemy as sa

from service.config import ConfigError, Settings
from service.db.models import MailOutbox
from service.links import base_url, ticket_link, verify_ticket_link
from service.links.signed import LINK_LIFETIME_SECONDS, sign_ticket

PUBLIC = "https://help.example.com"
HANDED_OFF = "Do you ship parrot food to Mars?"  # nothing in the seed articles: the gate hands it to an agent
LINK = re.compile(r"https?://\S+/help/tickets/\d+\?link=\S+")


@pytest.fixture
def mailing(seeded):
    """The test runtime with SMTP configured (nothing is sent: the outbox rows are read) and a public URL."""
    seeded.settings = dataclasses.replace(seeded.settings, smtp_host="127.0.0.1", smtp_port=1,
                                          mail_from="Support <support@example.com>", public_url=PUBLIC)
    return seeded


def outbox_bodies(runtime, ticket_id: int) -> list[str]:
    with runtime.session() as session:
        return list(session.scalars(sa.select(MailOutbox.body).where(MailOutbox.ticket_id == ticket_id)
                                    .order_by(MailOutbox.id)))


def test_a_signed_link_opens_only_its_ticket_and_purpose_until_it_expires(settings):
    token = sign_ticket(settings, 7)
    assert verify_ticket_link(settings, 7, token)
    assert not verify_ticket_link(settings, 8, token)
    assert not verify_ticket_link(settings, 7, token, purpose="rate")
    assert not verify_ticket_link(settings, 7, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    assert not verify_ticket_link(settings, 7, token, now=time.time() + LINK_LIFETIME_SECONDS + 60)
    assert not verify_ticket_link(settings, 7, None) and not verify_ticket_link(settings, 7, "x.y.z")


def test_another_server_secret_does_not_verify(settings, tmp_path):
    other = dataclasses.replace(settings, secret_key="a different server's key")
    assert not verify_ticket_link(other, 7, sign_ticket(settings, 7))


def test_the_link_is_absolute_from_the_public_url_else_host_and_port(settings):
    assert ticket_link(dataclasses.replace(settings, public_url=PUBLIC), 3).startswith(f"{PUBLIC}/help/tickets/3?link=")
    assert base_url(settings) == f"http://{settings.host}:{settings.port}"


def test_validate_requires_the_public_url_once_smtp_is_configured():
    with pytest.raises(ConfigError, match="SUPPORTRAG_PUBLIC_URL"):
        Settings.from_env({"SMTP_HOST": "127.0.0.1", "MAIL_FROM": "support@example.com"})
    Settings.from_env({"SMTP_HOST": "127.0.0.1", "MAIL_FROM": "support@example.com",
                       "SUPPORTRAG_PUBLIC_URL": PUBLIC})


def test_a_ticket_posted_with_an_evil_host_gets_no_link_to_it(mailing, app):
    client = app.test_client()
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"},
                          headers={"Host": "evil.example"}, base_url="http://evil.example")
    assert created.status_code == 201, created.get_data(as_text=True)
    bodies = outbox_bodies(mailing, created.get_json()["ticket"]["id"])
    assert bodies, "the hand-off was acknowledged"
    assert all("evil.example" not in body for body in bodies)
    assert all(LINK.search(body).group().startswith(PUBLIC) for body in bodies)


def test_the_agent_reply_link_opens_the_ticket_with_no_cookie(mailing, app, client):
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    sent = client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet, exactly?"},
                       headers={"Host": "evil.example"})
    assert sent.status_code == 201, sent.get_data(as_text=True)
    reply = outbox_bodies(mailing, ticket_id)[-1]
    assert "Which planet, exactly?" in reply and "evil.example" not in reply
    link = LINK.search(reply).group()
    assert link.startswith(f"{PUBLIC}/help/tickets/{ticket_id}?link=")
    phone = app.test_client()  # another device: no cookie, no secret
    page = phone.get(link.removeprefix(PUBLIC))
    assert page.status_code == 200
    assert "Which planet, exactly?" in page.get_data(as_text=True)
    assert phone.get(f"/help/tickets/{ticket_id}").status_code == 404  # without the link: nothing
    forged = link.removeprefix(PUBLIC).replace(f"/tickets/{ticket_id}?", f"/tickets/{ticket_id + 1}?")
    assert phone.get(forged).status_code == 404


def test_the_customer_can_write_back_from_the_signed_link(mailing, app, client):
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Which planet?"})
    path = LINK.search(outbox_bodies(mailing, ticket_id)[-1]).group().removeprefix(PUBLIC)
    phone = app.test_client()
    page = phone.get(path).get_data(as_text=True)
    token = re.search(r'name="link" value="([^"]+)"', page).group(1)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    posted = phone.post(f"/help/tickets/{ticket_id}/reply", data={"csrf_token": csrf, "link": token,
                                                                 "body": "Mars, please."})
    assert posted.status_code == 303 and "link=" in posted.headers["Location"]
    assert "Mars, please." in phone.get(path).get_data(as_text=True)


def test_the_rating_and_notification_links_are_absolute(mailing, client):
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Done.", "status": "solved"})
    solve = outbox_bodies(mailing, ticket_id)[-1]
    assert f"{PUBLIC}/help/tickets/{ticket_id}/rate?token=" in solve
    assert LINK.search(solve).group().startswith(PUBLIC)
    from service.tickets.notifications import workspace_link
    assert workspace_link(mailing.settings, ticket_id) == f"{PUBLIC}/admin/inbox/{ticket_id}"


def test_serve_says_which_mail_paths_are_on_and_where_links_point(settings):
    from service.web.serving import mail_paths

    off = mail_paths(settings)
    assert "SMTP off" in off[0] and "IMAP off" in off[0] and "inbound webhook off" in off[0]
    assert f"http://{settings.host}:{settings.port}" in off[1]
    on = mail_paths(dataclasses.replace(settings, smtp_host="mail.example.com", public_url=PUBLIC,
                                        inbound_email_secret="s"))
    assert "SMTP on (mail.example.com:25)" in on[0] and "inbound webhook on" in on[0] and PUBLIC in on[1]


def test_the_customer_can_rate_from_the_signed_link(mailing, app, client):
    created = client.post("/api/tickets", json={"subject": "Parrot food", "body": HANDED_OFF,
                                                "email": "maria@example.com"})
    ticket_id = created.get_json()["ticket"]["id"]
    client.post(f"/api/tickets/{ticket_id}/replies", json={"body": "Done.", "status": "solved"})
    path = LINK.search(outbox_bodies(mailing, ticket_id)[-1]).group().removeprefix(PUBLIC)
    phone = app.test_client()
    page = phone.get(path).get_data(as_text=True)
    assert 'id="rating"' in page
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    token = re.search(r'name="link" value="([^"]+)"', page).group(1)
    rated = phone.post(f"/help/tickets/{ticket_id}/rate", data={"csrf_token": csrf, "link": token, "rating": "good"})
    assert rated.status_code == 303 and "link=" in rated.headers["Location"]
    assert "you rated this good" in phone.get(path).get_data(as_text=True)
