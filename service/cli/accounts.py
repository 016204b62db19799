"""``supportrag admin …`` and ``supportrag token …``: accounts for the admin pages, tokens for scripts."""

from __future__ import annotations

import json

import click

from service.accounts import (
    TokenNotFound,
    create_admin,
    create_token,
    list_tokens,
    revoke_token,
    set_admin_password,
)
from service.cli.context import connect
from service.tickets.team import list_profiles, update_profile
from service.db.models import ROLES


@click.group()
def admin() -> None:
    """Admin accounts for the /admin pages."""


@admin.command("create")
@click.option("--username", required=True)
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True,
              help="Prompted for (hidden) when omitted; at least 10 characters.")
@click.option("--role", type=click.Choice(ROLES), default="admin", show_default=True,
              help="agent: works tickets and reads the knowledge base; admin: everything.")
@click.option("--email", default=None, help="Where this agent's notifications go.")
@click.option("--display-name", default=None, help="The name customers see on replies (default: Support).")
def admin_create(username: str, password: str, role: str, email: str | None, display_name: str | None) -> None:
    """Create an account (there is no default account and no default password)."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        created = create_admin(session, username, password, role=role, email=email, display_name=display_name)
    click.echo(f"created {created.role} {created.username!r}; log in at /admin/login")


@admin.command("edit")
@click.option("--username", required=True)
@click.option("--email", default=None, help="Where notifications go ('' removes it).")
@click.option("--display-name", default=None, help="The name customers see ('' shows Support).")
@click.option("--notify/--no-notify", default=None, help="E-mail notifications on or off.")
def admin_edit(username: str, email: str | None, display_name: str | None, notify: bool | None) -> None:
    """Change an account's display name, e-mail or notification switch (only the options given)."""

    fields = {name: value for name, value in (("email", email), ("display_name", display_name),
                                              ("notify_by_email", notify)) if value is not None}
    runtime = connect(seed=False)
    with runtime.session() as session:
        profile = update_profile(session, username, fields)
    click.echo(f"{profile.username}: display name {profile.display_name or 'Support'!r}, "
               f"e-mail {profile.email or '-'}, notifications {'on' if profile.notify_by_email else 'off'}")


@admin.command("set-password")
@click.option("--username", required=True)
@click.option("--password", prompt="New password", hide_input=True, confirmation_prompt=True)
def admin_set_password(username: str, password: str) -> None:
    """Replace an admin's password; their open sessions end."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        changed = set_admin_password(session, username, password)
    click.echo(f"password changed for {changed.username!r}")


@admin.command("list")
def admin_list() -> None:
    """List admin accounts."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        admins = list_profiles(session)
    if not admins:
        click.echo("no admin accounts; create one with 'supportrag admin create --username NAME'")
    for account in admins:
        click.echo(f"{account.id:4d}  {account.username}  {account.role}  {account.display_name or 'Support'}  "
                   f"{account.email or '-'}  notifications {'on' if account.notify_by_email else 'off'}")


@click.group()
def token() -> None:
    """API tokens for scripts: send them as 'Authorization: Bearer <token>'."""


@token.command("create")
@click.option("--name", required=True, help="What the token is for, e.g. 'nightly import'.")
@click.option("--role", type=click.Choice(ROLES), default="admin", show_default=True,
              help="agent: tickets and reading the knowledge base; admin: everything.")
def token_create(name: str, role: str) -> None:
    """Create a token and print it once (only its SHA-256 is stored)."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        info, secret = create_token(session, name, role=role)
    click.echo(f"{info.role} token {info.id} ({info.name}) created; it is shown only now:", err=True)
    click.echo(secret)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def token_list(as_json: bool) -> None:
    """List tokens (ids, names, dates; never the secrets)."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        tokens = list_tokens(session)
    if as_json:
        click.echo(json.dumps([t.to_dict() for t in tokens], indent=2))
        return
    if not tokens:
        click.echo("no tokens")
    for t in tokens:
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
        click.echo(f"{t.id:4d}  {t.name}  {t.role}  created {t.created_at:%Y-%m-%d %H:%M}  {state}")


@token.command("revoke")
@click.argument("token_id", type=int)
def token_revoke(token_id: int) -> None:
    """Revoke token TOKEN_ID; requests using it get 401 from now on."""

    runtime = connect(seed=False)
    try:
        with runtime.session() as session:
            info = revoke_token(session, token_id)
    except TokenNotFound:
        raise click.ClickException(f"no token with id {token_id}") from None
    click.echo(f"token {info.id} ({info.name}) revoked")
