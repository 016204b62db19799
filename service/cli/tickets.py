"""Ticket commands: ask, gaps, tickets recover."""

from __future__ import annotations

import json

import click

from service.cli.context import connect
from service.tickets.queries import content_gaps, get_ticket
from service.tickets.recovery import recover_stuck_tickets
from service.tickets.workflow import answer_ticket


@click.command()
@click.argument("text")
@click.option("--subject", help="Ticket subject (default: the first line of TEXT).")
@click.option("--json", "as_json", is_flag=True, help="Print the stored ticket as JSON.")
def ask(text: str, subject: str | None, as_json: bool) -> None:
    """Submit a ticket and print the answer, its mode and the cited articles with scores."""
    runtime = connect()
    subject = subject or text.strip().splitlines()[0][:300] if text.strip() else subject
    ticket_id = answer_ticket(runtime, runtime.chat, {"subject": subject or "", "body": text})
    with runtime.session() as session:
        ticket = get_ticket(session, ticket_id)
    if as_json:
        click.echo(json.dumps(ticket.to_dict(), indent=2))
        return
    click.echo(f"ticket {ticket.id}: {ticket.status} (mode: {ticket.mode}; {ticket.reason})\n")
    click.echo(ticket.answer or "")
    if ticket.citations:
        click.echo("\nretrieved articles:")
    for c in ticket.citations:
        mark = "cited" if c["cited"] else "     "
        similarity = "n/a (keyword search only)" if c["similarity"] is None else f"{c['similarity']:.4f}"
        click.echo(f"  [{c['rank']}] {mark} {c['title']}  score {c['score']:.4f} (similarity {similarity}, "
                   f"recency {c['recency']:.4f}, importance {c['importance']:.2f})")
        if c["section"]:
            click.echo(f"             section: {c['section']}")


@click.command()
@click.option("--days", default=30, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def gaps(days: int, as_json: bool) -> None:
    """Handed-off or unhelpful recent tickets, grouped by nearest article: what to write next."""
    runtime = connect()
    with runtime.session() as session:
        groups = content_gaps(session, days=days)
    if as_json:
        click.echo(json.dumps(groups, indent=2))
        return
    if not groups:
        click.echo(f"no handed-off or unhelpful tickets in the last {days} days")
    for group in groups:
        nearest = group["nearest_article"]
        label = f"{nearest['title']} [{nearest['category'] or '-'}]" if nearest else f"({group['label']})"
        click.echo(f"{group['tickets']:4d} tickets  nearest: {label}  "
                   f"(needs agent {group['needs_agent']}, not helpful {group['not_helpful']})")
        for example in group["examples"]:
            click.echo(f"        - {example}")


@click.group(name="tickets")
def tickets_group() -> None:
    """Ticket maintenance."""


@tickets_group.command()
@click.option("--older-than", type=click.IntRange(min=0),
              help="Seconds since submission (default: SUPPORTRAG_TICKET_STUCK_SECONDS, 300).")
def recover(older_than: int | None) -> None:
    """Answer again, or mark failed, every ticket still 'received' past the timeout (its worker died)."""
    runtime = connect()
    seconds = runtime.settings.ticket_stuck_seconds if older_than is None else older_than
    recovery = recover_stuck_tickets(runtime, runtime.chat, older_than_seconds=seconds)
    click.echo(f"{recovery.found} stuck ticket(s) older than {seconds} s")
    for ticket_id, status in recovery.outcomes.items():
        click.echo(f"  ticket {ticket_id}: {status}")
