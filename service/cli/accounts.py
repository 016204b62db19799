"""``supportrag admin …`` and ``supportrag token …``: accounts for the admin pages, tokens for scripts."""

from __future__ import annotations

import json

import click

from service.accounts import (
    TokenNotFound,
    create_admin,
    create_token,
    list_admins,
    list_tokens,
    revoke_token,
    set_admin_password,
)
from service.cli.context import connect
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
def admin_create(username: str, password: str, role: str) -> None:
    """Create an account (there is no default account and no default password)."""

    runtime = connect(seed=False)
    with runtime.session() as session:
        created = create_admin(session, username, password, role=role)
    click.echo(f"created {created.role} {created.username!r}; log in at /admin/login")


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
        admins = list_admins(session)
    if not admins:
        click.echo("no admin accounts; create one with 'supportrag admin create --username NAME'")
    for account in admins:
        click.echo(f"{account.id:4d}  {account.username}  {account.role}")


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
